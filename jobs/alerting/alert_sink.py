"""Writing alerts: each alert_id at most once, with a cheap transactional append.

The same alert can be found again: by a replayed micro-batch, by readings of one minute
split across batches, or by a query started afresh on an old lake. So a batch finds
which of its alert ids the table already holds and appends only the others, once per
batch of its query (jobs/writer/delta_io.py: a replay writes nothing twice).

Each rule is raised by exactly one query (overheat_reading by ingest, the others by the
windows query) and alert ids include the rule, so no two writers ever race on one id:
each writer can keep its own ids in memory (AlertWriter), and the appends are blind
appends that never conflict. That is what makes this cheaper than a MERGE (one append,
instead of a join, a rewrite and retries on every concurrent write).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from pyspark.sql import Column, Row
from pyspark.sql import functions as F

from contract.times import as_utc, utc_now
from jobs.alerting.incidents import FALLBACK, RuleTraits
from jobs.writer.delta_io import BatchWriter
from lake.layout import ALERTS
from lake.reader import AllOf, AtLeast, AtMost, Condition, OneOf, read_path


def detection_moment() -> datetime:
    """One detection time for a batch's alerts: now (aware UTC)."""
    return utc_now()


def detection_time() -> Column:
    """One detection timestamp for a batch's alerts (now), as a Spark literal."""
    return F.lit(detection_moment())


def format_alert(row: Row, traits: RuleTraits = FALLBACK) -> str:
    """One readable line per alert (``traits``: its rule's, for the unit)."""
    unit = f" {traits.unit}".rstrip()
    value = (
        f"{row.observed_value:.0f} s without readings"
        if traits.absence
        else f"{row.observed_value:.1f}{unit} (threshold {row.threshold:.1f})"
    )
    return (
        f"ALERT {row.severity.upper():8} {row.rule:16} {row.sensor_id} @ {row.site} "
        f"{row.window_start:%Y-%m-%d %H:%M:%S}: {value}"
    )


def _alert_ids(path: str, where: Condition) -> dict[str, datetime]:
    """alert_id -> window_start of the alerts at ``path`` matching ``where``, read with
    delta-rs: the window_start bounds skip other times' files by their statistics, and no
    Spark job runs before the batch's alerts are written."""
    found = read_path(path, ["alert_id", "window_start"], where).to_pylist()
    return {row["alert_id"]: as_utc(row["window_start"]) for row in found}


def existing_ids(path: str, found: list[Row]) -> set[str]:
    """Which of the ``found`` alerts' ids the table at ``path`` already holds."""
    starts = [row.window_start for row in found]
    where = AllOf(
        [
            AtLeast("window_start", min(starts)),
            AtMost("window_start", max(starts)),
            OneOf("alert_id", tuple(row.alert_id for row in found)),
        ]
    )
    return set(_alert_ids(path, where))


class AlertWriter:
    """Writes one query's alerts (the rules only that query raises) to the alerts table.

    Which of a batch's alerts are new is answered from memory: the writer keeps the ids
    of its rules whose window_start lies within ``span`` of the newest it has seen, read
    from the table once, at its first batch with alerts, and kept current by its own
    writes (no other query writes these rules, so nothing else can add them). Only an
    alert older than that (a very late reading) costs a lookup in the table.
    """

    def __init__(
        self,
        writer: BatchWriter,
        rules: Sequence[str],
        span: timedelta = timedelta(hours=6),
        traits: Callable[[], Mapping[str, RuleTraits]] | None = None,
    ) -> None:
        """``traits``: the rules' traits, for the units of the lines it echoes."""
        self.writer, self.rules, self.span, self.traits = writer, tuple(rules), span, traits
        self.path = writer.lake.table(ALERTS)
        self._ids: dict[str, datetime] = {}  # alert_id -> window_start
        # Every id of these rules in the table with window_start >= _since is in _ids.
        self._since: datetime | None = None

    def _load(self, since: datetime) -> None:
        where = AllOf([OneOf("rule", self.rules), AtLeast("window_start", since)])
        self._ids = _alert_ids(self.path, where)
        self._since = since

    def known(self, found: list[Row]) -> set[str]:
        """Which of the ``found`` alerts' ids the table already holds."""
        if self._since is None:
            self._load(min(row.window_start for row in found) - self.span)
        assert self._since is not None
        hits = {row.alert_id for row in found if row.alert_id in self._ids}
        older = [row for row in found if row.window_start < self._since]
        if older:
            hits |= existing_ids(self.path, older)
        return hits

    def _remember(self, rows: list[Row]) -> None:
        assert self._since is not None
        for row in rows:
            if row.window_start >= self._since:
                self._ids[row.alert_id] = row.window_start
        cutoff = max(self._ids.values(), default=self._since) - self.span
        if cutoff > self._since:
            self._ids = {k: v for k, v in self._ids.items() if v >= cutoff}
            self._since = cutoff

    def write(
        self,
        found: list[Row],
        batch_id: int,
        echo: Callable[[str], None] | None = None,
        first_reading_at: Mapping[tuple[str, str, datetime], datetime] | None = None,
    ) -> list[Row]:
        """Append the ``found`` alerts (ALERTS rows) whose id is not in the table yet, once
        per batch of the writer's query; echo and return the ones that were new.
        ``first_reading_at``: when the reading that raised an alert reached Kafka, by
        rule, sensor and window start, for the alert latency (jobs/metrics.py)."""
        if not found:
            return []
        added = {row.rule for row in found} - set(self.rules)
        if added:  # a rule added to the rules file while running: its ids are read too
            self.rules = (*self.rules, *sorted(added))
            self._since = None
        known = self.known(found)
        new = [row for row in found if row.alert_id not in known]
        if not new:
            return []
        if not self.writer.append_rows(new, self.path, batch_id):
            return []  # a replayed batch whose alerts the table holds already
        self._remember(new)
        if self.writer.metrics is not None:
            self.writer.metrics.raised(new, first_reading_at, utc_now())
        if echo:
            traits = self.traits() if self.traits is not None else {}
            for row in sorted(new, key=lambda r: (r.window_start, r.sensor_id)):
                echo(format_alert(row, traits.get(row.rule, FALLBACK)))
        return new
