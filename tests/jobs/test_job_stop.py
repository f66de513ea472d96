"""Stopping the job: between micro-batches, quietly, exactly once (issue 14).

The subprocess tests read everything the job prints, Spark's JVM included; the in-process
ones drive jobs.spark.batch_gate.BatchGate against a real streaming query at the moments a stop
request can meet it.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from jobs.spark.batch_gate import BatchGate
from lake.reader import read_path
from tests.support.job_output import noise, summary
from tests.support.polling import STUCK
from tests.support.processes import Running
from tests.support.producer_run import run_producer

JOB = [sys.executable, "-m", "jobs.stream"]
START = ("--start-time", "2026-01-01T00:00:00Z")


def poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f}s"
        time.sleep(0.02)  # poll interval; bounded by the deadline


@pytest.mark.slow  # a drill: a program stopped mid-batch
def test_sigint_mid_batch_waits_for_the_batch_then_stops_quietly(
    kafka, new_topic, tmp_path
) -> None:
    """Ctrl-C (SIGINT to the whole process group, the JVM included) while the first
    micro-batch runs: the batch completes and is committed, no other starts, exit 0."""
    topic, lake = new_topic("stop-mid"), tmp_path / "lake"
    sent = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic,
                        "--count", 40_000, "--seed", 9, *START)  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    job = Running(
        [*JOB, "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--lake", str(lake),
         "--trigger", "2 seconds"], cwd=PROJECT_ROOT,
    )  # fmt: skip
    offsets = lake / "_checkpoints" / "ingest" / "offsets"
    try:
        poll(lambda: (offsets / "0").exists() or job.proc.poll() is not None, 180, "batch 0")
        job.interrupt_group(signal.SIGINT)  # batch 0 has just begun: 40,000 records
        assert job.finish(timeout=STUCK) == 0, "\n".join(job.lines[-30:])
    finally:
        job.kill()

    lines = job.lines
    assert noise(lines) == [], "\n".join(lines)
    stopping = next(i for i, line in enumerate(lines) if line.startswith("jobs.stream: stopping"))
    done = next(i for i, line in enumerate(lines) if line.startswith("jobs.stream: ingest #0:"))
    assert stopping < done, "the stop request came while batch 0 ran"
    assert "jobs.stream: stopped" in lines
    commits = lake / "_checkpoints" / "ingest" / "commits"
    assert (commits / "0").exists() and not (offsets / "1").exists()
    readings = read_path(lake / "readings", ["kafka_partition", "kafka_offset"])
    quarantine = read_path(lake / "quarantine", ["kafka_offset"])
    assert readings.num_rows + quarantine.num_rows == 40_000
    assert len(readings.group_by(["kafka_partition", "kafka_offset"]).aggregate([])) == (
        readings.num_rows
    )
    counts = summary(lines)
    assert (counts["readings"], counts["quarantine"]) == (readings.num_rows, quarantine.num_rows)


def rate_query(spark, gate: BatchGate, write, checkpoint: Path):  # type: ignore[no-untyped-def]
    return (
        spark.readStream.format("rate").option("rowsPerSecond", 20).load()
        .writeStream.foreachBatch(gate.wrap("q", write))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="1 second").start()
    )  # fmt: skip


def test_a_batch_that_ends_after_the_stop_request_is_committed(spark, tmp_path) -> None:
    """The stop request meets a running batch: it parks at its end, Spark's stop
    reaches it there, and Spark commits it and ends the query without an error."""
    gate, release, written = BatchGate(), threading.Event(), []

    def write(df, batch_id: int) -> None:
        release.wait(60)  # a slow batch
        written.append((batch_id, df.count()))

    query = rate_query(spark, gate, write, tmp_path / "cp")
    try:
        poll(lambda: gate.busy("q"), STUCK, "batch")
        gate.request_stop("q")
        assert not gate.close("q"), "a running batch is not stopped"
        release.set()
        poll(lambda: gate.parked("q"), STUCK, "parked batch")
        assert gate.close("q")
        query.stop()
    finally:
        release.set()
        query.stop()
    assert query.exception() is None
    last = written[-1][0]
    assert (tmp_path / "cp" / "commits" / str(last)).exists()
    assert not (tmp_path / "cp" / "offsets" / str(last + 1)).exists()


def test_a_batch_that_begins_as_its_query_stops_completes(spark, tmp_path) -> None:
    """The job found the query idle and is stopping it as the next batch begins (the
    race the gate closes): the batch runs its Spark jobs to the end and is committed."""
    gate, written = BatchGate(), []
    query = rate_query(spark, gate, lambda df, b: written.append((b, df.count())), tmp_path / "cp")
    try:
        poll(lambda: bool(written) and not gate.busy("q"), STUCK, "first batch")
        assert gate.close("q")  # as the job does for an idle query, just before stop()
        poll(lambda: gate.busy("q"), 120, "late batch")  # begun after the close
        query.stop()  # the late batch waits for this interrupt, then completes
    finally:
        query.stop()
    assert query.exception() is None
    last = written[-1][0]
    assert last >= 1 and (tmp_path / "cp" / "commits" / str(last)).exists()


def test_incidents_and_alerts_by_rule_in_the_summary(tmp_path) -> None:
    """Counts by rule and status from the tables; a lake without tables reads as empty."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs.driver.summary import summary_lines
    from lake.layout import Lake

    lake = Lake(tmp_path / "lake")
    empty = summary_lines(lake)
    assert "  readings 0, quarantine 0" in empty and "  alerts 0" in empty
    write_deltalake(lake.table("alerts"), pa.table({"rule": ["a", "b", "a"]}))
    incidents = {"rule": ["a", "a", "b"], "status": ["firing", "resolved", "resolved"]}
    write_deltalake(lake.table("incidents"), pa.table(incidents))
    lines = summary_lines(lake)
    assert "  alerts 3: a 2, b 1" in lines
    assert "  incidents 3: a 1 firing + 1 resolved, b 1 resolved" in lines


class NativePanic(BaseException):
    """What pyo3 raises for a panic in a native library: no Exception."""


def test_a_native_panic_in_a_batch_fails_the_query_instead_of_hanging(spark, tmp_path) -> None:
    def panics(df, batch_id: int) -> None:
        raise NativePanic("Invalid object store url")

    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        .writeStream.foreachBatch(BatchGate().wrap("panicky", panics))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )  # fmt: skip
    try:
        ended = query.awaitTermination(120)
    except Exception as error:  # the query failed, as it must
        assert "BatchPanicked: NativePanic: Invalid object store url" in str(error)
        return
    # Not stopped: stop() would wait for ever for the batch that never answered.
    raise AssertionError(f"the query did not fail (ended={ended}): it hung")
