"""``python -m jobs.stream``: the SensorWatch streaming job (SPEC section 4).

Queries, each with its checkpoint under ``<lake>/_checkpoints/<query>``:

- ``ingest``: Kafka -> parse -> ``readings`` and ``quarantine``, overheat_reading alerts;
- ``windows``: ``readings`` -> dedup -> one-minute panes -> ``sensor_stats_1m``,
  ``sensor_stats_5m``, sustained_high and sensor_silent alerts.

Both keep ``incidents`` (one row per episode) in step with the alerts they raise; the
windows query's watermark is the event-time clock that resolves them.

A listener turns every query's progress into ``pipeline_metrics`` rows.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from conf.paths import PROJECT_ROOT
from conf.settings import (
    JobSettings,
    SettingsError,
    env_name,
    flag_name,
    load_settings,
    read_settings_file,
)
from jobs.checkpoints import (
    advice,
    incompatible_checkpoint,
    latest_watermark,
    replaced_queries,
)
from jobs.context import JobContext
from jobs.incident_sink import IncidentWriter
from jobs.ingest import start_ingest
from jobs.metrics import MetricsListener, write_metrics
from jobs.registry import RegistryCache, RegistryError
from jobs.spark_session import build_spark_session
from jobs.tables import Lake, create_tables
from jobs.windows import QUERY as WINDOWS
from jobs.windows import REPLACED, start_windows
from producer.topics import TopicError, check_topic

DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "pipeline.toml"


class JobFailed(RuntimeError):
    """A query failed; the message says which and why."""


class CheckpointMismatch(JobFailed):
    """A query cannot use its checkpoint; the message says what to do."""


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class StreamingJob:
    """Starts the queries, writes pipeline_metrics, and stops everything cleanly."""

    def __init__(
        self, spark: SparkSession, settings: JobSettings, echo: Callable[[str], None] | None
    ) -> None:
        self.spark = spark
        self.settings = settings
        self.lake = Lake(settings.lake)
        self.echo = echo
        self.listener = MetricsListener(echo)
        self.queries: list[StreamingQuery] = []
        registry = RegistryCache(spark, settings.registry, settings.registry_refresh_batches)
        hold = timedelta(seconds=settings.incident_hold_seconds)
        self.incidents = IncidentWriter(self.lake, hold, echo)
        # availableNow: one pass over the incidents at the end (see _catch_up_incidents);
        # an interval trigger: each micro-batch keeps them current.
        per_batch = None if settings.available_now else self.incidents
        self.ctx = JobContext(spark, settings, self.lake, registry, echo, per_batch)

    def _in_pool(self, pool: str) -> None:
        # A query takes the scheduler pool of the thread that starts it.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)

    def _start_ingest(self) -> StreamingQuery:
        self._in_pool("ingest")
        query = start_ingest(self.ctx)
        self.queries.append(query)
        return query

    def _start_readers(self) -> list[StreamingQuery]:
        """The query that reads the readings table (none when ``readers`` is off)."""
        if not self.settings.readers:
            return []
        self._in_pool("readers")
        started = [start_windows(self.ctx)]
        self.queries.extend(started)
        return started

    def _failure(self, query: StreamingQuery, error: BaseException) -> JobFailed:
        if incompatible_checkpoint(str(error)):
            return CheckpointMismatch(advice(query.name, self.lake))
        return JobFailed(f"query {query.name} failed: {_first_line(error)}")

    def _await(self, queries: list[StreamingQuery]) -> None:
        for query in queries:
            try:
                query.awaitTermination()
            except StreamingQueryException as exc:
                raise self._failure(query, exc) from None

    def flush_metrics(self) -> int:
        """Write the collected pipeline_metrics rows; returns how many."""
        return write_metrics(self.listener.take(), self.lake.table("pipeline_metrics"))

    def _flush_after(self, queries: list[StreamingQuery]) -> None:
        last = {str(q.id): q.lastProgress["batchId"] for q in queries if q.lastProgress is not None}
        self.listener.wait_for(last)
        self.flush_metrics()

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Run until done (availableNow) or until ``should_stop()`` (interval trigger)."""
        old = replaced_queries(self.lake, REPLACED, "windows")
        if old:
            raise CheckpointMismatch(old)
        create_tables(self.lake)
        self.spark.streams.addListener(self.listener)
        try:
            if self.settings.available_now:
                # The statistics read what ingest wrote: let ingest finish first.
                self._await([self._start_ingest()])
                self._await(self._start_readers())
                self._flush_after(self.queries)
                self._catch_up_incidents()
            else:
                self._start_ingest()
                self._start_readers()
                self._run_until_stopped(should_stop)
        finally:
            for query in self.queries:
                if query.isActive:
                    query.stop()
            self.spark.streams.removeListener(self.listener)

    def _catch_up_incidents(self) -> None:
        """After an availableNow run: the incidents of everything it found, in one pass,
        with the windows query's final watermark as the clock. An episode that opened and
        ended within the run is then written once, resolved, which is what tells the
        notifier that nobody can have seen it firing (docs/alerting.md)."""
        clock = latest_watermark(self.lake.checkpoint(WINDOWS)) if self.settings.readers else None
        self.incidents.catch_up(clock, self.lake.table("_panes"))

    def _run_until_stopped(self, should_stop: Callable[[], bool]) -> None:
        next_flush = time.monotonic() + self.settings.metrics_flush_seconds
        while not should_stop():
            for query in self.queries:
                if not query.isActive:
                    error = query.exception()
                    if error is not None:
                        raise self._failure(query, error)
                    raise JobFailed(f"query {query.name} stopped without an error")
            # Wakes up at least every second to notice a stop request.
            self.spark.streams.awaitAnyTermination(1.0)
            self.spark.streams.resetTerminated()
            if time.monotonic() >= next_flush:
                self.flush_metrics()
                next_flush = time.monotonic() + self.settings.metrics_flush_seconds
        if self.echo:
            self.echo("stopping: the current micro-batches end or are abandoned, then resume")
        for query in self.queries:
            query.stop()
        self._flush_after(self.queries)


