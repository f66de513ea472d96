"""``python -m jobs.stream``: the SensorWatch streaming job (docs/architecture.md#the-job).

Queries, each with its checkpoint under ``<lake>/_checkpoints/<query>``:

- ``ingest``: Kafka -> parse -> ``readings`` and ``quarantine``, overheat_reading alerts;
- ``windows``: ``readings`` -> dedup -> one-minute panes -> ``sensor_stats_1m``,
  ``sensor_stats_5m``, sustained_high and sensor_silent alerts.

Both keep ``incidents`` (one row per episode) in step with the alerts they raise; the
windows query's watermark is the event-time clock that resolves them.

A listener turns every query's progress into ``pipeline_metrics`` rows.
"""

# ruff: noqa: E402 (the stop signals are taken over before the slower imports below)
from __future__ import annotations

import contextlib
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
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from deltalake.exceptions import DeltaError
from pydantic import BaseModel, Field
from pyspark import InheritableThread
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.jars import JarsMissing
from conf.kafka_client import describe, librdkafka_config
from conf.lake_location import is_object_store
from conf.paths import PROJECT_ROOT
from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.job import JobSettings
from contract.errors import first_line
from contract.rules import RulesFile
from contract.times import interval_seconds
from contract.waiting import poll_until
from jobs.alerting.incident_sink import IncidentWriter
from jobs.alerting.rule_changes import record_rules
from jobs.checkpoints import (
    advice,
    concurrent_checkpoint_update,
    delta_source_version,
    incompatible_checkpoint,
    latest_watermark,
)
from jobs.jvm_stderr import JvmStderr
from jobs.metrics import MetricsListener, executed_batches, write_metrics
from jobs.prometheus import JobMetrics
from jobs.queries.context import JobContext
from jobs.queries.ingest import QUERY as INGEST
from jobs.queries.ingest import start_ingest
from jobs.queries.realtime import QUERY as REALTIME
from jobs.queries.realtime import local_slots, missing_slots
from jobs.queries.windows import QUERY as WINDOWS
from jobs.queries.windows import start_windows
from jobs.realtime.path import RealtimePath
from jobs.registry import RegistryCache, RegistryError
from jobs.spark_session import (
    build_spark_session,
    ignore_sigterm_in_jvm,
    jvm_stderr_filtered,
    session_jars,
    stop_session,
)
from jobs.summary import summary_lines
from jobs.writer.data_files import LAKE_SLOTS
from jobs.writer.delta_io import fence_tables, write_under
from jobs.writer.maintenance import Maintenance, Policy, StreamGuard, apply_properties
from jobs.writer.table_guard import LakeMismatch, guard_tables
from jobs.writer.tables import Lake, create_tables
from lake import storage
from lake.lease import (
    LakeLease,
    LeaseHeld,
    LeaseLost,
    StoreUnsafe,
    check_create_if_absent,
)
from lake.storage import NO_SPACE, STORAGE_ERRORS, storage_full, store_unreachable
from telemetry.endpoint import EndpointError, serve_metrics
from topics.admin import TopicError, check_topic, create_topic

DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "pipeline.toml"

# On a stop request each query stops once its running micro-batch is done; one still
# running after this long is interrupted (docker-compose.yml gives the job 60 s).
STOP_DEADLINE_S = 30.0
# How long the executors of a cluster have to register before the real-time path counts
# their task slots.
SLOTS_WAIT_S = 60.0
# How often a stopping query's state is looked at while no batch of it ends.
STOP_POLL_S = 0.1
# How many times a query of a job that took the lake over is restarted after it met what
# the job before it wrote into its checkpoint as it woke from a stall (lake/lease.py).
PREDECESSOR_RESTARTS = 3
PREDECESSOR = (
    "met an entry of its checkpoint written by the job this one took the lake from, as "
    "that one woke from a stall"
)
# A query that failed because the lake's object store did not answer is restarted once
# the store answers again (asked every STORE_POLL_S); failing so again within
# STORE_RETRY_S of that restart, it stops the job (the store answers this process's
# listing but not the query: a setting, not an outage).
STORE_BACK = "failed while the lake's object store did not answer"
STORE_POLL_S = 2.0
STORE_RETRY_S = 30.0


