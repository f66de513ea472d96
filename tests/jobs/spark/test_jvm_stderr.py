"""The JVM's stderr as the job shows it (jobs/spark/jvm_stderr.py): a checkpoint conflict is
held back, dropped when the lake turned out to be taken over (or the conflict handled),
and shown late but whole otherwise; every other record passes at once. A simulated
clock, a real pipe."""

from __future__ import annotations

import os

import pytest

from jobs.spark.jvm_stderr import JvmStderr

CONFLICT = [
    b"10:00:41 ERROR MicroBatchExecution: Query ingest [id = 1] terminated with error",
    b"org.apache.spark.SparkConcurrentModificationException: Multiple streaming queries ...",
    b"\tat org.apache.spark.sql.execution.streaming.HDFSMetadataLog.write(X.scala:1)",
    b"Caused by: org.apache.hadoop.fs.FileAlreadyExistsException: Rename destination ...",
]
OTHER = [b"10:00:42 WARN Executor: something else", b"\tat org.Example.run(Example.java:1)"]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def out():
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)

    def shown() -> bytes:
        try:
            return os.read(read_end, 1 << 20)
        except BlockingIOError:
            return b""

    yield write_end, shown
    os.close(read_end)
    os.close(write_end)


def feed(stderr: JvmStderr, lines: list[bytes]) -> None:
    for line in lines:
        stderr.line(line)
    stderr.end_record()


def test_a_conflict_is_held_then_shown_whole_when_nothing_explains_it(out) -> None:
    target, shown = out
    clock = Clock()
    stderr = JvmStderr(target, hold_s=10.0, clock=clock)

    feed(stderr, [*CONFLICT, *OTHER])
    assert shown() == b"".join(line + b"\n" for line in OTHER)  # the rest at once

    clock.t += 9.9
    stderr.show_due()
    assert shown() == b""
    clock.t += 0.2
    stderr.show_due()
    assert shown() == b"".join(line + b"\n" for line in CONFLICT)


@pytest.mark.parametrize(
    ("said", "later_shown"),
    [("mute", False), ("drop_held", True)],
    ids=["a takeover drops it and all that follows", "a handled failure drops it alone"],
)
def test_a_conflict_the_job_explained_is_dropped(out, said: str, later_shown: bool) -> None:
    target, shown = out
    clock = Clock()
    stderr = JvmStderr(target, hold_s=10.0, clock=clock)
    feed(stderr, CONFLICT)

    getattr(stderr, said)()
    feed(stderr, OTHER)
    clock.t += 60
    stderr.show_due()

    assert shown() == (b"".join(line + b"\n" for line in OTHER) if later_shown else b"")


def test_the_copy_loop_shows_a_held_record_when_the_jvm_ends(out) -> None:
    target, shown = out
    source, sink = os.pipe()
    stderr = JvmStderr(target, hold_s=3600.0)
    os.write(sink, b"WARNING: Using incubator modules: jdk.incubator.vector\n")
    os.write(sink, b"\n".join(CONFLICT) + b"\n")
    os.close(sink)

    stderr.copy(source)  # returns when the pipe closes

    assert shown() == b"".join(line + b"\n" for line in CONFLICT)


@pytest.mark.parametrize(
    "cause",
    ["Connection refused", "Connection reset by peer", "connect timed out",
     "error sending request for url", "Unable to execute HTTP request"],
)  # fmt: skip
def test_an_object_store_failure_the_job_waits_out_is_held(out, cause: str) -> None:
    """Every way the job knows an object store that did not answer (lake/storage.py) holds
    Spark's record of it, so that the job's drop_held leaves only its own line. Only three
    of lake/storage.py's seven were held: a query that failed during an outage once showed
    its stack trace (CI, test_s3_lake's outage drill, 2026-12-07; the words it failed with
    were cut from the log)."""
    target, shown = out
    stderr = JvmStderr(target, hold_s=10.0, clock=Clock())
    feed(stderr, [
        b"10:00:41 ERROR MicroBatchExecution: Query ingest [id = 1] terminated with error",
        b"org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: "
        b"[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function",
        b"OSError: Generic S3 error: " + cause.encode(),
        b"\tat org.apache.spark.sql.execution.SQLExecution$.withSessionTagsApplied(X.scala:1)",
    ])  # fmt: skip

    assert shown() == b""
    stderr.drop_held()
    stderr.show_due()
    assert shown() == b""


def test_the_commit_log_conflict_of_spark_4_2_is_held(out) -> None:
    """Spark 4.2's commit-log conflict (java.util's ConcurrentModificationException, which
    jobs/spark/checkpoints.py recognises) is held like the others, not shown with its stack."""
    target, shown = out
    stderr = JvmStderr(target, hold_s=10.0, clock=Clock())
    feed(stderr, [
        b"10:00:41 ERROR MicroBatchExecution: Query windows [id = 2] terminated with error",
        b"java.util.ConcurrentModificationException: Multiple streaming queries are "
        b"concurrently using file:/lake/_checkpoints/windows/commits",
    ])  # fmt: skip

    assert shown() == b""
