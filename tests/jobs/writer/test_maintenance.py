"""Table maintenance (jobs/writer/maintenance.py): compaction, VACUUM and log expiry, retention
of raw data, while the job writes and after it restarts. Real Delta tables, real job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import AddAction

from conf.paths import PROJECT_ROOT
from conf.settings.base import SettingsError, flag_name, load_settings
from conf.settings.job import JobSettings
from jobs.spark.arrow_schema import arrow_schema
from jobs.spark.checkpoints import delta_source_version
from jobs.stream import run
from jobs.writer import maintenance as maintenance_module
from jobs.writer.maintenance import Maintenance, Policy, StreamGuard, apply_properties
from jobs.writer.pending import uncommitted
from jobs.writer.tables import ALERTS_SCHEMA, QUARANTINE_SCHEMA, READINGS_SCHEMA, create_tables
from lake.layout import Lake
from tests.support.drills import catch_up, rows, same_stats, start_producer
from tests.support.job_settings import available_now
from tests.support.maintenance import maintenance, passes_beside, policy
from tests.support.polling import STUCK
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl, run_producer

NOW = datetime.now(UTC)


def died(lines: list[str]) -> str:
    """A dead job's output for the failure: its own last lines, the first errors named in
    its output (the cause; what follows is often only the fall-out, a Java trace burying
    the Python one), then its last lines."""
    own = [line for line in lines if line.startswith("jobs.stream:")]
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    return "\n".join([*own[-15:], "--- first errors:", *errors[:15], "--- last lines:",
                      *lines[-30:]])  # fmt: skip


def held_back(lines: list[str]) -> str:
    """For a VACUUM that did not come: what maintenance said, the windows query's last
    batches (how long they took) and the job's last lines."""
    said = [line for line in lines if "maintenance" in line]
    windows = [line for line in lines if line.startswith("jobs.stream: windows #")]
    return "\n".join([*said[-10:], "--- windows batches:", *windows[-8:], "--- last lines:",
                      *lines[-15:]])  # fmt: skip


def live_rows(path: str) -> list[dict]:
    """The table's rows, read from its live files."""
    return [r for uri in DeltaTable(path).file_uris() for r in pq.read_table(uri).to_pylist()]


def readings(offsets: range, ingested_at: datetime) -> pa.Table:
    rows = [
        {"event_id": f"e{o}", "sensor_id": "sensor-0001", "event_time": NOW,
         "temperature_c": 20.0, "humidity_pct": 40.0, "battery_pct": 90.0, "seq": o,
         "kafka_partition": 0, "kafka_offset": o, "kafka_timestamp": NOW,
         "ingested_at": ingested_at}
        for o in offsets
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, arrow_schema(READINGS_SCHEMA))


# -- settings ------------------------------------------------------------------------


def test_settings_make_the_policy_and_name_what_is_wrong() -> None:
    settings = load_settings(JobSettings, {"raw_retention": "30 days"})
    made = Policy.of(settings)
    assert made == Policy(20, 8 * 2**20, 128 * 2**20, timedelta(hours=1), timedelta(days=30))
    assert made.table_properties()["delta.logRetentionDuration"] == "interval 3600 seconds"
    assert Policy.of(load_settings(JobSettings, {"raw_retention": "off"})).raw_retention is None
    for name, value, says in (
        ("vacuum_retention", "5 seconds", "at least '30 seconds'"),
        ("compact_min_files", "1", "greater than or equal to 2"),
        ("raw_retention", "a month", "expected an interval"),
        ("compact_small_mb", "256", "must not exceed --compact-target-mb"),
    ):
        with pytest.raises(SettingsError) as error:
            load_settings(JobSettings, {name: value})
        assert flag_name(name) in str(error.value) and says in str(error.value)


# -- the guard -----------------------------------------------------------------------


