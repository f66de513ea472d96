"""Which rules a micro-batch runs with: the rule set in force when Spark planned it, so
that a batch replayed after a crash is judged with the rules it first ran with.

Two records make that answer the same on the first run of a batch and on any replay,
without a write of its own:

- ``rule_changes`` (jobs/alerting/rule_changes.py) holds every rule set the job took up
  and when (``changed_at``), each written before any batch could use it: at start, and by
  the rules file's ``on_change`` before an edit is taken (conf/rules_watch.py RulesFile);
- Spark writes each batch's planned time into its checkpoint (``offsets/<id>``, the
  ``batchTimestampMs`` of its second line) before the batch runs, and a replayed batch
  reads the same file.

A batch runs with the newest rule set recorded at or before its planned time. Without
this, a rule edited between a crash and the restart judged the replayed batch with the
new rules: its alerts were then skipped as written (the alerts table held that batch's
transaction) or written by other rules than those the first run started with, and than
those the real-time path had already sent.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from datetime import datetime

from deltalake.exceptions import TableNotFoundError

from contract.rules.model import RuleSet
from contract.rules.parsing import RulesError, rules_from_json
from contract.times import as_utc
from jobs.spark.checkpoints import planned_at
from lake.reader import read_path


def _utc(value: datetime) -> datetime:
    found = as_utc(value)
    assert found is not None  # changed_at is never null
    return found


@dataclass(frozen=True)
class Change:
    """One row of ``rule_changes``: a rule set taken up at ``changed_at``."""

    changed_at: datetime
    version: str
    rules: str  # the rules as JSON


class RuleHistory:
    """The rule sets of ``rule_changes``, read again only when asked to (:meth:`read`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._changes: list[Change] = []
        self._parsed: dict[str, RuleSet] = {}

    def read(self) -> None:
        """Read the table again (none yet: no history, every batch runs the current rules)."""
        try:
            rows = read_path(self.path, ["changed_at", "version", "rules"]).to_pylist()
        except TableNotFoundError:  # a lake made by another tool, a test's
            rows = []
        changes = [Change(_utc(r["changed_at"]), r["version"], r["rules"]) for r in rows]
        self._changes = sorted(changes, key=lambda change: change.changed_at)

    @property
    def newest(self) -> Change | None:
        """The newest rule set recorded."""
        return self._changes[-1] if self._changes else None

    def at(self, moment: datetime) -> RuleSet | None:
        """The rule set in force at ``moment``: the newest recorded at or before it (None:
        none was, or its rules no longer parse)."""
        index = bisect.bisect_right([c.changed_at for c in self._changes], moment)
        if index == 0:
            return None
        change = self._changes[index - 1]
        if change.version not in self._parsed:
            try:
                self._parsed[change.version] = rules_from_json(change.rules)
            except (RulesError, ValueError):
                return None  # a row this release cannot read: the current rules judge
        return self._parsed[change.version]


class BatchRules:
    """The rules of each micro-batch of the queries of one job (the ingest and windows
    queries: those that write the lake), from one :class:`RuleHistory`.

    ``planned_at`` is read for a query's first batch of this run (perhaps a replay) and
    after a change was recorded, until a batch planned after it: otherwise a batch costs
    no read at all.
    """

    def __init__(self, history: RuleHistory) -> None:
        self.history = history
        self._lock = threading.Lock()  # the queries' batches run on threads of their own
        self._read_for = -1  # the rules file's count of changes the history was read at
        self._planned: dict[str, datetime] = {}  # per checkpoint: its last batch's time

    def rules_for(self, checkpoint: str, batch_id: int, current: RuleSet, changes: int) -> RuleSet:
        """The rules batch ``batch_id`` of the query of ``checkpoint`` runs with;
        ``current``: the rules now, ``changes``: how many edits were taken up so far
        (the history is read again when that moved)."""
        with self._lock:
            if changes != self._read_for:
                self.history.read()
                self._read_for = changes
            newest = self.history.newest
            if newest is None:
                return current
            last = self._planned.get(checkpoint)
            if last is None or last < newest.changed_at:
                last = self._planned[checkpoint] = planned_at(checkpoint, batch_id)
            found = self.history.at(last)
        return current if found is None else found
