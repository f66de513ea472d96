"""The real-time alert path (jobs/queries/realtime.py): the rule on static DataFrames, the task
slots it needs, and the query against the real broker in both of its triggers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import functions as F

from conf.paths import PROJECT_ROOT, RULES_FILE
from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from contract.alerts import OVERHEAT, UNREGISTERED, alert_id
from contract.registry import Entry
from contract.rules.model import RuleSet
from contract.rules.parsing import parse_rules, read_rules
from jobs.alerting.alert_columns import thresholds_frame
from jobs.alerting.reading_rules import compile_rules
from jobs.ingest.parse import parse_records
from jobs.queries.context import JobContext
from jobs.queries.realtime import LocalSlots, local_slots, missing_slots, rule_messages
from jobs.queries.registry_cache import REGISTRY, RegistryCache
from jobs.realtime.path import RealtimePath
from jobs.spark.checkpoints import batch_ids, has_committed, uncommitted_batch
from jobs.stream import run
from jobs.writer.tables import ALERTS_SCHEMA
from lake.layout import Lake
from tests.support.job_output import noise
from tests.support.job_settings import available_now
from tests.support.kafka_io import consume_all, consume_messages, produce
from tests.support.polling import STUCK, wait_until
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl, run_producer

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

DEFAULT_RULES = read_rules(RULES_FILE)
AT = datetime(2026, 11, 21, 10, 15, 30, 123000, tzinfo=UTC)
BUCKET = datetime(2026, 11, 21, 10, 15, tzinfo=UTC)
DETECTED = datetime(2026, 11, 21, 10, 15, 31, tzinfo=UTC)


def reading(sensor: str, temperature: float, event_id: str = "e1", **changes) -> bytes:
    event = {
        "event_id": event_id, "sensor_id": sensor, "event_time": "2026-11-21T10:15:30.123Z",
        "temperature_c": temperature, "humidity_pct": 40.0, "battery_pct": 88.0, "seq": 1,
        **changes,
    }  # fmt: skip
    return json.dumps(event).encode()


def messages(
    spark,
    values: list[bytes | None],
    registry: list[tuple],
    rules: RuleSet = DEFAULT_RULES,
    judged_before: datetime | None = None,
) -> list[dict]:
    records = spark.createDataFrame(
        [(None, v, 0, i, AT) for i, v in enumerate(values)],
        "key binary, value binary, partition int, offset long, timestamp timestamp",
    )
    sensors = {r[0]: Entry(r[0], r[1], r[2], r[3] if len(r) > 3 else None) for r in registry}
    compiled = compile_rules(rules.of_kind("reading"), sensors)
    frame = rule_messages(
        parse_records(records),
        compiled,
        thresholds_frame(spark, compiled),
        spark.createDataFrame([r[:3] for r in registry], REGISTRY),
        F.lit(DETECTED),
        judged_before,
    )
    rows = frame.collect()
    assert all(json.loads(r.value)["alert_id"] == r.key for r in rows)
    return sorted((json.loads(r.value) for r in rows), key=lambda m: m["sensor_id"])


def test_each_hot_reading_is_one_message_with_the_alerts_columns_and_id(spark) -> None:
    found = messages(
        spark,
        [reading("office-1", 40.0), reading("server-1", 31.0), reading("ghost-7", 50.0)],
        [("office-1", "HQ", None), ("server-1", "DC", 30.0)],
    )

    assert [m["sensor_id"] for m in found] == ["ghost-7", "server-1"]  # office-1: 40 < 45
    ghost, server = found
    assert server == {
        "alert_id": alert_id("server-1", OVERHEAT, BUCKET),
        "sensor_id": "server-1",
        "site": "DC",
        "rule": OVERHEAT,
        "severity": "critical",
        "window_start": "2026-11-21T10:15:00.000Z",
        "window_end": "2026-11-21T10:16:00.000Z",
        "observed_value": 31.0,
        "threshold": 30.0,  # the registry's max_temp_c wins
        "readings": 1,
        "detected_at": "2026-11-21T10:15:31.000Z",
        "reading_at": "2026-11-21T10:15:30.123Z",
    }
    assert (ghost["site"], ghost["threshold"]) == (UNREGISTERED, 45.0)
    assert set(server) == {*ALERTS_SCHEMA.fieldNames(), "reading_at"}


def test_readings_judged_before_an_edit_are_left_out(spark) -> None:
    """After an edit the query reads again what came since its last commit: a reading
    whose Kafka time is before the cut was judged already, by the rules then in force."""
    hot = [reading("ghost-7", 50.0)]
    assert messages(spark, hot, [], judged_before=AT + timedelta(milliseconds=1)) == []
    assert [m["sensor_id"] for m in messages(spark, hot, [], judged_before=AT)] == ["ghost-7"]


def test_every_reading_rule_raises_its_own_message_in_its_scope(spark) -> None:
    """battery_low of the default file, and a humidity rule for one device model with an
    override for one site: one scan, a message per reading and rule it breaches."""
    rules = parse_rules({"rule": [
        *(r.model_dump(mode="json", by_alias=True) for r in DEFAULT_RULES.of_kind("reading")),
        {"name": "damp", "kind": "reading", "field": "humidity_pct", "op": ">", "threshold": 60,
         "severity": "warning", "scope": {"models": ["CX"]},
         "override": [{"sites": ["Basement"], "threshold": 80}]},
    ]})  # fmt: skip
    found = messages(
        spark,
        [reading("a", 20.0, battery_pct=9.5), reading("b", 50.0, humidity_pct=70.0),
         reading("c", 20.0, humidity_pct=70.0), reading("d", 20.0, humidity_pct=70.0)],
        [("a", "HQ", None, "T1"), ("b", "HQ", None, "CX"), ("c", "Basement", None, "CX"),
         ("d", "HQ", None, "T1")],
        rules,
    )  # fmt: skip

    got = sorted((m["sensor_id"], m["rule"], m["severity"], m["observed_value"], m["threshold"])
                 for m in found)  # fmt: skip
    assert got == [
        ("a", "battery_low", "warning", 9.5, 15.0),
        ("b", "damp", "warning", 70.0, 60.0),
        ("b", OVERHEAT, "critical", 50.0, 45.0),
    ]  # c: its site's override (80); d: not a CX
    assert all(m["alert_id"] == alert_id(m["sensor_id"], m["rule"], BUCKET) for m in found)


def test_a_bad_record_never_raises_an_alert(spark) -> None:
    found = messages(
        spark,
        [
            reading("a", 130.0),  # out of range: quarantine, not an alert
            reading("b", 50.0, event_time="yesterday"),
            reading("c", 50.0)[:-3],  # broken JSON
            reading("d", "50"),  # wrong type
            None,
            reading("e", 50.0, event_id="e2"),
        ],
        [],
    )

    assert [m["sensor_id"] for m in found] == ["e"]


def test_local_mode_gets_a_slot_per_partition_on_top() -> None:
    assert local_slots("local[2]", 6) == LocalSlots("local[8]", 2)
    assert local_slots("local", 6) == LocalSlots("local[7]", 1)
    assert local_slots("local[*]", 6, cores=4) == LocalSlots("local[10]", 4)
    assert local_slots("local[2,3]", 6) == LocalSlots("local[8,3]", 2)
    assert local_slots("spark://127.0.0.1:7077", 6) is None
    assert (missing_slots(8, 6), missing_slots(6, 6), missing_slots(2, 6)) == (0, 1, 5)


def overheat_ids(spark, lake) -> set[str]:
    alerts = spark.read.format("delta").load(str(lake / "alerts"))
    return {r.alert_id for r in alerts.filter(F.col("rule") == OVERHEAT).collect()}


def hot_readings(spark, lake, registry) -> int:
    """The valid Kafka records at or above their sensor's threshold (every one a message)."""
    limits = {s["sensor_id"]: s.get("max_temp_c") for s in read_jsonl(registry)}
    rows = spark.read.format("delta").load(str(lake / "readings")).collect()
    return sum(r.temperature_c >= (limits.get(r.sensor_id) or 45.0) for r in rows)


