"""Reliability drills: crashes, a second job on the lake and broker outages lose nothing
and duplicate nothing (a standby's takeover: the bucket's drill, tests/lake/test_s3_lake.py)."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conf.settings.kafka_connection import AlertsTopicSettings
from contract.alerts import OVERHEAT, alert_id
from contract.times import parse_instant
from jobs.stream import run
from lake.reader import LakeReader
from local_stack import kafka as local_kafka
from local_stack.server import free_port
from tests.support.brokers import Broker
from tests.support.drills import (
    catch_up,
    episodes,
    fenced_commits,
    fill_up,
    kill_hard,
    landed,
    resume_after_takeover,
    rows,
    same_stats,
    small_disk,
    start_job,
    start_producer,
    wait_for_more_deliveries,
    wait_for_new_commit,
)
from tests.support.job_settings import available_now
from tests.support.kafka_io import consume_all, produce
from tests.support.polling import STUCK, wait_until
from tests.support.producer_run import read_jsonl
from topics.admin import create_topic

pytestmark = pytest.mark.slow

STATS = ["sensor_stats_1m", "sensor_stats_5m"]
# A short lease: the standby takes over after 8 s without a renewal.
LEASE = {"SENSORWATCH_LEASE_EXPIRY": "8"}


def test_kill_drill(spark, kafka, new_topic, tmp_path) -> None:
    """Two jobs started on one lake at once: one holds it, the other exits at once naming
    the holder. A standby waits. The holder is paused (SIGSTOP, Python and JVM) right
    after a data commit, before Spark records the batch as done, for longer than its
    lease: the standby takes over and replays the committed batch (the sharpest case).
    Resumed, the old holder commits nothing more, on any table, and exits saying so in one
    line. The new holder is then killed (SIGKILL) right after a data commit, and the
    restart replays it. Then every offset is in readings or quarantine once, no table
    holds a Delta transaction twice or a commit of an older holder after a newer one's,
    and the statistics, alerts and incidents equal an uninterrupted run's. (A kill at a
    random moment is the bucket drill's, tests/lake/test_s3_lake.py, on the same oracle; here
    the restart is the catch-up, in the test session's Spark: a cold JVM fewer.)"""
    topic, lake = new_topic("kill-drill"), tmp_path / "lake"
    log_dir, fleet = lake / "readings" / "_delta_log", tmp_path / "fleet.jsonl"
    # 50 messages a second, not 150: every row sent while the job starts is read three
    # times (the holder, the catch-up, the uninterrupted run). A batch still holds dozens.
    producer = start_producer(kafka.bootstrap, topic, tmp_path, rate=50)
    first = second = standby = None
    try:
        producer.wait_for_line(lambda line: " delivered (" in line, 180)
        # One holds the lake; the other says who, in one line, before any JVM, and exits 2.
        first, second = (start_job(kafka, topic, lake, fleet, env=LEASE) for _ in "12")
        wait_until(
            lambda: first.proc.poll() is not None or second.proc.poll() is not None,
            120, "one of two jobs started at once to give the lake up", every=0.05,
        )  # fmt: skip
        holder, refused = (second, first) if first.proc.poll() is not None else (first, second)
        assert refused.finish(timeout=120) == 2
        said = [line for line in refused.lines if line.strip()]
        assert len(said) == 1, said
        assert f"pid {holder.proc.pid}" in said[0] and "--standby" in said[0]
        standby = start_job(kafka, topic, lake, fleet, env={**LEASE, "SENSORWATCH_STANDBY": "1"})
        standby.wait_for_line(lambda line: "waits for it to stop" in line, STUCK)
        # The table's first data commit, then the next: a micro-batch of the running
        # stream (the first may be the start's catch-up of what was sent before).
        wait_for_new_commit(log_dir, set(), STUCK, holder)
        wait_for_new_commit(log_dir, set(log_dir.glob("*.json")), STUCK, holder)
        holder.interrupt_group(signal.SIGSTOP)  # a GC pause, a partition, a suspended VM
        standby.wait_for_line(lambda line: "lease: took the lake" in line, STUCK)
        wait_for_new_commit(log_dir, set(log_dir.glob("*.json")), STUCK, standby)
        resume_after_takeover(holder)  # it commits nothing more and exits saying so
        # The new holder killed right after a data commit: the catch-up replays it.
        wait_for_new_commit(log_dir, set(log_dir.glob("*.json")), STUCK, standby)
        kill_hard(standby)
        producer.terminate()  # it flushes what it holds and writes the rest of its manifest
        assert producer.finish(timeout=STUCK) == 0, "\n".join(producer.lines[-20:])
    finally:
        for running in (producer, first, second, standby):
            if running is not None:
                running.kill()  # a paused one too
    catch_up(spark, kafka, topic, lake, fleet)
    fenced_commits(lake)

    manifest = read_jsonl(tmp_path / "manifest.jsonl")
    counts = landed(spark, lake)
    assert set(counts.values()) == {1}, "an offset landed twice"
    assert set(counts) == {(m["partition"], m["offset"]) for m in manifest}, "an offset is missing"

    # An uninterrupted run over the same input gives the same statistics and alerts.
    reference = tmp_path / "reference"
    catch_up(spark, kafka, topic, reference, fleet)
    for table in STATS:
        assert same_stats(rows(spark, lake, table), rows(spark, reference, table)), table
    alerts = [a.alert_id for a in rows(spark, lake, "alerts")]
    assert len(alerts) == len(set(alerts)) > 0
    assert set(alerts) == {a.alert_id for a in rows(spark, reference, "alerts")}
    # Incidents: one row per episode, each alert counted in exactly one, and the same
    # episodes as the uninterrupted run (the wall-clock times of the writes aside).
    found = [r.asDict() for r in rows(spark, lake, "incidents")]
    assert len({i["incident_id"] for i in found}) == len(found) > 0
    assert sum(i["alert_count"] for i in found) == len(alerts)
    assert episodes(found) == episodes(r.asDict() for r in rows(spark, reference, "incidents"))


