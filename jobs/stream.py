"""``python -m jobs.stream``: the SensorWatch streaming job (docs/architecture.md#the-job).

Queries, each with its checkpoint under ``<lake>/_checkpoints/<query>``:

- ``ingest``: Kafka -> parse -> ``readings`` and ``quarantine``, overheat_reading alerts;
- ``windows``: ``readings`` -> dedup -> one-minute panes -> ``sensor_stats_1m``,
  ``sensor_stats_5m``, sustained_high and sensor_silent alerts.

Both keep ``incidents`` (one row per episode) in step with the alerts they raise; the
windows query's watermark is the event-time clock that resolves them.

A listener turns every query's progress into ``pipeline_metrics`` rows.

This module is the command: settings, the stop signals, what is said; what is checked and
taken before the queries start is jobs/driver/startup.py, the running job
jobs/driver/job.py.
"""

# ruff: noqa: E402 (the stop signals are taken over before the slower imports below)
from __future__ import annotations

import signal
import threading

# SIGTERM (docker stop) and SIGINT (Ctrl-C) ask for a clean stop, at any moment: from the
# first lines of ``python -m jobs.stream`` on, before the imports below (a second or two)
# have loaded, through Spark's start-up, until the end (see main).
STOP_REQUESTED = threading.Event()


def _request_stop(_signum: int, _frame: object) -> None:
    STOP_REQUESTED.set()


def take_stop_signals() -> None:
    """Make SIGTERM and SIGINT set STOP_REQUESTED (no KeyboardInterrupt, no exit)."""
    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)


if __name__ == "__main__":
    take_stop_signals()

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from pydantic import BaseModel, Field
from pyspark.sql import SparkSession

from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.jars import JarsMissing
from conf.kafka_client import describe
from conf.paths import PROJECT_ROOT
from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.job import JobSettings
from jobs.driver.job import StreamingJob
from jobs.driver.recovery import CheckpointMismatch, JobFailed
from jobs.driver.startup import check_lake, lake_held, prepare_topics, start_session
from jobs.driver.summary import summary_lines
from jobs.metrics import JobMetrics
from jobs.queries.realtime import local_slots
from jobs.queries.registry_cache import RegistryError
from jobs.spark.spark_session import session_jars, stop_session
from jobs.writer.data_files import LAKE_SLOTS
from jobs.writer.table_guard import LakeMismatch
from lake.layout import Lake
from lake.lease import LeaseHeld, LeaseLost
from telemetry.endpoint import EndpointError, serve_metrics
from topics.admin import TopicError

DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "pipeline.toml"


class JobOptions(BaseModel):
    """The job's flag that is not a setting."""

    config: Path = Field(
        DEFAULT_CONFIG,
        description=f"settings file (TOML; default: {DEFAULT_CONFIG.relative_to(PROJECT_ROOT)})",
    )


def read_command_line(argv: list[str] | None) -> tuple[dict[str, object], Path]:
    """The settings given as flags (one per setting of JobSettings, the names of
    docs/architecture.md#command-line-names) and the settings file."""
    flags, options = command_line(
        JobSettings,
        argv,
        prog="python -m jobs.stream",
        description=(
            "Kafka -> Spark Structured Streaming -> Delta tables under --lake, exactly once. "
            "Settings: defaults, then the --config file, then SENSORWATCH_<NAME> variables, "
            "then flags."
        ),
        options=JobOptions,
    )
    assert options is not None
    return flags, options.config