def records(lake) -> int:
    """Kafka records in readings and quarantine so far (0 before the tables exist)."""
    try:
        return sum(DeltaTable(str(lake / t)).count() for t in ("readings", "quarantine"))
    except TableNotFoundError:
        return 0


def on_topic(kafka, topic: str, expected: int) -> list[dict]:
    found = consume_messages(kafka.bootstrap, topic, expected, timeout=120)
    values = [json.loads(m.value()) for m in found]
    assert all(m.key().decode() == v["alert_id"] for m, v in zip(found, values, strict=True))
    return values


FAULTS = ("--late-fraction", 0.02, "--out-of-order-fraction", 0.02,
          "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02)  # fmt: skip


def test_an_available_now_run_sends_every_hot_reading_once(spark, kafka, new_topic, tmp_path):
    topic, alerts_topic = new_topic("rt"), new_topic("rt-alerts")
    lake, registry = tmp_path / "lake", tmp_path / "fleet.jsonl"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 3000,
        "--sensors", 10, "--seed", 3, "--start-time", "2026-01-01T00:00:00Z",
        "--registry-out", registry, "--spike-rate", 10, *FAULTS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    settings = available_now(
        kafka, topic, lake, registry=registry, alerts_topic=alerts_topic, realtime=True
    )
    run(settings, spark)

    expected, hot = overheat_ids(spark, lake), hot_readings(spark, lake, registry)
    assert expected and hot >= len(expected)
    sent = on_topic(kafka, alerts_topic, hot)
    assert len(sent) == hot
    assert {m["alert_id"] for m in sent} == expected


def job_state(lake: Path, *runs: Running) -> str:
    """What a failed wait saw: the records in the lake and the last lines of each run."""
    tails = [
        f"(exit status {run.proc.poll()}; None: still running)\n" + "\n".join(run.output()[-60:])
        for run in runs
    ]
    return f"{records(lake)} records in the lake; the runs' last lines:\n" + "\n---\n".join(tails)


def stop_before_the_last_commit(checkpoint: Path) -> int:
    """Leave ``checkpoint`` as a kill between a batch's offsets and its commit does;
    returns that batch's id."""
    unfinished = uncommitted_batch(str(checkpoint))
    if unfinished is not None:
        return unfinished
    done = batch_ids(str(checkpoint / "commits"))
    assert done, f"the real-time query committed no batch before the kill: {checkpoint}"
    newest = max(done)
    for name in (str(newest), f".{newest}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    assert uncommitted_batch(str(checkpoint)) == newest
    return newest


@pytest.mark.slow  # a drill: a program killed, then run again
def test_two_paths_one_truth_across_faults_a_kill_and_a_restart(
    spark, kafka, new_topic, tmp_path
) -> None:
    """Every alert_id on the topic is an overheat_reading row of ``alerts`` and every such
    row was on the topic, after every fault the producer injects, a kill -9 while both
    paths run, and a restart."""
    topic, alerts_topic = new_topic("rt-live"), new_topic("rt-live-alerts")
    lake, registry = tmp_path / "lake", tmp_path / "fleet.jsonl"
    produce = (
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--sensors", 10,
        "--spike-rate", 10, *FAULTS,
    )  # fmt: skip
    first = run_producer(*produce, "--count", 1500, "--seed", 4, "--registry-out", registry,
                         "--start-time", "2026-01-01T00:00:00Z")  # fmt: skip
    assert first.returncode == 0, first.stderr
    job = [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
           "--topic", topic, "--lake", str(lake), "--registry", str(registry),
           "--trigger", "2 seconds", "--alerts-topic", alerts_topic,
           "--realtime", "true", "--realtime-checkpoint-interval", "5 seconds"]  # fmt: skip

    killed = Running(job, cwd=PROJECT_ROOT)
    sending = None
    try:
        # At least, then exactly: a duplicate fails at once, saying so, not at the deadline.
        wait_until(lambda: records(lake) >= 1500, STUCK, "the first 1,500 records in the lake",
                   detail=lambda: job_state(lake, killed))  # fmt: skip
        assert records(lake) == 1500, job_state(lake, killed)
        # More readings while both paths run (300 a second), and a kill -9 in their midst.
        sending = subprocess.Popen(
            [sys.executable, "-m", "producer", *map(str, produce), "--count", "1500", "--seed",
             "5", "--start-time", "2026-01-01T00:30:00Z", "--rate", "300"],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_until(lambda: records(lake) > 1500, STUCK, "some of the next records in the lake",
                   detail=lambda: job_state(lake, killed))  # fmt: skip
        # ... and after the real-time path's first commit (every 5 s), which a fast lake
        # path can beat: the restart below is from a committed batch.
        realtime = lake / "_checkpoints" / "realtime"
        wait_until(lambda: has_committed(str(realtime)), STUCK, "a committed real-time batch",
                   detail=lambda: job_state(lake, killed))  # fmt: skip
    finally:
        killed.kill()
    # Where the kill fell between the two writes that end a real-time batch, Spark drops
    # the batch at the restart; make it fall there every time.
    unfinished = stop_before_the_last_commit(lake / "_checkpoints" / "realtime")
    running = Running(job, cwd=PROJECT_ROOT)
    try:
        running.wait_for_line(lambda line: "local mode:" in line, STUCK)
        running.wait_for_line(lambda line: f"realtime: batch {unfinished} was not" in line, STUCK)
        assert sending.wait(timeout=120) == 0, sending.stderr.read()
        wait_until(lambda: records(lake) >= 3000, STUCK, "all 3,000 records in the lake",
                   detail=lambda: job_state(lake, killed, running))  # fmt: skip
        assert records(lake) == 3000, job_state(lake, killed, running)
        running.terminate()
        assert running.finish(timeout=STUCK) == 0, "\n".join(running.output())
    finally:
        running.kill()
        if sending.poll() is None:
            sending.kill()

    lines = running.output()
    assert noise(lines) == [], "\n".join(lines)  # a quiet stop, real-time tasks and all
    assert any(line.startswith("jobs.stream: local mode: local[2]") for line in lines)
    expected, hot = overheat_ids(spark, lake), hot_readings(spark, lake, registry)
    assert expected
    sent = on_topic(kafka, alerts_topic, hot)
    assert len(sent) >= hot  # at least once: the kill may have sent some twice
    assert {m["alert_id"] for m in sent} == expected


def test_the_path_restarts_after_a_failure_and_on_a_registry_change(
    spark, kafka, new_topic, tmp_path
) -> None:
    """In the session (one partition: its two slots leave the lake path one): a query that
    ends is started again after its delay; an edited registry threshold reaches the path
    through a restart, and a reading hot only by the new threshold is sent."""
    topic, alerts_topic = new_topic("rt-restart", 1), new_topic("rt-restart-alerts", 1)
    lake, registry = tmp_path / "lake", tmp_path / "fleet.jsonl"
    registry.write_text(json.dumps({"sensor_id": "fridge-1", "site": "HQ", "max_temp_c": 20.0}))
    settings = load_settings(
        JobSettings,
        {"bootstrap_servers": kafka.bootstrap, "topic": topic, "lake": lake,
         "registry": registry, "trigger": "5 seconds", "realtime": True,
         "alerts_topic": alerts_topic, "realtime_checkpoint_interval": "5 seconds"},
    )  # fmt: skip
    lines: list[str] = []
    ctx = JobContext(spark, settings, Lake(lake), RegistryCache(spark, registry, 1), lines.append)
    path = RealtimePath(ctx, first_delay=0.5)
    path.start()
    try:
        send(kafka, topic, "a", 15.0)  # below 20: nothing
        send(kafka, topic, "b", 25.0)  # hot
        assert [m["observed_value"] for m in on_topic(kafka, alerts_topic, 1)] == [25.0]

        path.query.stop()  # ends as a failure would, from the main loop's view
        path.check(time.monotonic())
        assert path.query is None and "tries again in 0.5 s" in lines[-1]
        wait_until(lambda: path.check(time.monotonic()) or path.query is not None, 120, "restart")
        assert path.restarts == 1 and path.query.isActive

        registry.write_text(
            json.dumps({"sensor_id": "fridge-1", "site": "HQ", "max_temp_c": 10.0})
        )  # the edit: 10 instead of 20
        changed = time.monotonic()
        path.check(changed)
        assert lines[-1] == "realtime: the registry changed; the real-time path uses it now"
        send(kafka, topic, "c", 15.0)  # hot only by the new threshold
        found = wait_until(
            lambda: [m for m in everything_on(kafka, alerts_topic) if m["observed_value"] == 15],
            60,
            "the reading hot by the new threshold on the topic",
        )
        print(f"registry change to the first alert by it: {time.monotonic() - changed:.1f} s")
        assert found[0]["threshold"] == 10.0
    finally:
        path.stop()


def everything_on(kafka, topic: str) -> list[dict]:
    """What the topic holds now."""
    return [json.loads(m.value()) for m in consume_all(kafka.bootstrap, topic)]


def send(kafka, topic: str, event_id: str, temperature: float) -> None:
    at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    produce(
        kafka.bootstrap,
        topic,
        [("fridge-1", reading("fridge-1", temperature, event_id, event_time=at).decode())],
    )