def test_disk_full_drill(spark, kafka, new_topic, tmp_path) -> None:
    """The lake's disk fills up while producer and job run: the job stops with one line
    saying so and what to do, no stack trace; once space is freed, a restart resumes where
    it stopped, and every offset is in readings or quarantine once, no transaction twice."""
    topic, fleet = new_topic("disk-full"), tmp_path / "fleet.jsonl"
    (disk := tmp_path / "disk").mkdir()
    with small_disk(disk):
        lake = disk / "lake"
        producer = start_producer(kafka.bootstrap, topic, tmp_path, rate=50)
        job = None
        try:
            producer.wait_for_line(lambda line: " delivered (" in line, 180)
            # The lake path alone: the real-time path writes to Kafka, not to the disk.
            job = start_job(kafka, topic, lake, fleet, env={"SENSORWATCH_REALTIME": "false"})
            wait_for_new_commit(lake / "readings" / "_delta_log", set(), STUCK, job)
            ballast = fill_up(disk)
            assert job.finish(timeout=STUCK) == 1, "\n".join(job.lines[-30:])
            said = [line for line in job.lines if line.strip()]
            # Its last words: that line (and that the lease could not be handed back).
            full = [line for line in said if "the lake's disk is full" in line]
            last = bool(full) and said.index(full[0]) >= len(said) - 2
            # Its words in full (a list's repr is cut short in pytest's report).
            words = "\n".join(said)
            assert last and "start it again" in full[0], words
            noise = [line for line in said if "Exception" in line or line.startswith("\t")]
            assert not noise and not any("Traceback" in line for line in said), words
            ballast.unlink()
            producer.terminate()
            assert producer.finish(timeout=STUCK) == 0, "\n".join(producer.lines[-20:])
        finally:
            for running in (producer, job):
                if running is not None:
                    running.kill()
        catch_up(spark, kafka, topic, lake, fleet)
        fenced_commits(lake)
        manifest = read_jsonl(tmp_path / "manifest.jsonl")
        counts = landed(spark, lake)
        if job is not None:
            job.proc.wait(timeout=30)
    assert set(counts.values()) == {1}, "an offset landed twice"
    assert set(counts) == {(m["partition"], m["offset"]) for m in manifest}, "one is missing"


