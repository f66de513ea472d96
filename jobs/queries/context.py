"""What every query of the job shares: session, settings, lake, registry, output."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from conf.rules_watch import RulesFile
from conf.settings.job import JobSettings
from contract.registry import Entry
from contract.rules.model import RuleSet
from jobs.alerting.incident_sink import IncidentWriter
from jobs.alerting.incidents import RuleTraits, rule_traits
from jobs.alerting.reading_rules import CompiledRule, compile_rules
from jobs.alerting.rule_history import BatchRules, RuleHistory
from jobs.alerting.window_rules import RuleFrames
from jobs.metrics import JobMetrics
from jobs.queries.registry_cache import RegistryCache
from jobs.spark.batch_gate import BatchFunction, BatchGate
from jobs.spark.checkpoints import clear_unfinished_start
from lake.layout import RULE_CHANGES, Lake


@dataclass
class JobContext:
    """Shared by the queries' micro-batch functions, which run on different threads."""

    spark: SparkSession
    settings: JobSettings
    lake: Lake
    registry_cache: RegistryCache
    echo: Callable[[str], None] | None = None
    incidents: IncidentWriter | None = None  # None: the incidents table is not kept
    metrics: JobMetrics | None = None  # the job's Prometheus metrics (jobs/metrics.py)
    rules_file: RulesFile | None = None  # None: the rules read at start, never re-read
    gate: BatchGate = field(default_factory=BatchGate)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _frames: tuple[tuple[str, int], RuleFrames] | None = None
    _compiled: tuple[tuple[str, int], tuple[CompiledRule, ...], object] | None = None
    # The rules of the micro-batch running on this thread (see foreach_batch).
    _batch: threading.local = field(default_factory=threading.local)
    _batch_rules: BatchRules | None = None

    def __post_init__(self) -> None:
        self._batch_rules = BatchRules(RuleHistory(self.lake.table(RULE_CHANGES)))

    def foreach_batch(self, query: str, write: BatchFunction) -> BatchFunction:
        """``write`` as ``query``'s foreachBatch function: run with the rules in force
        when Spark planned the batch, the same on a replay (jobs/alerting/rule_history.py),
        and so that the job can stop the query between micro-batches (see BatchGate)."""
        checkpoint = self.lake.checkpoint(query)

        def judged(df: DataFrame, batch_id: int) -> None:
            self._batch.rules = self._rules_of_batch(query, checkpoint, batch_id)
            try:
                write(df, batch_id)
            finally:
                self._batch.rules = None

        return self.gate.wrap(query, judged)

    def _rules_of_batch(self, query: str, checkpoint: str, batch_id: int) -> RuleSet:
        current = self.rule_set
        changes = self.rules_file.changes if self.rules_file is not None else 0
        assert self._batch_rules is not None  # made in __post_init__
        rules = self._batch_rules.rules_for(checkpoint, batch_id, current, changes)
        if rules is not current and rules.version() != current.version() and self.echo:
            self.echo(
                f"{query}: batch {batch_id} runs with rules {rules.version()}, in force when "
                f"it was planned (now {current.version()}): a replay is judged as it first ran"
            )
        return rules

    def checkpoint(self, query: str) -> str:
        """Where ``query`` keeps its checkpoint, cleared first of what a kill left behind
        before its first batch was planned (see clear_unfinished_start)."""
        location = self.lake.checkpoint(query)
        removed = clear_unfinished_start(location)
        if removed and self.echo:
            self.echo(
                f"checkpoint of {query}: removed {', '.join(sorted(removed))}, left by a stop "
                "before its first batch was planned"
            )
        return location

    @property
    def rule_set(self) -> RuleSet:
        """The alert rules the job runs with now (an edit of the file is picked up); in a
        micro-batch of the lake path, the rules of that batch (see foreach_batch)."""
        pinned = getattr(self._batch, "rules", None)
        if pinned is not None:
            return pinned
        if self.rules_file is None:
            return self.settings.alert_rules
        with self._lock:
            return self.rules_file.current()

    def refresh_rules(self) -> str:
        """Look at the rules file (if it is time to); returns the running rules' version."""
        return self.rule_set.version()

    def rule_traits(self) -> dict[str, RuleTraits]:
        """What incidents need to know of each rule (jobs/alerting/incidents.py)."""
        return rule_traits(self.rule_set)

    def rule_names(self, *kinds: str) -> tuple[str, ...]:
        """The names of the rules of these kinds."""
        return tuple(rule.name for rule in self.rule_set.of_kind(*kinds))

    def reading_rules(self, sensors: Mapping[str, Entry]) -> tuple[CompiledRule, ...]:
        """The reading rules with each sensor's threshold (jobs/alerting/reading_rules.py), compiled
        again only when the reading rules or the sensors changed (not per batch)."""
        rule_set = self.rule_set
        # The registry's dict is the same object until its file changes; kept here, so
        # its id cannot be another's.
        key = (rule_set.version("reading"), id(sensors))
        with self._lock:
            if self._compiled is None or self._compiled[0] != key:
                compiled = compile_rules(rule_set.of_kind("reading"), sensors)
                self._compiled = (key, compiled, sensors)
            return self._compiled[1]

    def window_rules(self) -> RuleFrames:
        """The window, stuck and absence rules as data (jobs/alerting/window_rules.py), made again
        when the rules or the registry (as last read, :meth:`registry`) changed."""
        rules = self.rule_set
        with self._lock:
            key = (rules.version(), self.registry_cache.file.version)
            if self._frames is None or self._frames[0] != key:
                frames = RuleFrames.of(self.spark, rules, self.registry_cache.sensors())
                self._frames = (key, frames)
            return self._frames[1]

    def registry(self) -> DataFrame:
        """The device registry for this micro-batch (re-read if its file changed)."""
        with self._lock:
            return self.registry_cache.current()

    def refresh_registry(self) -> int:
        """Read the registry file again if it changed; returns its entries' version."""
        with self._lock:
            return self.registry_cache.refresh()

    def registry_frame(self) -> DataFrame:
        """The registry as last read (a small local DataFrame), counting no batch."""
        with self._lock:
            return self.registry_cache.frame()

    def sensors(self) -> dict[str, Entry]:
        """The registry for this micro-batch as a dict by sensor_id (re-read if its file
        changed; empty without a registry)."""
        with self._lock:
            self.registry_cache.current()
            return self.registry_cache.sensors()

    def trigger(self, readers: bool = False) -> dict[str, object]:
        """writeStream.trigger() arguments: ingest's, or (``readers``) those of the queries
        that read the readings table."""
        if self.settings.available_now:
            return {"availableNow": True}
        if readers:
            return {"processingTime": self.settings.readers_trigger}
        return {"processingTime": self.settings.trigger}
