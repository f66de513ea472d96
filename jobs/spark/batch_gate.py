"""Stopping a streaming query between two of its micro-batches (jobs/driver/job.py)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from common.waiting import poll_until

BatchFunction = Callable[[DataFrame, int], None]

# How long a micro-batch waits for the interrupt of Spark's stop: one that ended after a
# stop request (the job stops the query as soon as it parks), one that began as the job
# stopped its query (the interrupt follows within milliseconds, unless something on the
# way, such as Hadoop's shell utilities, swallowed it). Bounds only: neither is waited
# out in a normal stop.
PARK_TIMEOUT_S = 60.0
LATE_TIMEOUT_S = 10.0

# What a micro-batch function raises when a forced stop (jobs.driver.job.STOP_DEADLINE_S)
# cancelled its Spark jobs. Spark 4 recognises a stop's interruption inside a Python
# foreachBatch only from the Py4J error text, by a regex that starts at the first
# "...while calling" and recurses once per character after it (SPARK-39218,
# SPARK-48717): the whole error of a cancelled job overflows the stack, while this short
# text, the last line of a short traceback, is recognised and the query ends quietly.
INTERRUPTED = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling the micro-batch's jobs\n"
    ": java.lang.InterruptedException: the job stopped the query mid-batch"
)


class StoppedMidBatch(RuntimeError):
    """The job stopped the query while this micro-batch ran (see INTERRUPTED)."""


class BatchPanicked(RuntimeError):
    """A micro-batch function died of something that is no Exception (a native panic)."""


class BatchGate:
    """Lets the job stop each query between two of its micro-batches (jobs/driver/job.py).

    ``StreamingQuery.stop()`` marks the query stopped, cancels its running Spark jobs and
    interrupts its thread. Within a Python foreachBatch function that is the worst moment:
    the function fails, and Spark 4's check of whether the failure came from the stop (a
    regex over the whole Py4J error text) overflows the stack. Just after the function
    it interrupts the commit of the batch to the checkpoint (Hadoop's local file system
    then logs a warning with a stack trace). So the gate, which wraps every query's batch
    function:

    - tells the job whether a query is inside its function (:meth:`busy`);
    - once the job has asked to stop a query (:meth:`request_stop`), makes the batch that
      is running wait, when its function is done, until Spark's stop has reached the
      query's thread, and clears the interrupt (:meth:`parked` tells the job when to
      call ``stop()``). Spark then commits the batch as usual and, seeing the query
      stopped, ends it instead of starting the next trigger;
    - lets a batch that began just as the job stopped an idle query complete in the same
      way (its thread is interrupted, its job group cancelled: the batch clears the one
      and runs its jobs in a group of their own).

    The calls into the JVM here run on the query's own thread: PySpark pins a callback's
    JVM calls to the thread that made the callback.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy: set[str] = set()
        self._stopping: set[str] = set()  # stop requested: park at the end of the batch
        self._parked: set[str] = set()  # batch done, waiting for Spark's stop
        self._closed: set[str] = set()  # stop() called, or about to be

    def wrap(self, query: str, write: BatchFunction) -> BatchFunction:
        """``write`` as the foreachBatch function of ``query``, watched by the gate."""

        def batch(df: DataFrame, batch_id: int) -> None:
            with self._changed:
                late = query in self._closed
                self._busy.add(query)
            try:
                if late:
                    _take_interrupt(df.sparkSession, LATE_TIMEOUT_S)
                    _own_job_group(df.sparkSession)
                try:
                    write(df, batch_id)
                except Exception:
                    if self.closed(query):  # a forced stop cancelled the batch's jobs
                        raise StoppedMidBatch(INTERRUPTED) from None
                    raise
                except (KeyboardInterrupt, SystemExit, GeneratorExit):
                    raise
                except BaseException as error:
                    # A native library's panic (delta-rs: pyo3's PanicException) is no
                    # Exception: py4j's callback would die of it without answering, and
                    # the query would wait for ever. As an Exception it fails the query.
                    raise BatchPanicked(f"{type(error).__name__}: {error}") from error
                with self._changed:
                    # A stop is coming (requested) or on its way (closed, by a forced
                    # stop): take its interrupt here, so that it cannot hit the commit.
                    wait = not late and (query in self._stopping or query in self._closed)
                    if wait and query not in self._closed:
                        self._parked.add(query)
                        self._changed.notify_all()
                if wait:
                    _take_interrupt(df.sparkSession, PARK_TIMEOUT_S)
            finally:
                with self._changed:
                    self._busy.discard(query)
                    self._parked.discard(query)
                    self._changed.notify_all()

        return batch

    def request_stop(self, query: str) -> None:
        """From now on, a batch of ``query`` that ends waits for Spark's stop."""
        with self._changed:
            self._stopping.add(query)

    def busy(self, query: str) -> bool:
        """Whether ``query``'s batch function runs."""
        with self._changed:
            return query in self._busy

    def parked(self, query: str) -> bool:
        """Whether a batch of ``query`` is done and waits for Spark's stop."""
        with self._changed:
            return query in self._parked

    def closed(self, query: str) -> bool:
        """Whether ``query`` is being stopped (:meth:`close`)."""
        with self._changed:
            return query in self._closed

    def close(self, query: str, *, force: bool = False) -> bool:
        """Mark ``query`` as being stopped, unless (without ``force``) its batch function
        runs and has not parked; True when marked: the caller then stops the query."""
        with self._changed:
            if not force and query in self._busy and query not in self._parked:
                return False
            self._closed.add(query)
            return True

    def wait(self, timeout: float) -> None:
        """Wait until some batch parks or ends, at most ``timeout`` seconds."""
        with self._changed:
            self._changed.wait(timeout)


def _take_interrupt(spark: SparkSession, timeout: float) -> None:
    """Wait until Spark's stop interrupts this query's thread, then clear the interrupt."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    thread = jvm.java.lang.Thread
    # The stop interrupts right after marking the query stopped: poll often.
    poll_until(lambda: thread.currentThread().isInterrupted(), timeout, 0.01)
    thread.interrupted()  # clears it


def _own_job_group(spark: SparkSession) -> None:
    """Run this thread's next Spark jobs outside the query's job group, which the stop
    cancels (asynchronously: the cancellation may come after the jobs start)."""
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", f"sensorwatch-{uuid.uuid4()}")