def test_broker_drill(spark, tmp_path) -> None:
    """The broker stops for some seconds while producer and job run, then comes back."""
    data, port = tmp_path / "broker", free_port()
    broker = local_kafka.start(data, port)
    bootstrap, topic, lake = broker.bootstrap, "drill", tmp_path / "lake"
    create_topic(bootstrap, topic)

    endpoint = Broker(bootstrap, "drill broker")  # its own: the drill stops it
    producer = start_producer(bootstrap, topic, tmp_path)
    # With the real-time path (off in most tests): paging must resume after the outage.
    job = start_job(endpoint, topic, lake, tmp_path / "fleet.jsonl", env=REALTIME_ON)
    try:
        job.wait_for_line(lambda line: "ingest #" in line, STUCK)
        local_kafka.stop(data)
        time.sleep(8)  # the outage under test, not a synchronisation
        local_kafka.start(data, port)
        # Both clients again, each failing with what it waited for: the producer (its own
        # client, librdkafka) delivering, the job reading. (CI once saw the producer
        # deliver nothing after the restart: the manifest check failed far from the cause.)
        wait_for_more_deliveries(producer, STUCK, "after the broker came back")
        job.wait_for_line(lambda line: "ingest #" in line, STUCK, "the job reading again")
        # Paging resumes: an overheat sent now reaches the alerts topic (the real-time
        # path) and, below, the incidents table (what the notifier syncs).
        hot = hot_reading(spark, lake)
        [record] = produce(bootstrap, topic, [(hot["sensor_id"], json.dumps(hot))])
        sent = (record.partition, record.offset)
        wanted = alert_id(hot["sensor_id"], OVERHEAT, minute_of(hot["event_time"]))
        try:
            wait_until(
                lambda: any(
                    json.loads(m.value())["alert_id"] == wanted
                    for m in consume_all(bootstrap, ALERTS_TOPIC)
                ),
                STUCK,
                "the real-time alert of a reading sent after the outage",
                every=1,
            )
        except AssertionError as exc:
            said = "\n".join(job.output()[-40:])
            raise AssertionError(f"{exc}; the job said:\n{said}") from None
        producer.terminate()
        assert producer.finish(timeout=180) == 0, "\n".join(producer.lines[-20:])
        job.terminate()
        assert job.finish(timeout=180) == 0, "\n".join(job.lines[-30:])
        catch_up(spark, endpoint, topic, lake, tmp_path / "fleet.jsonl")

        manifest = read_jsonl(tmp_path / "manifest.jsonl")
        sent_all = {(m["partition"], m["offset"]) for m in manifest} | {sent}
        in_topic = consume_all(bootstrap, topic)
        assert {(m.partition(), m.offset()) for m in in_topic} == sent_all, (
            "the producer's manifest (and the reading sent by hand) and the topic differ"
        )
        counts = landed(spark, lake)
        assert set(counts.values()) == {1}
        assert set(counts) == sent_all
        at = minute_of(hot["event_time"])
        opened = [
            i for i in LakeReader(str(lake)).read("incidents").to_pylist()
            if (i["sensor_id"], i["rule"]) == (hot["sensor_id"], OVERHEAT)
            and i["started_at"] <= at <= i["last_seen_at"]
        ]  # fmt: skip
        assert len(opened) == 1, "the overheat sent after the outage opened no incident"
    finally:
        producer.kill()
        job.kill()
        local_kafka.stop(data)


ALERTS_TOPIC = AlertsTopicSettings().alerts_topic  # the job's default
REALTIME_ON = {"SENSORWATCH_REALTIME": "true"}


def hot_reading(spark, lake: Path) -> dict:
    """An overheat of sensor-0001, a second after the newest reading the lake holds (so
    within the watermark), as the producer would send it."""
    times = LakeReader(str(lake)).read("readings", columns=["event_time"])
    newest = max(times.column("event_time").to_pylist())  # aware UTC (delta-rs)
    moment = (newest + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    return {
        "event_id": "drill-overheat-after-the-outage", "sensor_id": "sensor-0001",
        "event_time": moment, "temperature_c": 60.0, "humidity_pct": 40.0,
        "battery_pct": 90.0, "seq": 1,
    }  # fmt: skip


def minute_of(event_time: str) -> datetime:
    """The minute (an alert's window_start) of an event time."""
    return parse_instant(event_time).replace(second=0, microsecond=0)


def test_nasty_records_through_kafka_land_once_each(spark, kafka, new_topic, tmp_path) -> None:
    """Null values, null keys, invalid UTF-8, huge and nested JSON: quarantined or kept,
    never lost, and the job does not stop."""
    from confluent_kafka import Producer

    topic, lake = new_topic("nasty"), tmp_path / "lake"
    valid = json.dumps({
        "event_id": "ok-1", "sensor_id": "sensor-0001", "event_time": "2026-01-01T00:00:01Z",
        "temperature_c": 20.5, "humidity_pct": 40, "battery_pct": 90, "seq": 1,
    })  # fmt: skip
    records: list[tuple[bytes | None, bytes | None]] = [
        (b"sensor-0001", None),  # a tombstone
        (None, valid.encode()),  # no key: the event carries its own sensor_id
        (b"k", b"\xff\xfe\xfd"),
        (b"k", b'{"event_id": "\\ud800"}'),
        (b"k", ("[" * 5000 + "]" * 5000).encode()),
        (b"k", json.dumps({"event_id": "x" * 200_000}).encode()),
        (b"k", valid.replace("20.5", "1e400").encode()),
        (b"k", valid.replace('"seq": 1', '"seq": 18446744073709551616').encode()),
        (None, None),
    ]
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "message.max.bytes": 2_000_000})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(30) == 0

    run(available_now(kafka, topic, lake), spark)

    readings, quarantine = rows(spark, lake, "readings"), rows(spark, lake, "quarantine")
    assert [r.event_id for r in readings] == ["ok-1"]
    assert len(readings) + len(quarantine) == len(records)
    assert len({(q.kafka_partition, q.kafka_offset) for q in quarantine}) == len(quarantine)
    reasons = Counter(q.error for q in quarantine)
    assert reasons["null_value"] == 2
    assert all(q.error for q in quarantine)