def run(
    settings: JobSettings,
    spark: SparkSession,
    echo: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    metrics: JobMetrics | None = None,
) -> None:
    """Run the job with ``settings`` on ``spark``.

    Raises:
        TopicError: the broker cannot be reached or the topic does not exist.
        JobFailed: a query failed.
    """
    partitions = prepare_topics(settings)
    check_lake(settings.lake)
    with lake_held(settings, echo or (lambda line: None), should_stop, metrics) as lease:
        if lease is not None:
            StreamingJob(spark, settings, echo, partitions, lease, metrics).run(should_stop)


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status (0 done or stopped, 1 failed, 2 bad set-up)."""
    whole_lines()  # run-local runs this program beside others on one terminal
    # A stop request at any moment: each query stops between two of its micro-batches,
    # then the job prints a summary and exits 0.
    take_stop_signals()
    stop = STOP_REQUESTED
    try:
        flags, config = read_command_line(argv)
        settings = load_settings(JobSettings, flags, SettingsFile(config))
    except SettingsError as exc:
        print(
            "jobs.stream: invalid settings:\n  " + str(exc).replace("\n", "\n  "), file=sys.stderr
        )
        return 2

    def say(line: str) -> None:
        print(f"jobs.stream: {line}", flush=True)

    try:  # before starting a JVM: these mistakes are reported in a second
        session_jars(settings.lake)  # a set-up step not run, before anything else
        # The broker first: a refused connection leaves nothing behind, not even the
        # lake's folder, which check_lake makes.
        partitions = prepare_topics(settings)
        check_lake(settings.lake)
    except (TopicError, SettingsError, JarsMissing) as exc:
        print(f"jobs.stream: {exc}", file=sys.stderr)
        return 2
    metrics = JobMetrics() if settings.metrics else None
    with ExitStack() as held:

        def serve() -> bool:
            if metrics is None:
                return True
            try:
                endpoint = serve_metrics(settings, metrics.registry)
            except EndpointError as exc:
                print(f"jobs.stream: {exc}", file=sys.stderr)
                return False
            if endpoint is not None:
                held.callback(endpoint.close)
                say(f"metrics at {endpoint.url}")
            return True

        # A standby shows Prometheus that it waits; any other job learns first whether
        # the lake is free (a second job on a held lake hears that, not about a port).
        if settings.standby and not serve():
            return 2
        try:  # still before the JVM: a held lake, or one it cannot write, said in a second
            lease = held.enter_context(lake_held(settings, say, stop.is_set, metrics))
        except (LeaseHeld, LakeMismatch) as exc:
            print(f"jobs.stream: {exc}", file=sys.stderr)
            return 2
        except LeaseLost as exc:  # taken over while this one stamped the tables
            print(f"jobs.stream: {exc}", file=sys.stderr)
            return 1
        if not settings.standby and lease is not None and not serve():
            return 2
        if lease is None:
            say("stopped")
            return 0
        sized = local_slots(settings.master, partitions)
        if settings.realtime and not settings.available_now and sized is not None:
            say(
                f"local mode: {settings.master} for the lake path, and a task slot for each "
                f"of the {partitions} partitions for the real-time path: {sized.master}"
            )
            conf = {LAKE_SLOTS: str(sized.lake), **settings.spark_conf}
            settings = settings.model_copy(update={"master": sized.master, "spark_conf": conf})
        say(f"{settings.topic} at {describe(settings)} -> {settings.lake} ({settings.trigger})")
        rules = settings.alert_rules
        names = ", ".join(rule.name for rule in rules.rules) or "none"
        say(f"rules {rules.version()} from {settings.rules}: {names}")
        try:
            spark, jvm_stderr = (None, None) if stop.is_set() else start_session(settings, lease)
        except Exception:
            if not stop.is_set():
                raise
            spark = None  # a SIGTERM to the whole process group ended the JVM's start-up
            jvm_stderr = None
        try:
            if spark is not None and not stop.is_set():
                job = StreamingJob(spark, settings, say, partitions, lease, metrics, jvm_stderr)
                job.run(stop.is_set)
        except (RegistryError, CheckpointMismatch) as exc:
            print(f"jobs.stream: {exc}", file=sys.stderr)
            return 2
        except (JobFailed, LeaseLost) as exc:
            lease.stop_renewing()  # its own failing renewals would follow this line
            print(f"jobs.stream: {exc}", file=sys.stderr)
            return 1
        finally:
            if spark is not None:
                stop_session(spark)  # before the lease is handed back: nothing writes any more
    say("stopped" if stop.is_set() else "done")
    for line in summary_lines(Lake(settings.lake)):
        say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
