"""The real-time query as the job's main loop keeps it (jobs/driver/job.py): started, and
started again when it failed, when the registry or the reading rules changed (the
thresholds are part of its plan; its checkpoint stays valid, it keeps no state) or when
the readings topic gained partitions; stopped first and at once on a stop (its tasks
never end by themselves).

A start after an edit reads again what came since the query's last commit (up to
``realtime_checkpoint_interval``): the readings it had judged by then, by the rules in
force, are left out (those older than :data:`EDIT_MARGIN_S` before the stop), so that an
edit does not judge the past minutes again (jobs/queries/realtime.rule_messages).

Whatever happens to it, the lake path runs on: the path cannot stop the job. Before
every start the task slots are counted (one per partition, held for as long as it runs,
and one more for the lake path): too few, and it does not start, saying so once. With no
reading rule it idles, saying so once. A start that fails is said once per reason and
tried again with a growing delay.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from pyspark.sql.streaming import StreamingQuery

from common.errors import first_line
from contract.times import utc_now
from jobs.queries.context import JobContext
from jobs.queries.realtime import missing_slots, start_realtime
from jobs.realtime.topic_watch import TopicWatch

# The scheduler pool of the query (jobs/driver/job.py makes one per query): set on the thread
# that starts it, which for a restart is the main loop's.
POOL = "realtime"
# At an edit, the readings sent this long before the stop count as judged: the path
# handles each in milliseconds, and at most 1.3 s late at a batch boundary
# (docs/benchmarks.md). Those sent since are judged again, by the new rules.
EDIT_MARGIN_S = 10.0


def start_in_pool(ctx: JobContext, judged_before: datetime | None = None) -> StreamingQuery:
    """:func:`start_realtime` in the real-time path's scheduler pool."""
    ctx.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
    return start_realtime(ctx, judged_before)


def slot_shortage(slots: int, partitions: int, topic: str, master: str) -> str | None:
    """What to say when ``slots`` task slots cannot hold the path's tasks for the
    ``partitions`` partitions of ``topic`` and leave the lake path one (None: they can)."""
    if not missing_slots(slots, partitions):
        return None
    return (
        f"the real-time alert path needs a task slot for each of the {partitions} partitions "
        f"of {topic} for as long as it runs, and the lake path at least one more: {master} "
        f"offers {slots}. Give it {partitions + 1} or more (local[N]: the job adds them "
        "itself at start; a standalone worker's --cores counts slots, not CPUs), or run "
        "without the path: --realtime false"
    )


