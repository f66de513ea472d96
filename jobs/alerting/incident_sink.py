"""Keeping the incidents table in step with the alerts table (jobs/alerting/incidents.py decides).

Both queries call :meth:`IncidentWriter.update` after writing their alerts: ingest with
the reading rules' alerts of its batch (an incident opens within the batch that brings
the first breaching reading), the windows query with its window, stuck and absence rules'
alerts and its watermark, the event-time clock that resolves episodes. Each update reads
what it needs with delta-rs (the keys concerned, from their oldest open incident or new
alert on; file statistics skip the rest), recomputes those episodes and upserts the rows
that changed, keyed by incident_id. A replayed batch computes the same rows and writes
nothing, so the table is exactly once by construction, without transaction marks.

Updates from the two queries' threads take turns (one lock): each one's read and write
must not interleave with the other's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from contract.alerts import FIRING
from contract.times import as_utc
from jobs.alerting.incidents import FALLBACK, Evidence, Incident, RuleTraits, reconcile
from jobs.metrics import JobMetrics
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.delta_io import committing
from jobs.writer.tables import INCIDENTS_SCHEMA
from lake import layout
from lake.layout import ALERTS, Lake
from lake.reader import After, AllOf, AnyOf, AtLeast, Condition, OneOf, newest, read_path
from lake.storage import delta_table

# A catch-up re-reads the alerts detected this long before the table's last change: it
# covers clocks of the micro-batches' writers that differ a little, and costs a re-read.
CATCH_UP_MARGIN = timedelta(minutes=10)

# The alerts columns an incident needs: Evidence's fields.
EVIDENCE_COLUMNS = [f.name for f in fields(Evidence)]


def _in(column: str, values: Iterable[str]) -> OneOf:
    return OneOf(column, tuple(sorted(set(values))))


class IncidentWriter:
    """Upserts the incidents of the alerts the job raises (thread-safe)."""

    def __init__(
        self,
        lake: Lake,
        traits: Callable[[], Mapping[str, RuleTraits]],
        echo: Callable[[str], None] | None = None,
        metrics: JobMetrics | None = None,
    ) -> None:
        """``traits``: the rules' traits as the job runs them now (jobs/alerting/incidents.py)."""
        self.traits, self.echo, self.metrics = traits, echo, metrics
        # The last MERGE's metrics (delta-rs): files scanned and skipped, rows written.
        self.last_merge: dict[str, Any] = {}
        self.incidents_path = lake.table(layout.INCIDENTS)
        self.alerts_path = lake.table(ALERTS)
        self._lock = threading.Lock()

    def _written(self, where: Condition) -> list[Incident]:
        return [Incident(**row) for row in read_path(self.incidents_path, where=where).to_pylist()]

    def _alerts(self, keys: set[tuple[str, str]], since: datetime) -> list[Evidence]:
        where = AllOf(
            [
                _in("sensor_id", (s for s, _ in keys)),
                _in("rule", (r for _, r in keys)),
                AtLeast("window_start", since),
            ]
        )
        rows = read_path(self.alerts_path, EVIDENCE_COLUMNS, where).to_pylist()
        return [Evidence(**row) for row in rows if (row["sensor_id"], row["rule"]) in keys]

    def catch_up(self, watermark: datetime | None, panes_path: str) -> list[Incident]:
        """Bring the incidents up to date in one pass: the alerts detected since shortly
        before the table's last change, every firing incident, ``watermark`` (aware
        UTC) as the clock, and the panes table for where silences ended.

        An availableNow run makes this its only update, once every query is done, so an
        episode that opens and ends within the run is written once, already resolved
        (``created_at == updated_at``: the notifier then still shows it firing briefly).
        Alerts of a run that died before their incidents were written are caught up too.
        """
        since = self._last_change()
        where = None if since is None else AtLeast("detected_at", since - CATCH_UP_MARGIN)
        rows = read_path(self.alerts_path, ["sensor_id", "rule", "window_start"], where)
        found = [(r["sensor_id"], r["rule"], r["window_start"]) for r in rows.to_pylist()]
        silent = self.silent_sensors(found)
        readings: dict[str, list[datetime]] = {}
        if silent:
            where = _in("sensor_id", silent)
            panes = read_path(panes_path, ["sensor_id", "first_reading_at"], where).to_pylist()
            readings = silence_readings((p["sensor_id"], p["first_reading_at"]) for p in panes)
        return self.update(found, watermark, readings)

    def _last_change(self) -> datetime | None:
        # From the log's statistics (to the millisecond: far inside the catch-up margin).
        return newest(delta_table(self.incidents_path), "updated_at")

    def firing(self, *rules: str) -> list[Incident]:
        """The firing incidents of ``rules``."""
        return self._written(AllOf([OneOf("status", (FIRING,)), OneOf("rule", rules)]))

    def silent_sensors(self, found: Iterable[tuple[str, str, datetime]]) -> set[str]:
        """The sensors whose silences may end now: those of the absence rules' alerts in
        ``found`` (sensor_id, rule, window_start) and of their firing incidents."""
        absent = {name for name, t in self.traits().items() if t.absence}
        silent = {sensor_id for sensor_id, rule, _ in found if rule in absent}
        if absent:
            silent |= {i.sensor_id for i in self.firing(*sorted(absent))}
        return silent

    def update(
        self,
        found: Sequence[tuple[str, str, datetime]],
        watermark: datetime | None = None,
        readings: Mapping[str, Sequence[datetime]] | None = None,
    ) -> list[Incident]:
        """Bring the incidents up to date after a batch wrote its alerts.

        Args:
            found: (sensor_id, rule, window_start) of every alert the batch found, new or
                already written (a replay must give the same as the first run).
            watermark: the windows query's watermark after the batch (UTC): resolves
                episodes by the clock and considers every firing incident. None (ingest):
                only the keys of ``found``.
            readings: for sensor_silent, reading times per sensor after their silences.

        Returns:
            the incidents written (new or changed).
        """
        starts: dict[tuple[str, str], datetime] = {}
        for sensor_id, rule, start in found:
            key, start = (sensor_id, rule), as_utc(start)
            starts[key] = min(start, starts.get(key, start))
        if not starts and watermark is None:
            return []
        with self._lock:
            written = self._concerned(starts, clock=watermark is not None)
            for incident in written:
                key = incident.key
                starts[key] = min(incident.started_at, starts.get(key, incident.started_at))
            if not starts:
                return []
            alerts = self._alerts(set(starts), min(starts.values()))
            clock = None if watermark is None else as_utc(watermark)
            traits = self.traits()
            changed = reconcile(written, alerts, traits, clock, readings)
            self._upsert(changed)
        if self.echo:
            before = {i.incident_id: i.status for i in written}
            for incident in changed:
                if before.get(incident.incident_id) != incident.status:
                    self.echo(format_incident(incident, traits.get(incident.rule, FALLBACK)))
        return changed

    def _concerned(self, starts: Mapping[tuple[str, str], datetime], clock: bool) -> list[Incident]:
        """Incidents that alerts from ``starts`` on may change: the keys' firing ones and
        those ending after the earliest start; with ``clock``, every firing incident."""
        firing = OneOf("status", (FIRING,))
        where: Condition | None = None
        if starts:
            where = AllOf(
                [
                    _in("sensor_id", (s for s, _ in starts)),
                    _in("rule", (r for _, r in starts)),
                    AnyOf([firing, After("resolved_at", min(starts.values()))]),
                ]
            )
        if clock:
            where = firing if where is None else AnyOf([where, firing])
        assert where is not None
        return [
            i for i in self._written(where) if i.key in starts or (clock and i.status == FIRING)
        ]

    def _upsert(self, incidents: Sequence[Incident]) -> None:
        if not incidents:
            return
        schema = arrow_schema(INCIDENTS_SCHEMA)
        rows = pa.Table.from_pylist([vars(i) for i in incidents], schema)
        # An incident keeps its started_at (its id is made of it): a stored row that one of
        # these can match started no earlier than the earliest of them. Said as a literal,
        # it lets the MERGE skip every data file of older episodes by its statistics, so
        # its cost follows the open episodes, not the table's age.
        first = min(as_utc(i.started_at) for i in incidents)
        condition = f"t.incident_id = s.incident_id AND t.started_at >= '{first.isoformat()}'"
        # The table's lock: a compaction (jobs/writer/maintenance.py) must not replace the files
        # this MERGE reads while it runs.
        started = time.perf_counter()
        with committing(self.incidents_path) as commit:
            self.last_merge = (
                commit.table.merge(
                    rows,
                    condition,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=commit.properties(),
                )
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        if self.metrics is not None:
            self.metrics.committed(layout.INCIDENTS, time.perf_counter() - started)


def format_incident(incident: Incident, traits: RuleTraits = FALLBACK) -> str:
    """One readable line when an incident opens or resolves (``traits``: its rule's)."""
    unit = " s silent" if traits.absence else f" {traits.unit}".rstrip()
    if incident.status == FIRING:
        what = f"since {incident.started_at:%Y-%m-%d %H:%M:%S}"
    else:
        assert incident.resolved_at is not None
        what = (
            f"{incident.started_at:%Y-%m-%d %H:%M:%S} -> {incident.resolved_at:%H:%M:%S}, "
            f"{incident.alert_count} alert(s)"
        )
    return (
        f"INCIDENT {incident.status.upper():8} {incident.rule:16} {incident.sensor_id} @ "
        f"{incident.site} {what}, peak {incident.peak_value:.1f}{unit}"
    )


def silence_readings(panes: Iterable[tuple[str, datetime]]) -> dict[str, list[datetime]]:
    """(sensor_id, first reading of a pane) pairs as reading times per sensor (UTC)."""
    found: dict[str, list[datetime]] = {}
    for sensor_id, first in panes:
        found.setdefault(sensor_id, []).append(as_utc(first))
    return found