class JobFailed(RuntimeError):
    """A query failed; the message says which and why."""


class LakeTaken(JobFailed):
    """Another job took the lake over: this one committed nothing more."""


class LakeFull(JobFailed):
    """The lake's disk is full: the job stopped; the message says what to do."""


class CheckpointMismatch(JobFailed):
    """A query cannot use its checkpoint; the message says what to do."""


class StreamingJob:
    """Starts the queries, writes pipeline_metrics, and stops everything cleanly."""

    def __init__(
        self,
        spark: SparkSession,
        settings: JobSettings,
        echo: Callable[[str], None] | None,
        partitions: int,
        lease: LakeLease | None = None,
        metrics: JobMetrics | None = None,
        jvm_stderr: JvmStderr | None = None,
    ) -> None:
        """``lease``: the lake's, checked before every commit (None: no check);
        ``metrics``: the job's Prometheus metrics (None: a registry of its own, unless
        the settings turn metrics off); ``jvm_stderr``: the JVM's stderr, when this
        process started the JVM (jobs/jvm_stderr.py)."""
        self.spark = spark
        self.lease = lease
        self.jvm_stderr = jvm_stderr
        self._restarts: dict[str, int] = {}
        self._store_restarts: dict[str, float] = {}  # by query: when last restarted so
        self.settings = settings
        self.lake = Lake(settings.lake)
        self.echo = echo
        if metrics is None and settings.metrics:
            metrics = JobMetrics()
        self.metrics = metrics  # None: --metrics false, nothing collected
        if metrics is not None:
            metrics.triggers(trigger_seconds(settings))
        self.listener = MetricsListener(echo, self.metrics)
        self.queries: list[StreamingQuery] = []
        registry = RegistryCache(spark, settings.registry, settings.registry_refresh_batches)
        changes = self.lake.table("rule_changes")
        rules = RulesFile(
            settings.rules, settings.alert_rules, echo,
            on_change=lambda new: record_rules(changes, new, str(settings.rules)),
            settle_seconds=settings.rules_settle_seconds,
        )  # fmt: skip
        self.ctx = JobContext(
            spark, settings, self.lake, registry, echo, metrics=self.metrics, rules_file=rules
        )
        self.incidents = IncidentWriter(self.lake, self.ctx.rule_traits, echo, self.metrics)
        # availableNow: one pass over the incidents at the end (see _catch_up_incidents);
        # an interval trigger: each micro-batch keeps them current.
        if not settings.available_now:
            self.ctx.incidents = self.incidents
        self.maintenance = self._maintenance() if settings.maintenance else None
        self.realtime = RealtimePath(self.ctx) if settings.realtime else None
        self.partitions = partitions

    def _maintenance(self) -> Maintenance:
        # Also when this run has no windows query: a later run resumes its checkpoint.
        checkpoint = self.lake.checkpoint(WINDOWS)
        guard = StreamGuard(lambda: delta_source_version(checkpoint))
        return Maintenance(self.lake, Policy.of(self.settings), guard, self.echo)

    def _in_pool(self, pool: str) -> None:
        # A query takes the scheduler pool of the thread that starts it.
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)

    def _start_ingest(self) -> StreamingQuery:
        self._in_pool("ingest")
        query = start_ingest(self.ctx)
        self.queries.append(query)
        return query

    def _start_realtime(self) -> list[StreamingQuery]:
        """The realtime query (none when ``realtime`` is off, or while it may not run: no
        reading rule, too few task slots, a failed start, each said). In an availableNow
        run it is one more query to wait for; otherwise the main loop looks after it, and
        nothing of it stops the job (jobs/realtime/path.py)."""
        if self.realtime is None:
            return []
        if self.settings.available_now:
            query = self.realtime.start()
            self.queries.extend([query] if query is not None else [])
        else:
            self._check_slots()
            query = self.realtime.begin(time.monotonic(), self.partitions)
        return [query] if query is not None else []

    def _check_slots(self) -> None:
        """On a cluster, wait up to a minute for executors enough for both paths: they
        register after the session starts. The real-time path counts the slots itself
        before each start (too few: it stays stopped, saying so, and the lake path runs)."""
        partitions = self.partitions
        context = self.spark.sparkContext
        if self.settings.master.startswith("spark://"):
            poll_until(
                lambda: not missing_slots(context.defaultParallelism, partitions), SLOTS_WAIT_S, 0.5
            )

    def _start_readers(self) -> list[StreamingQuery]:
        """The query that reads the readings table (none when ``readers`` is off)."""
        if not self.settings.readers:
            return []
        self._in_pool("readers")
        started = [start_windows(self.ctx)]
        self.queries.extend(started)
        return started

    def _failure(self, query: StreamingQuery, error: BaseException) -> JobFailed:
        if self.lease is not None:
            # A query that failed on a conflict in its checkpoint or table may have met a
            # job that took the lake over: that is the one thing to say then.
            with contextlib.suppress(LeaseLost, *STORAGE_ERRORS):
                self.lease.verify()
            if self.lease.lost:
                return LakeTaken(self.lease.lost)
        if storage_full(str(error)):
            if self.jvm_stderr is not None:
                self.jvm_stderr.mute()  # every query's stack trace says the same
            return LakeFull(
                f"the lake's disk is full ({self.settings.lake}: {NO_SPACE}): the job "
                "stopped, having lost and repeated nothing; free some space and start it "
                "again, and it resumes where it stopped"
            )
        if incompatible_checkpoint(str(error)):
            return CheckpointMismatch(advice(query.name, self.lake))
        return JobFailed(f"query {query.name} failed: {first_line(error)}")

    def _recovery(
        self, query: StreamingQuery, error: BaseException, should_stop: Callable[[], bool]
    ) -> str | None:
        """Why ``query``, failed with ``error``, is to be restarted on its checkpoint
        (exactly once, as after a crash); None when its failure stops the job."""
        name = query.name
        if self._predecessor_wrote(query, error):
            self._restarts[name] = self._restarts.get(name, 0) + 1
            return PREDECESSOR
        if self._store_was_away(query, error) and self._wait_for_store(should_stop):
            self._store_restarts[name] = time.monotonic()
            return STORE_BACK
        return None

    def _predecessor_wrote(self, query: StreamingQuery, error: BaseException) -> bool:
        """Whether ``query`` failed on an entry of its checkpoint that the job this one took
        the lake from wrote as it woke from a stall (before its lease or the tables' fence
        stopped it), while this job still holds the lake: the query is then restarted on
        what the checkpoint holds (a batch planned there is run again, exactly once)."""
        lease = self.lease
        if (
            lease is None
            or lease.taken_from is None
            or not concurrent_checkpoint_update(str(error))
        ):
            return False
        if self._restarts.get(query.name, 0) >= PREDECESSOR_RESTARTS:
            return False
        with contextlib.suppress(LeaseLost, *STORAGE_ERRORS):
            lease.verify()
        return not lease.lost

    def _store_was_away(self, query: StreamingQuery, error: BaseException) -> bool:
        """Whether ``query`` failed because the lake's object store did not answer (an
        outage, a network cut), and not again right after a restart for that: the job then
        waits for the store and restarts the query on its checkpoint, exactly once."""
        if not (is_object_store(self.settings.lake) and store_unreachable(str(error))):
            return False
        restarted = self._store_restarts.get(query.name)
        return restarted is None or time.monotonic() - restarted >= STORE_RETRY_S

    def _wait_for_store(self, should_stop: Callable[[], bool]) -> bool:
        """Wait until the lake's store answers again (the lease's listing, which also says
        whether another job took the lake meanwhile); False when a stop came first.

        Raises:
            LakeTaken: another job took the lake over while the store was away.
        """
        said, began = False, time.monotonic()
        while not should_stop():
            if self.jvm_stderr is not None:
                self.jvm_stderr.drop_held()  # Spark's errors about it: this says it
            try:
                if self.lease is not None:
                    self.lease.verify()
                else:
                    storage.is_folder(self.settings.lake)
            except LeaseLost as exc:
                raise LakeTaken(str(exc)) from None
            except (*STORAGE_ERRORS, DeltaError) as exc:
                if not said and self.echo:
                    self.echo(
                        f"the lake's object store does not answer ({first_line(exc)}): "
                        "waiting for it; nothing is lost, the queries resume where they were"
                    )
                said = True
                time.sleep(STORE_POLL_S)  # the outage under way: nothing to poll but it
                continue
            if said and self.echo:
                waited = time.monotonic() - began
                self.echo(f"the lake's object store answers again after {waited:.0f} s")
            return True
        return False

    def _restart(self, query: StreamingQuery, why: str) -> None:
        name = query.name
        self.queries.remove(query)
        if self.jvm_stderr is not None:
            self.jvm_stderr.drop_held()  # Spark's error about it: handled here
        if self.echo:
            self.echo(f"query {name} {why}; restarted on its checkpoint")
        if name == INGEST:
            self._start_ingest()
        else:
            self._start_readers()

    def _wait_done(self, queries: list[StreamingQuery], should_stop: Callable[[], bool]) -> bool:
        """Wait for ``queries`` (availableNow) to finish; False when a stop came first."""
        for query in queries:
            try:
                while not query.awaitTermination(1):  # wakes up to notice a stop request
                    if should_stop():
                        return False
            except StreamingQueryException as exc:
                raise self._failure(query, exc) from None
        return True

    def flush_metrics(self) -> int:
        """Write the collected pipeline_metrics rows; returns how many. Rows the lake's
        store did not take (an outage) stay for the next flush."""
        rows = self.listener.take()
        try:
            return write_metrics(rows, self.lake.table("pipeline_metrics"))
        except (*STORAGE_ERRORS, DeltaError):
            self.listener.give_back(rows)
            return 0

    def _flush_after(self, queries: list[StreamingQuery]) -> None:
        self.listener.wait_for(executed_batches(queries))
        self.flush_metrics()

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        """Run until done (availableNow) or until ``should_stop()``; then stop every query
        between two of its micro-batches (see :meth:`stop_queries`)."""
        create_tables(self.lake)
        record_rules(self.lake.table("rule_changes"), self.ctx.rule_set, str(self.settings.rules))
        maintenance = self.maintenance
        if maintenance is not None:
            apply_properties(self.lake, maintenance.policy)
        self.spark.streams.addListener(self.listener)
        try:
            if should_stop():
                return
            self._run(should_stop, maintenance)
        except LeaseLost as exc:  # a commit found the lake taken over
            raise LakeTaken(str(exc)) from None
        finally:
            if maintenance is not None:
                maintenance.stop()
            self.stop_queries()
            self.spark.streams.removeListener(self.listener)
        line = maintenance.counts.summary() if maintenance is not None else None
        if line and self.echo:
            self.echo(line)

    def _run(self, should_stop: Callable[[], bool], maintenance: Maintenance | None) -> None:
        if self.settings.available_now:
            # The statistics read what ingest wrote: let ingest finish first.
            first = [self._start_ingest(), *self._start_realtime()]
            done = self._wait_done(first, should_stop)
            done = done and not should_stop()
            done = done and self._wait_done(self._start_readers(), should_stop)
            if done:
                self._flush_after(self.queries)
                self._catch_up_incidents()
                if maintenance is not None:
                    maintenance.run_pass(housekeeping=True)
            else:
                self._stop_on_request()
        else:
            self._start_ingest()
            self._start_realtime()
            if not should_stop():
                self._start_readers()
            if maintenance is not None:
                maintenance.start(self.settings.maintenance_interval_seconds)
            self._run_until_stopped(should_stop)

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
            if self.lease is not None and self.lease.lost:
                raise LakeTaken(self.lease.lost)
            for query in list(self.queries):
                if not query.isActive:
                    error = query.exception()
                    why = None if error is None else self._recovery(query, error, should_stop)
                    if why is not None:
                        self._restart(query, why)
                        continue
                    if should_stop():
                        break  # it came while waiting for the lake's store
                    if error is not None:
                        raise self._failure(query, error)
                    raise JobFailed(f"query {query.name} stopped without an error")
            # Wakes up at least every second to notice a stop request. A query that
            # failed meanwhile is looked at above, on the next round.
            with contextlib.suppress(StreamingQueryException):
                self.spark.streams.awaitAnyTermination(1.0)
            self.ctx.refresh_rules()  # an edit is taken up (and said) even with no data
            if self.realtime is not None:
                self.realtime.check(time.monotonic())
            self.spark.streams.resetTerminated()
            if time.monotonic() >= next_flush:
                self.flush_metrics()
                next_flush = time.monotonic() + self.settings.metrics_flush_seconds
        self._stop_on_request()

    def _stop_on_request(self) -> None:
        if self.echo and any(q.isActive for q in self.queries):
            self.echo(
                "stopping: each query stops once its running micro-batch is done "
                f"(at most {STOP_DEADLINE_S:.0f} s)"
            )
        self.stop_queries()
        for query in self.queries:
            error = query.exception()
            if error is not None:  # it failed while the others were stopping
                raise self._failure(query, error)
        self._flush_after(self.queries)

    def stop_queries(self, deadline_s: float = STOP_DEADLINE_S) -> None:
        """Stop every active query between two of its micro-batches, side by side.

        A query waiting for its next trigger is stopped at once. A query inside a batch
        is stopped when the batch's function is done, before Spark commits the batch to
        the checkpoint: Spark then commits it and ends the query (jobs.batch_gate.BatchGate).
        Only a batch still running after ``deadline_s`` is interrupted; Spark runs it again
        at the next start, and the job's writes skip what it had written (exactly once,
        docs/streaming-job.md).
        """
        if self.realtime is not None:
            self.realtime.stop()  # its tasks never end by themselves: at once
        active = [q for q in self.queries if q.isActive]
        if not active:
            return
        deadline = time.monotonic() + deadline_s
        for query in active:
            self.ctx.gate.request_stop(query.name)
        threads = [
            InheritableThread(target=self._stop_between_batches, args=(q, deadline)) for q in active
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _stop_between_batches(self, query: StreamingQuery, deadline: float) -> None:
        gate, name = self.ctx.gate, query.name
        while query.isActive:
            if time.monotonic() >= deadline:
                if self.echo:
                    self.echo(
                        f"stopping: {name}'s micro-batch still runs after {STOP_DEADLINE_S:.0f}"
                        " s; interrupting it (the next start runs it again)"
                    )
                gate.close(name, force=True)
                query.stop()
                return
            # Parked: its batch is done and waits for the stop. Idle: no batch function
            # runs and Spark is not within a trigger (about to call one).
            ready = gate.parked(name) or (
                not gate.busy(name) and not query.status["isTriggerActive"]
            )
            if ready and gate.close(name):
                query.stop()
                return
            gate.wait(STOP_POLL_S)


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


def trigger_seconds(settings: JobSettings) -> dict[str, float]:
    """Each query's trigger in seconds (none: availableNow): the micro-batch queries'
    processing time, and the real-time query's checkpoint interval, the only moment it
    reports progress."""
    if settings.available_now:
        return {}
    triggers = {
        INGEST: interval_seconds(settings.trigger),
        WINDOWS: interval_seconds(settings.readers_trigger),
    }
    if settings.realtime:
        triggers[REALTIME] = interval_seconds(settings.realtime_checkpoint_interval)
    return triggers


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
    modules is left out of its stderr (jobs.jvm_stderr.JVM_NOISE says why), and Spark's
    errors about a checkpoint entry another holder of the lake wrote are held back: the
    job says what happened in its own words (jobs/jvm_stderr.py). Returns the session and
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
