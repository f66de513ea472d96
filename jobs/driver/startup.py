"""What the job checks and takes before its queries start: the topics, a lake it can
write, the lake's lease (a standby waits for it), and the SparkSession, built so that a
stop request is still heard (docs/streaming-job.md)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from conf.kafka_client import librdkafka_config
from conf.lake_location import is_object_store
from conf.settings.base import SettingsError
from conf.settings.job import JobSettings
from jobs.metrics import JobMetrics
from jobs.spark.jvm_stderr import JvmStderr
from jobs.spark.spark_session import build_spark_session, ignore_sigterm_in_jvm, jvm_stderr_filtered
from jobs.writer.delta_io import fence_tables, write_under
from jobs.writer.table_guard import guard_tables
from lake import storage
from lake.layout import Lake
from lake.lease import LakeLease, StoreUnsafe, check_create_if_absent
from topics.admin import check_topic, create_topic


def check_lake(lake: str) -> None:
    """Fail before starting anything when the lake cannot be written (a folder is made
    if missing; a bucket must exist), or is in an object store that does not refuse a
    second create of one key (lake.lease.check_create_if_absent).

    Raises:
        SettingsError: naming the lake and what is wrong.
    """
    filesystem, root = storage.filesystem(lake)
    # A name of its own: two jobs started at once on one lake (one will be refused by the
    # lease, with its holder's pid) must not delete each other's probe.
    probe = f"{root}/.sensorwatch-write-check-{uuid.uuid4().hex}"
    try:
        if not is_object_store(lake):
            Path(lake).mkdir(parents=True, exist_ok=True)
        with filesystem.open_output_stream(probe) as out:
            out.write(b"ok")
        filesystem.delete_file(probe)
    except OSError as exc:
        if is_object_store(lake):
            raise SettingsError(
                f"--lake {lake}: cannot write there ({exc}); check that the bucket exists "
                "and that AWS_ENDPOINT_URL and the credentials in the environment are right"
            ) from None
        raise SettingsError(
            f"--lake {lake}: cannot write there ({exc.strerror or exc}); "
            "choose another folder or fix its permissions"
        ) from None
    try:
        check_create_if_absent(lake)
    except StoreUnsafe as exc:
        raise SettingsError(f"--lake {lake}: {exc}") from None


@contextmanager
def lake_held(
    settings: JobSettings,
    say: Callable[[str], None],
    should_stop: Callable[[], bool],
    metrics: JobMetrics | None = None,
) -> Iterator[LakeLease | None]:
    """The lake, this job's while the block runs: its lease taken (a standby waits for
    it) and renewed, checked before every commit (jobs/writer/delta_io.committing), handed back
    at the end; its tables found as this job writes them (jobs/writer/table_guard.py). None
    when a stop came first.

    Raises:
        LeaseHeld: another job holds the lake and this one is no standby.
        LakeMismatch: a table differs from this job's definition (the lease handed back).
    """
    lease = LakeLease(settings.lake, settings.lease_expiry, say)
    if metrics is not None:
        metrics.holds_lake(False)
    if not lease.acquire(settings.standby, should_stop):
        yield None
        return
    if metrics is not None:
        metrics.holds_lake(True)
        if lease.taken_from is not None:
            metrics.took_over()
    lease.keep()
    try:
        guard_tables(Lake(settings.lake), say)
        write_under(settings.lake, lease)
        if lease.taken_from is not None:
            # Taken from a holder that did not hand the lake back: before anything else,
            # every table says that a holder stalled past its lease can commit nothing.
            fence_tables(Lake(settings.lake), lease)
        yield lease
    finally:
        write_under(settings.lake, None)
        lease.release()
        if metrics is not None:
            metrics.holds_lake(False)


def prepare_topics(settings: JobSettings) -> int:
    """Check the readings topic and make the alerts topic like it if missing (with the
    real-time path on); returns the readings topic's partition count.

    Raises:
        TopicError: the broker cannot be reached, or the readings topic does not exist.
    """
    client = librdkafka_config(settings)
    partitions = check_topic(client, settings.topic)
    if settings.realtime:
        create_topic(client, settings.alerts_topic, partitions)
    return partitions


def start_session(
    settings: JobSettings, lease: LakeLease | None = None
) -> tuple[SparkSession, JvmStderr]:
    """The job's SparkSession, built on a thread of its own.

    Built on the main thread, PySpark would install its own SIGINT handler (cancel every
    Spark job, raise KeyboardInterrupt wherever the program is), which breaks a clean
    stop; it does so only on the main thread. The main thread meanwhile keeps handling
    SIGTERM and SIGINT as stop requests. The JVM's start-up warning about incubator
    modules is left out of its stderr (jobs.spark.jvm_stderr.JVM_NOISE says why), and Spark's
    errors about a checkpoint entry another holder of the lake wrote are held back: the
    job says what happened in its own words (jobs/spark/jvm_stderr.py). Returns the session and
    that stderr.
    """
    built: list[SparkSession] = []
    failed: list[BaseException] = []

    def build() -> None:
        try:
            built.append(
                build_spark_session(
                    "sensorwatch-job",
                    master=settings.master,
                    shuffle_partitions=settings.shuffle_partitions,
                    driver_memory=settings.driver_memory,
                    ui=settings.spark_ui,
                    log_level=settings.log_level,
                    lake=settings.lake,
                    extra=settings.spark_conf,
                )
            )
        except BaseException as exc:  # re-raised on the main thread below
            failed.append(exc)

    with jvm_stderr_filtered() as jvm_stderr:
        if lease is not None:  # Spark's errors about the new holder's files: not news
            lease.when_lost(jvm_stderr.mute)
        thread = threading.Thread(target=build, name="spark-session")
        thread.start()
        thread.join()
    if failed:
        raise failed[0]
    spark = built[0]
    ignore_sigterm_in_jvm(spark)
    return spark, jvm_stderr