def test_stream_guard_waits_until_the_stream_read_past_what_expires() -> None:
    now = [1000.0]
    needed: list[int | None] = [None]
    guard = StreamGuard(lambda: needed[0], clock=lambda: now[0])
    hour = timedelta(hours=1)

    guard.note(10)  # at the job's start the table is at version 10
    assert guard.expiry(hour).log  # no stream checkpoint: nothing to wait for
    needed[0] = 5  # a stream that still has to read versions 5 and on
    assert not guard.expiry(hour).log
    needed[0] = 11  # it read everything there was at the start
    assert guard.expiry(hour).log

    now[0] += 7200  # two hours on, the table at version 500, the stream behind
    guard.note(500)
    needed[0] = 400
    # What expires is older than an hour: at most version 500 (noted first after the
    # cutoff); the stream still needs versions from 400 on.
    assert not guard.expiry(hour).log
    needed[0] = 501
    assert guard.expiry(hour).log


def test_stream_guard_lets_only_vacuum_go_for_a_stream_at_the_newest_version() -> None:
    now = [1000.0]
    needed: list[int | None] = [None]
    guard = StreamGuard(lambda: needed[0], clock=lambda: now[0])
    hour = timedelta(hours=1)
    assert guard.expiry(hour).files  # no stream: nothing to wait for
    needed[0] = 0
    assert not guard.expiry(hour).files  # nothing noted yet: nothing known

    guard.note(10)
    now[0] += 7200  # two hours on, the table at version 12: what expires is of 12 or older
    guard.note(12)
    needed[0] = 11  # version 12 may have replaced a file the stream reads again
    assert not guard.expiry(hour).files and not guard.expiry(hour).log
    needed[0] = 12  # its newest batch read no new data: it starts at the newest version
    assert guard.expiry(hour).files
    assert not guard.expiry(hour).log  # version 12's log entry may still be read


def test_stream_guard_leaves_a_margin_for_deletions_that_come_seconds_later() -> None:
    """Notes every second (the table at version t at second t), a 30 s retention: at
    t=40 the stream has read versions up to 10. A cutoff of exactly 30 s would allow
    deleting what is older than t=10, and the deletion, a few seconds later, would then
    take versions 11 and 12 that the stream still needs."""
    now = [0.0]
    needed: list[int | None] = [11]
    guard = StreamGuard(lambda: needed[0], clock=lambda: now[0])
    for second in range(41):
        now[0] = float(second)
        guard.note(second)

    assert not guard.expiry(timedelta(seconds=30)).log
    needed[0] = 19  # read past the cutoff and its margin (40 - 30 * 0.75 = 17.5)
    assert guard.expiry(timedelta(seconds=30)).log


def test_delta_source_version_is_where_the_newest_completed_batch_started(tmp_path) -> None:
    checkpoint = tmp_path / "cp"
    assert delta_source_version(str(checkpoint)) is None
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    for batch, version in ((0, 3), (1, 7), (2, 9)):
        (checkpoint / "offsets" / str(batch)).write_text(
            'v1\n{"batchWatermarkMs":0}\n'
            f'{{"sourceVersion":1,"reservoirId":"x","reservoirVersion":{version},'
            '"index":-1,"isStartingVersion":false}\n'
        )
    (checkpoint / "commits" / "0").write_text("v1\n{}\n")
    # Only batch 0 done: a restart plans it again from the table's start.
    assert delta_source_version(str(checkpoint)) == 0
    (checkpoint / "commits" / "1").write_text("v1\n{}\n")
    # Batch 1 (3 to 7) done, batch 2 planned but not done: a restart plans batch 1 again,
    # from 3, before it runs batch 2 from 7.
    assert delta_source_version(str(checkpoint)) == 3


# -- on plain tables -----------------------------------------------------------------