def build_parser() -> argparse.ArgumentParser:
    """``--config`` plus one flag per setting of JobSettings (SPEC section 4 names)."""
    parser = argparse.ArgumentParser(
        prog="python -m jobs.stream",
        description=(
            "Kafka -> Spark Structured Streaming -> Delta tables under --lake, exactly once. "
            "Settings: defaults, then the --config file, then SENSORWATCH_<NAME> variables, "
            "then flags."
        ),
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_CONFIG,
        metavar="PATH",
        help=f"settings file (TOML; default: {DEFAULT_CONFIG.relative_to(PROJECT_ROOT)})",
    )
    for name, info in JobSettings.model_fields.items():
        parser.add_argument(
            flag_name(name),
            dest=name,
            default=None,
            metavar="X",
            help=f"{info.description or ''} (default: {info.default}; env {env_name(name)})",
        )
    return parser


def check_lake(lake: Path) -> None:
    """Fail before starting anything when the lake folder cannot be written.

    Raises:
        SettingsError: naming the folder and what is wrong.
    """
    probe = lake / ".sensorwatch-write-check"
    try:
        lake.mkdir(parents=True, exist_ok=True)
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise SettingsError(
            f"--lake {lake}: cannot write there ({exc.strerror}); "
            "choose another folder or fix its permissions"
        ) from None


def run(
    settings: JobSettings,
    spark: SparkSession,
    echo: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> None:
    """Run the job with ``settings`` on ``spark``.

    Raises:
        TopicError: the broker cannot be reached or the topic does not exist.
        JobFailed: a query failed.
    """
    check_topic(settings.bootstrap_servers, settings.topic)
    check_lake(settings.lake)
    StreamingJob(spark, settings, echo).run(should_stop)


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status (0 done or stopped, 1 failed, 2 bad set-up)."""
    args = vars(build_parser().parse_args(argv))
    config = args.pop("config")
    try:
        settings = load_settings(JobSettings, args, read_settings_file(config))
    except SettingsError as exc:
        print(
            "jobs.stream: invalid settings:\n  " + str(exc).replace("\n", "\n  "), file=sys.stderr
        )
        return 2

    def say(line: str) -> None:
        print(f"jobs.stream: {line}", flush=True)

    try:  # before starting a JVM: these mistakes are reported in a second
        check_lake(settings.lake)
        check_topic(settings.bootstrap_servers, settings.topic)
    except (TopicError, SettingsError) as exc:
        print(f"jobs.stream: {exc}", file=sys.stderr)
        return 2
    say(f"{settings.topic} at {settings.bootstrap_servers} -> {settings.lake} ({settings.trigger})")
    spark = build_spark_session(
        "sensorwatch-job",
        master=settings.master,
        shuffle_partitions=settings.shuffle_partitions,
        driver_memory=settings.driver_memory,
        ui=settings.spark_ui,
    )
    # Installed after the session exists: PySpark's own SIGINT handler (cancel all jobs
    # from inside a signal handler) would otherwise break a clean stop.
    stop_requested = False

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        StreamingJob(spark, settings, say).run(lambda: stop_requested)
    except (RegistryError, CheckpointMismatch) as exc:
        print(f"jobs.stream: {exc}", file=sys.stderr)
        return 2
    except JobFailed as exc:
        print(f"jobs.stream: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    say("stopped" if stop_requested else "done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
