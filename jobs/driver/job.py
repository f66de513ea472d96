"""The running job: its queries started, watched, restarted when a failure is one the job
handles (jobs/driver/recovery.py decides), and stopped between two micro-batches;
pipeline_metrics written from their progress (docs/streaming-job.md)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from deltalake.exceptions import DeltaError
from pyspark import InheritableThread
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from common.waiting import poll_until
from conf.rules_watch import RulesFile
from conf.settings.job import JobSettings
from contract.times import interval_seconds
from jobs.alerting.incident_sink import IncidentWriter
from jobs.alerting.rule_changes import record_rules
from jobs.driver.recovery import JobFailed, LakeTaken, Recovery
from jobs.metrics import JobMetrics
from jobs.queries.context import JobContext
from jobs.queries.ingest import QUERY as INGEST
from jobs.queries.ingest import start_ingest
from jobs.queries.realtime import QUERY as REALTIME
from jobs.queries.realtime import missing_slots
from jobs.queries.registry_cache import RegistryCache
from jobs.queries.windows import QUERY as WINDOWS
from jobs.queries.windows import start_windows
from jobs.realtime.path import RealtimePath
from jobs.spark.checkpoints import (
    delta_source_version,
    latest_watermark,
)
from jobs.spark.jvm_stderr import JvmStderr
from jobs.writer.maintenance import Maintenance, Policy, StreamGuard, apply_properties
from jobs.writer.pipeline_metrics import MetricsListener, executed_batches, write_metrics
from jobs.writer.tables import create_tables
from lake.layout import PANES, PIPELINE_METRICS, RULE_CHANGES, Lake
from lake.lease import LakeLease, LeaseLost
from lake.storage import STORAGE_ERRORS

# On a stop request each query stops once its running micro-batch is done; one still
# running after this long is interrupted (docker-compose.yml gives the job 60 s).
STOP_DEADLINE_S = 30.0
# How long the executors of a cluster have to register before the real-time path counts
# their task slots.
SLOTS_WAIT_S = 60.0
# How often a stopping query's state is looked at while no batch of it ends.
STOP_POLL_S = 0.1


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
        process started the JVM (jobs/spark/jvm_stderr.py)."""
        self.spark = spark
        self.lease = lease
        self.jvm_stderr = jvm_stderr
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
        changes = self.lake.table(RULE_CHANGES)
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
        self.recovery = Recovery(settings, self.lake, lease, jvm_stderr, echo)

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
                raise self.recovery.failure(query.name, exc) from None
        return True

    def flush_metrics(self) -> int:
        """Write the collected pipeline_metrics rows; returns how many. Rows the lake's
        store did not take (an outage) stay for the next flush."""
        rows = self.listener.take()
        try:
            return write_metrics(rows, self.lake.table(PIPELINE_METRICS))
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
        record_rules(self.lake.table(RULE_CHANGES), self.ctx.rule_set, str(self.settings.rules))
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
        self.incidents.catch_up(clock, self.lake.table(PANES))

    def _run_until_stopped(self, should_stop: Callable[[], bool]) -> None:
        next_flush = time.monotonic() + self.settings.metrics_flush_seconds
        while not should_stop():
            if self.lease is not None and self.lease.lost:
                raise LakeTaken(self.lease.lost)
            for query in list(self.queries):
                if not query.isActive:
                    error = query.exception()
                    why = (
                        None
                        if error is None
                        else self.recovery.restart_reason(query.name, error, should_stop)
                    )
                    if why is not None:
                        self._restart(query, why)
                        continue
                    if should_stop():
                        break  # it came while waiting for the lake's store
                    if error is not None:
                        raise self.recovery.failure(query.name, error)
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
                raise self.recovery.failure(query.name, error)
        self._flush_after(self.queries)

    def stop_queries(self, deadline_s: float = STOP_DEADLINE_S) -> None:
        """Stop every active query between two of its micro-batches, side by side.

        A query waiting for its next trigger is stopped at once. A query inside a batch
        is stopped when the batch's function is done, before Spark commits the batch to
        the checkpoint: Spark then commits it and ends the query (jobs.spark.batch_gate.BatchGate).
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