class RealtimePath:
    """The realtime query for the job's main loop (see the module's docstring)."""

    def __init__(
        self,
        ctx: JobContext,
        first_delay: float = 1.0,
        max_delay: float = 60.0,
        topics: TopicWatch | None = None,
        slots: Callable[[], int] | None = None,
        starter: Callable[[JobContext, datetime | None], StreamingQuery] = start_in_pool,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        """``topics``: the topics' watch (made at the first start when None); ``slots``:
        the cluster's task slots now (Spark's default parallelism when None);
        ``starter``: what starts the query (:func:`start_in_pool`); ``now``: the wall
        clock (tests give a simulated one)."""
        self.ctx = ctx
        self.query: StreamingQuery | None = None
        self.first_delay, self.max_delay = first_delay, max_delay
        self.topics = topics
        self._slots = slots or (lambda: ctx.spark.sparkContext.defaultParallelism)
        self._starter, self._now = starter, now
        # Readings sent before this were judged by the rules in force then (an edit's).
        self._judged_before: datetime | None = None
        self._delay = first_delay
        self._retry_at: float | None = None
        self._registry_version = -1
        self._rules_version = ""
        # Why it does not run, as last said (a reason, not a line: the delays in the
        # lines grow), so that each reason is said once; None: it runs, or nothing said.
        self._said: str | None = None
        self._short = False  # it waits for task slots
        self.restarts = 0

    def _say(self, line: str) -> None:
        if self.ctx.echo:
            self.ctx.echo(line)

    def _once(self, reason: str, line: str) -> None:
        """Say ``line`` unless ``reason`` is why the path does not run already."""
        if reason != self._said:
            self._say(line)
        self._said = reason

    def _watch(self) -> TopicWatch:
        if self.topics is None:
            settings = self.ctx.settings
            self.topics = TopicWatch(settings, self._say, settings.realtime_topic_check_seconds)
        return self.topics

    def start(self) -> StreamingQuery | None:
        """Start the query with the registry and the rules as they are now; None when it
        may not run now (no reading rule, too few task slots), which it says once.

        Raises:
            Exception: whatever starting the query raised (:meth:`check` survives it).
        """
        ctx, settings = self.ctx, self.ctx.settings
        self._registry_version = ctx.refresh_registry()
        rules = ctx.rule_set
        self._rules_version = rules.version("reading")
        self._short = False
        if not rules.of_kind("reading"):
            why = "alerting is off" if rules.off else "they have no reading rule"
            line = (
                f"realtime: rules {rules.version()}: {why}; the real-time path idles until "
                "an edit brings one (the lake path runs on)"
            )
            self._once(line, line)
            return None
        if not settings.available_now:  # an availableNow run was sized at start
            watch = self._watch()
            watch.look()
            partitions = watch.partitions()
            short = slot_shortage(self._slots(), partitions, settings.topic, settings.master)
            if short is not None:
                self._short = True
                self._once(short, f"realtime: {short}; the path stops, the lake path runs on")
                return None
        self.query = self._starter(ctx, self._judged_before)
        if self._said is not None:
            self._say("realtime: the real-time alert path runs again")
        self._said = None
        return self.query

    def begin(self, now: float, partitions: int) -> StreamingQuery | None:
        """The first start of a job that runs on (not availableNow), with the readings
        topic's ``partitions`` as the job found them; never raises (see :meth:`check`)."""
        if self.topics is None:
            settings = self.ctx.settings
            self.topics = TopicWatch(
                settings, self._say, settings.realtime_topic_check_seconds, partitions=partitions
            )
        try:
            return self.start()
        except Exception as error:  # any failure of the path: the lake path runs on
            self.query = None
            self._retry(now, "could not start", error)
            return None

    def check(self, now: float) -> None:
        """Called by the main loop about every second: start the query again where it
        failed, or where what its plan holds changed. Never raises: a failure to start is
        said once and tried again later, and the lake path runs on."""
        try:
            self._check(now)
        except Exception as error:  # any failure of the path: the lake path runs on
            self.query = None
            self._retry(now, "could not start", error)

    def _retry(self, now: float, what: str, error: BaseException | None) -> None:
        reason = first_line(error)
        self._retry_at = now + self._delay
        self._once(
            f"{what}: {reason}",
            f"realtime: the real-time alert path {what} ({reason}); the lake path runs on, "
            f"and the path tries again in {self._delay:g} s",
        )
        self._delay = min(self._delay * 2, self.max_delay)

    def _check(self, now: float) -> None:
        grown = False if self.ctx.settings.available_now else self._watch().look()
        query = self.query
        if query is not None and not query.isActive:
            self.query = None
            self._retry(now, "failed", query.exception())
            return
        registry = self.ctx.refresh_registry() != self._registry_version
        rules = self.ctx.rule_set.version("reading") != self._rules_version
        if query is None:
            due = self._retry_at is not None and now >= self._retry_at
            if due or registry or rules or grown:
                self._retry_at = None
                if due:
                    self.restarts += 1
                if self.start() is None and self._short:
                    # Executors may join a cluster: count its slots again now and then.
                    self._retry_at = now + self.max_delay
            return
        if grown or registry or rules:
            # New partitions are read from their start: none of theirs was judged.
            edit = self._now() - timedelta(seconds=EDIT_MARGIN_S)
            self._judged_before = None if grown else edit
            self.stop()
            if grown:
                what = f"the readings topic has {self._watch().partitions()} partitions now"
            else:
                what = "the registry changed" if registry else "the rules changed"
            if self.start() is not None:
                self._say(f"realtime: {what}; the real-time path uses it now")
        elif query.lastProgress is not None:
            self._delay = self.first_delay  # it made progress: a later failure starts over

    def stop(self) -> None:
        """Stop the query now (its uncommitted part is sent again at the next start)."""
        query, self.query = self.query, None
        if query is not None and query.isActive:
            query.stop()
