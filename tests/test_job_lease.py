"""One writer per lake, with real jobs (lake/lease.py, docs/architecture.md#the-lease): of
two jobs started on one lake at once, one holds it and the other exits at once naming the
holder; a standby takes over when the holder is killed (kill -9), and every offset lands
once."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.drills import catch_up, kill_hard, rows, start_job, start_producer, wait_for_new_commit
from tests.polling import STUCK
from tests.producer_run import read_jsonl

pytestmark = pytest.mark.slow


def test_of_two_jobs_started_at_once_one_holds_and_a_standby_takes_over_from_it_killed(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake = new_topic("lease"), tmp_path / "lake"
    log_dir = lake / "readings" / "_delta_log"
    producer = start_producer(kafka.bootstrap, topic, tmp_path)
    first = second = standby = None
    try:
        producer.wait_for_line(lambda line: " delivered (" in line, 180)
        # Two jobs started on one lake at once: one holds it; the other says who, in one
        # line, before any JVM, and exits 2.
        first, second = (start_job(kafka, topic, lake, tmp_path / "fleet.jsonl") for _ in "12")
        deadline = time.monotonic() + 120
        while first.proc.poll() is None and second.proc.poll() is None:
            assert time.monotonic() < deadline, "neither job gave the lake up"
            time.sleep(0.05)
        holder, refused = (second, first) if first.proc.poll() is not None else (first, second)
        assert refused.finish(timeout=120) == 2
        said = [line for line in refused.lines if line.strip()]
        assert len(said) == 1, said
        assert f"pid {holder.proc.pid}" in said[0] and "--standby" in said[0]
        wait_for_new_commit(log_dir, set(), STUCK, holder)

        # A standby waits for it; the holder is killed; the standby takes over.
        standby = start_job(
            kafka, topic, lake, tmp_path / "fleet.jsonl", env={"SENSORWATCH_STANDBY": "true"}
        )
        standby.wait_for_line(lambda line: "waits for it to stop" in line, STUCK)
        kill_hard(holder)
        standby.wait_for_line(lambda line: "took the lake" in line, STUCK)
        wait_for_new_commit(log_dir, set(log_dir.glob("*.json")), STUCK, standby)
        producer.terminate()
        assert producer.finish(timeout=STUCK) == 0, "\n".join(producer.lines[-20:])
        standby.terminate()
        assert standby.finish(timeout=180) == 0, "\n".join(standby.lines[-30:])
    finally:
        for running in (producer, first, second, standby):
            if running is not None:
                running.kill()
    catch_up(spark, kafka, topic, lake, tmp_path / "fleet.jsonl")

    landed = Counter(
        (r.kafka_partition, r.kafka_offset)
        for table in ("readings", "quarantine")
        for r in rows(spark, lake, table)
    )
    manifest = read_jsonl(tmp_path / "manifest.jsonl")
    assert set(landed.values()) == {1}, "an offset landed twice"
    assert set(landed) == {(m["partition"], m["offset"]) for m in manifest}, "an offset is missing"
    alerts = [a.alert_id for a in rows(spark, lake, "alerts")]
    assert len(alerts) == len(set(alerts)) > 0
