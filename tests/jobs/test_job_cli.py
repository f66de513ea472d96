"""python -m jobs.stream as a user runs it: fast failures, interval trigger, clean stop
(more on stopping in tests/jobs/test_job_stop.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import functions as F

from conf.paths import PROJECT_ROOT
from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from jobs.spark.arrow_schema import arrow_schema
from jobs.stream import read_command_line, run
from jobs.writer.tables import ALERTS_SCHEMA, TABLES, create_tables
from lake.layout import Lake
from tests.support.job_output import noise, summary
from tests.support.job_settings import available_now
from tests.support.polling import STUCK
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl, run_producer

JOB = [sys.executable, "-m", "jobs.stream"]
START = ("--start-time", "2026-01-01T00:00:00Z")


def job(*args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*JOB, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=PROJECT_ROOT
    )


def test_a_switch_alone_means_true_and_takes_a_value_too() -> None:
    def parsed(*args: str) -> JobSettings:
        flags, _config = read_command_line(list(args))
        return load_settings(JobSettings, flags)

    assert parsed("--standby").standby is True
    assert parsed("--standby", "false").standby is False
    assert parsed().standby is False
    assert parsed("--realtime", "false", "--lease-expiry", "30").lease_expiry == 30.0


def test_missing_topic_fails_fast_and_clearly(kafka, tmp_path) -> None:
    done = job("--bootstrap-servers", kafka.bootstrap, "--topic", "absent", "--lake", tmp_path)

    assert done.returncode == 2
    assert "'absent' does not exist" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "readings").exists(), "nothing is created on a failed start"


def test_bad_settings_name_the_setting(tmp_path) -> None:
    cases = {
        ("--trigger", "soon"): "--trigger (SENSORWATCH_TRIGGER)",
        ("--watermark-delay", "2min"): "--watermark-delay (SENSORWATCH_WATERMARK_DELAY)",
        ("--starting-offsets", "middle"): "--starting-offsets",
        ("--config", tmp_path / "missing.toml"): "--config: cannot read",
    }
    (tmp_path / "extra.toml").write_text('[stream]\nwatermark = "2 minutes"\n')
    cases[("--config", tmp_path / "extra.toml")] = "unknown setting(s) watermark"
    (tmp_path / "old.toml").write_text("[alerts]\ncritical_temp_c = 50.0\n")
    cases[("--config", tmp_path / "old.toml")] = (
        "critical_temp_c is now overheat_reading's threshold in the rules file"
    )
    (tmp_path / "rules.toml").write_text(
        '[[rule]]\nname = "hot"\nkind = "reading"\nfield = "temperature_c"\nop = ">="\n'
        'threshold = "hot"\nseverity = "critical"\n'
        '[[rule]]\nname = "hot"\nkind = "window"\nwindow = "2m"\nseverity = "warning"\n'
    )
    cases[("--rules", tmp_path / "rules.toml")] = (
        f"--rules (SENSORWATCH_RULES): rules file {tmp_path / 'rules.toml'}: rule 'hot': "
        "defined more than once; rule 'hot': threshold: "
    )

    for args, expected in cases.items():
        done = job(*args, timeout=60)
        assert done.returncode == 2, args
        assert expected in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow  # a drill: a program stopped by SIGTERM, then run again (--quick's longest)
def test_interval_trigger_stops_on_sigterm_and_resumes_exactly(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake = new_topic("interval"), tmp_path / "lake"
    clean = ("--late-fraction", 0, "--out-of-order-fraction", 0, "--duplicate-fraction", 0,
             "--malformed-fraction", 0)  # fmt: skip
    first = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count",
                         3000, "--seed", 5, *START, *clean)  # fmt: skip
    assert first.returncode == 0, first.stderr
    running = Running(
        [*JOB, "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--lake", str(lake),
         "--trigger", "2 seconds"], cwd=PROJECT_ROOT,
    )  # fmt: skip
    try:
        running.wait_for_line(
            lambda line: "ingest #" in line and "3,000 rows written" in line, STUCK
        )
        running.terminate()
        assert running.finish(timeout=STUCK) == 0, "\n".join(running.lines[-30:])
    finally:
        running.kill()
    # Quiet from start to stop (no Spark warning, no JVM start-up warning, no trace),
    # then the summary, whose counts are the tables'.
    assert noise(running.lines) == [], "\n".join(running.lines)
    assert "jobs.stream: stopped" in running.lines
    counts = summary(running.lines)
    for table in TABLES:
        assert counts[table] == spark.read.format("delta").load(str(lake / table)).count(), table
    assert f"jobs.stream: look at it: scripts/alerts --lake {lake}" in running.lines

    more = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count",
                        1000, "--seed", 6, *START, *clean)  # fmt: skip
    assert more.returncode == 0, more.stderr
    settings = available_now(kafka, topic, lake)
    run(settings, spark)

    readings = spark.read.format("delta").load(str(lake / "readings"))
    assert readings.count() == 4000
    assert readings.select("kafka_partition", "kafka_offset").distinct().count() == 4000
    assert readings.filter(F.col("event_time").isNull()).count() == 0


def test_unwritable_lake_fails_fast(kafka, new_topic, tmp_path) -> None:
    not_a_folder = tmp_path / "lake"
    not_a_folder.write_text("a file where the lake should be")

    done = job("--bootstrap-servers", kafka.bootstrap, "--topic", new_topic("lake"),
               "--lake", not_a_folder)  # fmt: skip

    assert done.returncode == 2
    assert f"--lake {not_a_folder}: cannot write there" in done.stderr
    assert not_a_folder.read_text() == "a file where the lake should be"


def test_malformed_registry_fails_before_any_table_is_touched(kafka, new_topic, tmp_path) -> None:
    registry = tmp_path / "fleet.jsonl"
    registry.write_text('{"sensor_id": "a", "site": "X"}\n{not json\n')

    done = job(
        "--bootstrap-servers", kafka.bootstrap, "--topic", new_topic("registry"),
        "--lake", tmp_path / "lake", "--registry", registry, "--trigger", "availableNow",
    )  # fmt: skip

    assert done.returncode == 2
    assert f"registry {registry} line 2: not JSON" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "lake" / "readings").exists()


def test_a_query_that_cannot_reuse_its_checkpoint_says_what_to_do(
    spark, kafka, new_topic, tmp_path
) -> None:
    import shutil

    import pytest

    from jobs.driver.recovery import CheckpointMismatch

    topic, lake = new_topic("checkpoint"), tmp_path / "lake"
    assert run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count",
                        500, "--seed", 3, *START).returncode == 0  # fmt: skip
    settings = available_now(kafka, topic, lake)
    run(settings, spark)
    # The windows query's checkpoint replaced by one of a different stateful query on the
    # same table: as if the query had changed.
    windows = lake / "_checkpoints" / "windows"
    shutil.rmtree(windows)
    other = (
        spark.readStream.format("delta").load(str(lake / "readings"))
        .groupBy("sensor_id").count()
        .writeStream.outputMode("update").format("noop")
        .option("checkpointLocation", str(windows)).trigger(availableNow=True).start()
    )  # fmt: skip
    other.awaitTermination()
    assert run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count",
                        200, "--seed", 4, *START).returncode == 0  # fmt: skip

    with pytest.raises(CheckpointMismatch, match=r"move .*windows aside"):
        run(settings, spark)

    # Ingest went on normally: nothing lost, nothing written twice.
    readings = spark.read.format("delta").load(str(lake / "readings"))
    quarantine = spark.read.format("delta").load(str(lake / "quarantine"))
    assert readings.count() + quarantine.count() == 700
    assert readings.select("kafka_partition", "kafka_offset").distinct().count() == readings.count()


def test_readers_off_runs_ingest_alone(spark, kafka, new_topic, tmp_path) -> None:
    topic, lake, manifest = new_topic("readers-off"), tmp_path / "lake", tmp_path / "m.jsonl"
    sent = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count",
                        2000, "--seed", 3, "--manifest", manifest, *START)  # fmt: skip
    assert sent.returncode == 0, sent.stderr

    run(available_now(kafka, topic, lake, readers="false", realtime="false"), spark)

    def rows(table: str) -> int:
        return spark.read.format("delta").load(str(lake / table)).count()

    assert rows("readings") + rows("quarantine") == len(read_jsonl(manifest))
    assert rows("sensor_stats_1m") == rows("sensor_stats_5m") == 0
    assert sorted(p.name for p in (lake / "_checkpoints").iterdir()) == ["ingest"]
    assert "--readers" in job("--help", timeout=60).stdout


def test_a_lake_using_a_feature_the_writer_lacks_is_refused_before_any_write(
    kafka, new_topic, tmp_path
) -> None:
    lake = Lake(tmp_path / "lake")
    create_tables(lake)
    DeltaTable(lake.table("alerts")).alter.set_table_properties(
        {"delta.enableDeletionVectors": "true"}
    )
    versions = {n: DeltaTable(lake.table(n)).version() for n in TABLES}

    done = job("--bootstrap-servers", kafka.bootstrap, "--topic", new_topic("guard"),
               "--lake", tmp_path / "lake", "--trigger", "availableNow")  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert "table alerts uses deletion vectors" in done.stderr and "REORG TABLE" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert {n: DeltaTable(lake.table(n)).version() for n in TABLES} == versions
    assert not (tmp_path / "lake" / "_checkpoints").exists()
    assert sorted(p.name for p in (tmp_path / "lake" / "_lease").iterdir())[-1:] == [
        "00000000000000000002.json"  # taken, then handed back
    ]


def test_a_lake_of_an_earlier_release_gains_the_new_column_and_runs(
    spark, kafka, new_topic, tmp_path
) -> None:
    """An earlier release made ``alerts`` without ``site``: this one adds it, writes its
    alerts with it, and the earlier rows read it as null."""
    topic, lake = new_topic("evolve"), Lake(tmp_path / "lake")
    without_site = arrow_schema(ALERTS_SCHEMA).remove(
        arrow_schema(ALERTS_SCHEMA).get_field_index("site")
    )
    DeltaTable.create(lake.table("alerts"), schema=without_site)
    start = datetime(2025, 12, 31, 23, 0, tzinfo=UTC)
    earlier = {
        "alert_id": "earlier", "sensor_id": "sensor-9999", "rule": "overheat_reading",
        "severity": "critical", "window_start": start, "window_end": start + timedelta(minutes=1),
        "observed_value": 50.0, "threshold": 45.0, "readings": 1, "detected_at": start,
    }  # fmt: skip
    write_deltalake(
        lake.table("alerts"), pa.Table.from_pylist([earlier], without_site), mode="append"
    )
    registry = tmp_path / "fleet.jsonl"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 3000,
        "--sensors", 10, "--seed", 3, *START, "--registry-out", registry, "--spike-rate", 20,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    run(available_now(kafka, topic, tmp_path / "lake", registry=registry), spark)

    alerts = {
        r["alert_id"]: r for r in DeltaTable(lake.table("alerts")).to_pyarrow_table().to_pylist()
    }
    assert alerts.pop("earlier")["site"] is None
    assert alerts and all(a["site"] for a in alerts.values())


EARLIER = PROJECT_ROOT / "tests" / "jobs" / "data" / "lake-4d11047"


def test_a_lake_made_by_an_earlier_release_is_opened_and_extended(
    spark, kafka, new_topic, tmp_path
) -> None:
    """tests/jobs/data/README.md: a lake the job of commit 4d11047 wrote (no lease, no guard
    then). This release takes its lease, finds its tables as it defines them, appends to
    them, and delta-spark still reads every table and its first version."""
    lake = tmp_path / "lake"
    shutil.copytree(EARLIER, lake)
    # rule_changes is younger than that release: the job makes it.
    before = {name: DeltaTable(str(lake / name)).to_pyarrow_table().num_rows
              for name in TABLES if (lake / name).exists()}  # fmt: skip
    assert set(TABLES) - set(before) == {"rule_changes"}
    left_at = DeltaTable(str(lake / "readings")).version()  # as the earlier release left it
    topic = new_topic("earlier")
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 1000,
        "--sensors", 12, "--seed", 36, "--start-time", "2026-03-02T10:00:00Z",
        "--registry-out", tmp_path / "fleet.jsonl", "--spike-rate", 6,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    started = datetime.now(UTC)
    run(available_now(kafka, topic, lake, registry=tmp_path / "fleet.jsonl"), spark)

    offsets = [
        (r["kafka_partition"], r["kafka_offset"])
        for name in ("readings", "quarantine")
        for r in DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()
        if r["ingested_at"] >= started
    ]
    assert len(offsets) == len(set(offsets)) == 1000  # the new topic, once
    for name in TABLES:
        count = spark.read.format("delta").load(str(lake / name)).count()
        assert count >= before.get(name, 1), name  # rule_changes: the rules it ran with
    # The version the earlier release left is still there (delta-rs: Spark refuses time
    # travel past the tables' 1-hour deletedFileRetentionDuration, which this copy's
    # commits, made when the data was, soon are).
    earlier = DeltaTable(str(lake / "readings"), version=left_at).to_pyarrow_table()
    assert earlier.num_rows == before["readings"] > 0
    alerts = [r.alert_id for r in spark.read.format("delta").load(str(lake / "alerts")).collect()]
    assert len(alerts) == len(set(alerts)) > before["alerts"]
    assert (lake / "_lease").is_dir()