def test_compaction_next_to_appends_keeps_every_row_once(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("readings")
    for i in range(10):
        write_deltalake(path, readings(range(i * 10, i * 10 + 10), NOW), mode="append")
    keeper = maintenance(lake, tables=("readings",))
    # The job's ingest, meanwhile.
    appended = passes_beside(
        keeper,
        lambda i: write_deltalake(path, readings(range(i * 10, i * 10 + 10), NOW), mode="append"),
        range(10, 200),
    )

    offsets = Counter(r["kafka_offset"] for r in live_rows(path))
    assert set(offsets.values()) == {1}
    assert set(offsets) == set(range((10 + len(appended)) * 10))
    assert keeper.counts.compactions >= 2
    assert len(DeltaTable(path).file_uris()) < 3
    # Compactions committed (the last commit may be an append the final pass left: fewer
    # small files than compact_min_files are not compacted).
    assert any(h["operation"] == "OPTIMIZE" for h in DeltaTable(path).history())


def test_files_past_the_small_size_wait_for_the_hourly_compaction(tmp_path, monkeypatch) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("readings")
    for i in range(4):
        write_deltalake(path, readings(range(i * 500, i * 500 + 500), NOW), mode="append")
    # Every file is over the small size: the frequent step leaves them alone.
    keeper = maintenance(lake, tables=("readings",), small_size=1024)
    keeper.run_pass(housekeeping=False)
    assert (keeper.counts.compactions, len(DeltaTable(path).file_uris())) == (0, 4)

    monkeypatch.setattr(maintenance_module, "LARGE_COMPACTION_EVERY_S", 0.0)
    keeper.run_pass(housekeeping=False)  # the hour is up: into one file under 128 MB

    assert (keeper.counts.compactions, len(DeltaTable(path).file_uris())) == (1, 1)
    assert sorted(r["kafka_offset"] for r in live_rows(path)) == list(range(2000))


def test_vacuum_and_log_expiry_remove_only_what_was_replaced(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    keeper = maintenance(lake, tables=("quarantine",))
    apply_properties(lake, keeper.policy)
    path = lake.table("quarantine")
    row = {"raw_value": "{", "error": "not JSON", "kafka_partition": 0, "kafka_timestamp": NOW,
           "ingested_at": NOW}  # fmt: skip
    schema = arrow_schema(QUARANTINE_SCHEMA)
    for offset in range(6):
        write_deltalake(
            path, pa.Table.from_pylist([{**row, "kafka_offset": offset}], schema), mode="append"
        )
    keeper.run_pass(housekeeping=False)  # compacts: 6 files replaced by 1
    on_disk = {p.name for p in Path(path).glob("*.parquet")}
    assert len(on_disk) == 7

    keeper.run_pass(housekeeping=True)  # retention 0: the 6 replaced files go

    live = {u.rsplit("/", 1)[-1] for u in DeltaTable(path).file_uris()}
    assert {p.name for p in Path(path).glob("*.parquet")} == live
    assert len(live) == 1
    assert sorted(r["kafka_offset"] for r in live_rows(path)) == list(range(6))
    assert keeper.counts.files_vacuumed == 6
    # The log starts at the compaction's checkpoint: nothing before it is replayed.
    log = sorted(int(p.stem) for p in (Path(path) / "_delta_log").glob("*.json"))
    checkpoints = [
        int(p.name.split(".")[0]) for p in Path(path, "_delta_log").glob("*.checkpoint.parquet")
    ]
    assert log[0] == max(checkpoints) > 0
    config = DeltaTable(path).metadata().configuration
    assert config["delta.deletedFileRetentionDuration"] == "interval 0 seconds"
    assert config["delta.enableExpiredLogCleanup"] == "false"


def test_vacuum_of_readings_waits_for_the_windows_query(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("readings")
    for i in range(4):
        write_deltalake(path, readings(range(i, i + 1), NOW), mode="append")
    needed = [1]  # the windows query has not read versions 1 and on
    said: list[str] = []
    keeper = maintenance(lake, lambda: needed[0], tables=("readings",))
    keeper.echo = said.append
    apply_properties(lake, keeper.policy)

    keeper.run_pass(housekeeping=True)  # compacts, must not vacuum
    assert len(list(Path(path).glob("*.parquet"))) == 5
    assert (Path(path) / "_delta_log" / f"{1:020d}.json").exists()
    # Held back for more than a few retentions (0 s here) by a stream that read nothing
    # meanwhile: an idle topic, not slow batches, so nothing to say.
    keeper.run_pass(housekeeping=True)
    keeper.run_pass(housekeeping=True)
    assert said == []
    # A stream that reads on and stays behind: said once, naming the setting.
    needed[0] = 2
    keeper.run_pass(housekeeping=True)
    keeper.run_pass(housekeeping=True)
    assert len(said) == 1 and "--vacuum-retention" in said[0], said

    needed[0] = DeltaTable(path).version() + 1  # it caught up
    keeper.run_pass(housekeeping=True)
    assert len(list(Path(path).glob("*.parquet"))) == 1
    assert len(said) == 1


def test_a_caught_up_stream_lets_vacuum_go_and_keeps_the_log_it_reads_from(tmp_path) -> None:
    """A windows query whose newest micro-batch read no new data starts its next one at
    the table's newest version: every file it may read again is live, so the replaced
    ones go (CI once waited 900 s for a VACUUM after the topic's last reading). The log
    entry of that version stays: an append's log checkpoint could otherwise expire it."""
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("readings")
    for i in range(4):
        write_deltalake(path, readings(range(i, i + 1), NOW), mode="append")
    keeper = maintenance(lake, lambda: DeltaTable(path).version(), tables=("readings",))
    apply_properties(lake, keeper.policy)

    keeper.run_pass(housekeeping=True)  # compacts; the stream reads from the new version

    assert len(list(Path(path).glob("*.parquet"))) == 1
    assert keeper.counts.files_vacuumed == 4
    assert sorted(r["kafka_offset"] for r in live_rows(path)) == list(range(4))
    assert (Path(path) / "_delta_log" / f"{1:020d}.json").exists()  # the log is not expired


def test_raw_retention_deletes_only_old_readings_and_quarantine(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    old, new = NOW - timedelta(days=31), NOW - timedelta(days=29)
    write_deltalake(lake.table("readings"), readings(range(0, 5), old), mode="append")
    write_deltalake(lake.table("readings"), readings(range(5, 8), new), mode="append")
    mixed = pa.concat_tables([readings(range(8, 10), old), readings(range(10, 12), new)])
    write_deltalake(lake.table("readings"), mixed, mode="append")
    quarantine = pa.Table.from_pylist(
        [{"raw_value": "x", "error": "e", "kafka_partition": 1, "kafka_offset": o,
          "kafka_timestamp": old, "ingested_at": at} for o, at in ((0, old), (1, new))],
        arrow_schema(QUARANTINE_SCHEMA),
    )  # fmt: skip
    write_deltalake(lake.table("quarantine"), quarantine, mode="append")
    alert = {"alert_id": "a", "detected_at": old}
    write_deltalake(
        lake.table("alerts"),
        pa.Table.from_pylist([alert], arrow_schema(ALERTS_SCHEMA)),
        mode="append",
    )
    keeper = maintenance(lake, raw_retention=timedelta(days=30), compact_min_files=100)

    keeper.run_pass(housekeeping=True)

    assert sorted(r["kafka_offset"] for r in live_rows(lake.table("readings"))) == [
        5, 6, 7, 10, 11,
    ]  # fmt: skip
    assert [r["kafka_offset"] for r in live_rows(lake.table("quarantine"))] == [1]
    assert [r["alert_id"] for r in live_rows(lake.table("alerts"))] == ["a"]
    assert keeper.counts.rows_expired == 8


# -- with the job --------------------------------------------------------------------


def produce(kafka, topic: str, count: int, start: str, seed: int) -> None:
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", count,
        "--sensors", 20, "--seed", seed, "--start-time", start,
        "--spike-rate", 2, "--sustained-rate", 0.5,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def offsets(lake: Path) -> Counter:
    return Counter(
        (r["kafka_partition"], r["kafka_offset"])
        for table in ("readings", "quarantine")
        for r in live_rows(str(lake / table))
    )


@pytest.mark.slow  # a drill: four job runs over one topic (over a minute, --quick's longest)
def test_the_windows_query_resumes_over_compacted_and_expired_readings(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake = new_topic("maint"), tmp_path / "lake"
    produce(kafka, topic, 3000, "2026-01-01T00:00:00Z", 1)
    run(available_now(kafka, topic, lake), spark)
    # More readings that only ingest reads: the windows query is behind on them.
    produce(kafka, topic, 3000, "2026-01-01T00:30:00Z", 2)
    run(available_now(kafka, topic, lake, readers=False), spark)
    checkpoint = str(lake / "_checkpoints" / "windows")
    behind = delta_source_version(checkpoint)
    assert behind is not None and behind <= DeltaTable(str(lake / "readings")).version()

    # Compaction replaces the files the windows query has not read; retention 0 would
    # VACUUM them at once, and raw_retention 0 deletes every reading.
    keeper = Maintenance(
        Lake(lake),
        policy(compact_min_files=2, raw_retention=timedelta(0)),
        StreamGuard(lambda: delta_source_version(checkpoint)),
    )
    apply_properties(Lake(lake), keeper.policy)
    keeper.run_pass(housekeeping=True)
    assert keeper.counts.failures == 0
    assert live_rows(str(lake / "readings")) == []
    assert keeper.counts.files_vacuumed > 0  # other tables were vacuumed

    # The windows query reads what it had not read, skipping the retention's DELETE.
    produce(kafka, topic, 3000, "2026-01-01T01:00:00Z", 3)
    run(available_now(kafka, topic, lake), spark)
    reference = tmp_path / "reference"
    run(available_now(kafka, topic, reference), spark)
    for table in ("sensor_stats_1m", "sensor_stats_5m"):
        assert same_stats(rows(spark, lake, table), rows(spark, reference, table)), table
    assert {a.alert_id for a in rows(spark, lake, "alerts")} == {
        a.alert_id for a in rows(spark, reference, "alerts")
    }


def readings_vacuumed(lake: Path) -> bool:
    """Whether the readings table's history has a VACUUM that deleted files. False while the
    job's log expiry removes a commit file as the history is read (CI met it): asked again."""
    try:
        history = DeltaTable(str(lake / "readings")).history(200)
    except FileNotFoundError:
        return False
    return any(
        c["operation"] == "VACUUM END"
        and int(c.get("operationMetrics", {}).get("numDeletedFiles", 0)) > 0
        for c in history
    )


@pytest.mark.slow
@pytest.mark.timeout(1500)  # the budget below, plus the producer's and the job's start
def test_maintenance_while_the_job_runs_keeps_every_table_exactly_once(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake = new_topic("maint-live"), tmp_path / "lake"
    registry = tmp_path / "fleet.jsonl"
    # Half a minute of readings: the job appends and compacts side by side. The readings'
    # VACUUM waits for the windows query to read past what it deletes (StreamGuard);
    # under an endless stream on a loaded machine that wait has no bound (its batches
    # outlast 3/4 of the retention), once the stream ends it is one catch-up (the query
    # then starts at the newest version: StreamGuard.expiry). At most 250 readings a
    # batch: 18 small appends to compact however fast the job starts (a cold start that
    # outlasted the sending once met all of them in a few batches). 9,000 readings took
    # 104 and 92 s alone, 4,500 68 and 74 s (docs/appendix/test-runs.md), proving the same.
    producer = start_producer(kafka.bootstrap, topic, tmp_path, count=4500)
    job = None
    try:
        producer.wait_for_line(lambda line: " delivered (" in line, 180)
        job = Running(
            [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
             "--topic", topic, "--lake", str(lake), "--registry", str(registry),
             "--trigger", "1 second", "--readers-trigger", "5 seconds",
             "--maintenance-interval", "1 second", "--compact-min-files", "4",
             "--vacuum-retention", "30 seconds", "--max-offsets-per-trigger", "250"],
            cwd=PROJECT_ROOT,
        )  # fmt: skip
        # Until readings files a compaction replaced over 30 s ago are vacuumed
        # (housekeeping every retention / 4), with the CLI reading alongside: every 10 s,
        # so a dozen reads meet the appends, compactions and VACUUMs. (Run at every poll,
        # its start-ups took 17 of the test's 262 CPU seconds, and a core from the job.)
        budget = 900  # about 2 min on a quiet machine; the whole test took 621 s at a 6.3-s pace
        deadline = time.monotonic() + budget
        vacuumed, next_read, reads = False, 0.0, 0

        def read_with_cli() -> None:
            cli = subprocess.run(
                [str(PROJECT_ROOT / "scripts" / "alerts"), "--lake", str(lake), "--since", "1h"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert cli.returncode == 0, cli.stderr

        while not vacuumed:
            assert time.monotonic() < deadline, (
                f"no VACUUM of the readings table within {budget} s; the windows query "
                f"read from version {delta_source_version(str(lake / '_checkpoints' / 'windows'))}"
                f" of {DeltaTable(str(lake / 'readings')).version()};\n" + held_back(job.output())
            )
            assert job.proc.poll() is None, died(job.output())
            if not DeltaTable.is_deltatable(str(lake / "incidents")):
                time.sleep(0.2)  # polling: the job creates its tables after Spark started
                continue
            if time.monotonic() >= next_read:
                read_with_cli()
                reads += 1
                next_read = time.monotonic() + 10
            vacuumed = readings_vacuumed(lake)
            time.sleep(0 if vacuumed else 1)  # polling the table's history, with a deadline
        read_with_cli()  # once more, over the vacuumed table, the job still running
        job.interrupt_group()
        assert job.finish(timeout=STUCK) == 0, "\n".join(job.lines[-30:])
        assert any(line.startswith("jobs.stream: maintenance:") for line in job.lines)
        assert reads > 1, "the CLI read the lake only once while the job ran"
        if producer.proc.poll() is None:
            producer.terminate()  # it vacuumed before the last reading: fine, and sooner
        assert producer.finish(timeout=STUCK) == 0, "\n".join(producer.lines[-20:])
    finally:
        producer.kill()
        if job is not None:
            job.kill()
    files = len(DeltaTable(str(lake / "readings")).file_uris())
    commits = DeltaTable(str(lake / "readings")).version()
    assert files < commits / 4, (files, commits)

    # A restart after VACUUM resumes: the rest of the topic, once.
    catch_up(spark, kafka, topic, lake, registry)
    manifest = read_jsonl(tmp_path / "manifest.jsonl")
    landed = offsets(lake)
    assert set(landed.values()) == {1}, "an offset landed twice"
    assert set(landed) == {(m["partition"], m["offset"]) for m in manifest}, "an offset is missing"
    reference = tmp_path / "reference"
    catch_up(spark, kafka, topic, reference, registry)
    for table in ("sensor_stats_1m", "sensor_stats_5m"):
        assert same_stats(rows(spark, lake, table), rows(spark, reference, table)), table
    alerts = [a.alert_id for a in rows(spark, lake, "alerts")]
    assert len(alerts) == len(set(alerts)) > 0
    assert set(alerts) == {a.alert_id for a in rows(spark, reference, "alerts")}
    found = [r.incident_id for r in rows(spark, lake, "incidents")]
    assert len(found) == len(set(found)) > 0


@pytest.mark.parametrize("batch_delete", [True, False], ids=["cleanup_metadata", "one_by_one"])
def test_log_expiry_keeps_every_version_inside_the_retention_readable(
    spark, tmp_path, batch_delete: bool
) -> None:
    """Time travel within the retention, read by delta-spark: after the log expiry every
    version whose commit is younger than the retention still reads as it did, whichever
    way the log is cleaned (delta-rs's cleanup, or one delete per file for stores that
    refuse batch deletes)."""
    lake = Lake(tmp_path)
    create_tables(lake)
    keeper = maintenance(
        lake, tables=("quarantine",), retention=timedelta(hours=1), compact_min_files=10**9
    )
    apply_properties(lake, keeper.policy)
    path = lake.table("quarantine")
    # A log checkpoint every 10 commits instead of 100: the same log, a tenth of the writes.
    DeltaTable(path).alter.set_table_properties({"delta.checkpointInterval": "10"})
    row = {"raw_value": "{", "error": "not JSON", "kafka_partition": 0, "kafka_timestamp": NOW,
           "ingested_at": NOW}  # fmt: skip
    for offset in range(25):
        data = pa.Table.from_pylist(
            [{**row, "kafka_offset": offset}], arrow_schema(QUARANTINE_SCHEMA)
        )
        write_deltalake(path, data, mode="append")
    latest = DeltaTable(path).version()
    log = Path(path) / "_delta_log"
    checkpoints = sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet"))
    # One log checkpoint before the retention's edge (version 15), one after it: the
    # versions between need the first and the commits after it.
    edge = 15
    assert len(checkpoints) == 2 and checkpoints[0] < edge < checkpoints[1], checkpoints
    # The first versions were written two hours ago; the rest within the retention.
    aged = (NOW - timedelta(hours=2)).timestamp()
    for entry in log.iterdir():
        if entry.name[:20].isdigit() and int(entry.name[:20]) < edge:
            os.utime(entry, (aged, aged))
    retained = range(edge, latest + 1)
    counts = {v: DeltaTable(path, version=v).to_pyarrow_table().num_rows for v in retained}
    if not batch_delete:
        keeper._one_by_one.add(path)

    keeper.run_pass(housekeeping=True)

    assert min(int(p.name[:20]) for p in log.glob("*.json")) > 0, "nothing was cleaned"
    for version in (retained[0], edge + 1, checkpoints[1] - 1, checkpoints[1], latest):
        read = spark.read.format("delta").option("versionAsOf", version).load(path)
        assert read.count() == counts[version], version


def test_vacuum_spares_the_files_of_a_batch_whose_commit_waits_past_the_retention(
    tmp_path,
) -> None:
    """A batch's data files are written before its commit; a commit that waits longer
    than the retention (a slow store, a lock held) must still find them. The files of a
    write that died (no commit coming) still go."""
    lake = Lake(tmp_path)
    create_tables(lake)
    keeper = maintenance(lake, tables=("quarantine",), retention=timedelta(seconds=30))
    apply_properties(lake, keeper.policy)
    path = lake.table("quarantine")
    row = {"raw_value": "{", "error": "not JSON", "kafka_partition": 0, "kafka_offset": 1,
           "kafka_timestamp": NOW, "ingested_at": NOW}  # fmt: skip
    data = pa.Table.from_pylist([row], arrow_schema(QUARANTINE_SCHEMA))

    def data_file(name: str, age: timedelta) -> Path:
        file = Path(path) / name
        pq.write_table(data, file)
        stamp = (NOW - age).timestamp()
        os.utime(file, (stamp, stamp))
        return file

    dead = data_file("part-dead.parquet", timedelta(hours=2))  # a write that died
    began = NOW - timedelta(hours=1)
    with uncommitted(path, now=lambda: began):  # a batch that began an hour ago ...
        waiting = data_file("part-waiting.parquet", timedelta(minutes=50))
        keeper.run_pass(housekeeping=True)
        assert waiting.exists() and not dead.exists()
        assert keeper.counts.files_vacuumed == 1
        # ... and commits now: its rows are there.
        table = DeltaTable(path)
        added = AddAction(
            waiting.name, waiting.stat().st_size, {}, int(waiting.stat().st_mtime * 1000),
            True, '{"numRecords": 1}',
        )  # fmt: skip
        table.create_write_transaction([added], "append", table.schema())

    assert [r["kafka_offset"] for r in live_rows(path)] == [1]
