"""The alerts and incidents tables as the ops view sees them: filters, order, records.

Alerts newest first, one record per alert; incidents firing first, then the recently
resolved ones, one record per incident. Pure functions over a
:class:`~lake.reader.LakeReader`; the command line (``ops.alerts_cli``) and the dashboard
(``ops.dashboard``) both use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from contract.alerts import FIRING, RESOLVED, RULES, SEVERITIES, SILENT, UNREGISTERED
from contract.rules.model import RuleSet
from contract.times import as_utc, iso, utc_now
from lake.layout import ALERTS, INCIDENTS
from lake.reader import AllOf, AnyOf, AtLeast, Condition, LakeReader, OneOf

COLUMNS = [
    "alert_id",
    "sensor_id",
    "site",
    "rule",
    "severity",
    "window_start",
    "window_end",
    "observed_value",
    "threshold",
    "readings",
    "detected_at",
]
# Newest first; alerts of one micro-batch share detected_at, so the rest keeps it stable.
NEWEST_FIRST = [
    ("detected_at", "descending"),
    ("window_start", "descending"),
    ("sensor_id", "ascending"),
    ("rule", "ascending"),
]


@dataclass(frozen=True)
class AlertFilter:
    """Which alerts to show; an empty tuple means any value."""

    since: datetime | None = None
    sensors: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()

    def condition(self) -> AllOf:
        """The filter on the alerts table, as SQL: files whose statistics rule it out
        (all older than ``since``, say) are not read."""
        since = [] if self.since is None else [AtLeast("detected_at", self.since)]
        return AllOf([*since, *self.labels()])

    def labels(self) -> list[Condition]:
        """The conditions on sensor, site, severity and rule (columns both tables have)."""
        return [
            OneOf(column, chosen)
            for column, chosen in (
                ("sensor_id", self.sensors),
                ("site", self.sites),
                ("severity", self.severities),
                ("rule", self.rules),
            )
            if chosen
        ]


@dataclass(frozen=True)
class AlertRows:
    """Result of a query: whether the table exists, how many matched, the rows shown."""

    exists: bool
    total: int
    rows: list[dict[str, Any]]


def read_alerts(reader: LakeReader, where: AlertFilter = AlertFilter()) -> pa.Table | None:
    """Matching alerts, newest first, as an Arrow table; None when the table does not exist."""
    table = reader.read(ALERTS, COLUMNS, where.condition())
    return None if table is None else table.sort_by(NEWEST_FIRST)


def query_alerts(
    reader: LakeReader, where: AlertFilter = AlertFilter(), limit: int | None = None
) -> AlertRows:
    """The newest ``limit`` matching alerts (all when None) as plain dicts."""
    table = read_alerts(reader, where)
    if table is None:
        return AlertRows(exists=False, total=0, rows=[])
    shown = table if limit is None else table.slice(0, limit)
    return AlertRows(exists=True, total=table.num_rows, rows=shown.to_pylist())


def new_alerts(table: pa.Table, seen: set[str]) -> pa.Table:
    """The rows of ``table`` whose alert_id is not in ``seen``, oldest first (for --follow)."""
    if seen:
        known = pc.is_in(table.column("alert_id"), value_set=pa.array(list(seen), pa.string()))
        table = table.filter(pc.invert(known))
    return table.sort_by([(column, "ascending") for column, _ in NEWEST_FIRST])


def alert_record(row: dict[str, Any]) -> dict[str, Any]:
    """An alert as a JSON-ready dict: every column, timestamps in ISO-8601 UTC."""
    return {
        column: iso(row[column]) if isinstance(row[column], datetime) else row[column]
        for column in COLUMNS
    }


def unit_of(rule: str, units: Mapping[str, str] | None = None) -> str:
    """The unit of a rule's values: from ``units`` (contract.rules.model.RuleSet.units), else
    those of the three original rules (seconds for sensor_silent, else °C)."""
    if units is not None and rule in units:
        return units[rule]
    return "s" if rule == SILENT else "°C"


def _decimals(unit: str) -> int:
    """Decimals a value in ``unit`` is shown with: a rate rule's change per minute is
    small (0.15 °C/min would show as 0.1), everything else to a tenth."""
    return 2 if unit.endswith("/min") else 1


def describe_value(row: dict[str, Any], units: Mapping[str, str] | None = None) -> str:
    """The observation in words: the value against the threshold, or seconds of silence."""
    unit = unit_of(row["rule"], units)
    if unit == "s":
        return f"{row['observed_value']:.0f} s silent"
    digits = _decimals(unit)
    value = f"{row['observed_value']:.{digits}f} {unit}".rstrip()
    return f"{value} vs {row['threshold']:.{digits}f}"


def values(items: Iterable[str]) -> tuple[str, ...]:
    """Values of a repeatable, comma-separated flag, flattened and without blanks."""
    return tuple(v.strip() for item in items for v in item.split(",") if v.strip())


# --- incidents -----------------------------------------------------------------------

INCIDENT_COLUMNS = [
    "incident_id",
    "sensor_id",
    "site",
    "rule",
    "severity",
    "status",
    "started_at",
    "last_seen_at",
    "resolved_at",
    "peak_value",
    "threshold",
    "alert_count",
    "created_at",
    "updated_at",
]
# Resolved incidents are shown this long after their last change (updated_at), unless a
# --since (or the dashboard's since) says otherwise; firing ones are always shown.
RESOLVED_LOOKBACK = timedelta(hours=24)
# Firing: critical first ("critical" < "warning"), then the newest; resolved: the most
# recently resolved first.
FIRING_ORDER = [
    ("severity", "ascending"),
    ("started_at", "descending"),
    ("sensor_id", "ascending"),
    ("rule", "ascending"),
]
RESOLVED_ORDER = [
    ("resolved_at", "descending"),
    ("started_at", "descending"),
    ("sensor_id", "ascending"),
    ("rule", "ascending"),
]


def incident_condition(where: AlertFilter, resolved_since: datetime) -> AllOf:
    """Incidents matching ``where``'s labels that are firing, or changed (updated_at, the
    job's wall clock) at or after ``resolved_since``."""
    recent = AnyOf([OneOf("status", (FIRING,)), AtLeast("updated_at", resolved_since)])
    return AllOf([recent, *where.labels()])


@dataclass(frozen=True)
class IncidentRows:
    """Result of a query: whether the table exists, the counts, the rows shown (firing
    first, then resolved)."""

    exists: bool
    firing: int
    resolved: int
    rows: list[dict[str, Any]]
    firing_by_severity: dict[str, int]
    firing_by_rule: dict[str, int]

    @property
    def total(self) -> int:
        """Incidents matched (shown or cut by the limit)."""
        return self.firing + self.resolved


def read_incidents(
    reader: LakeReader, where: AlertFilter, resolved_since: datetime
) -> pa.Table | None:
    """Matching incidents, firing first, then the resolved ones; None when the table does
    not exist. ``where.since`` is not used: ``resolved_since`` is its counterpart."""
    table = reader.read(INCIDENTS, INCIDENT_COLUMNS, incident_condition(where, resolved_since))
    if table is None:
        return None
    firing = pc.fill_null(pc.equal(table.column("status"), FIRING), False)
    return pa.concat_tables(
        [
            table.filter(firing).sort_by(FIRING_ORDER),
            table.filter(pc.invert(firing)).sort_by(RESOLVED_ORDER),
        ]
    )


def query_incidents(
    reader: LakeReader,
    where: AlertFilter = AlertFilter(),
    resolved_since: datetime | None = None,
    limit: int | None = None,
) -> IncidentRows:
    """Firing incidents and those resolved since ``resolved_since`` (default: the
    last :data:`RESOLVED_LOOKBACK`), the first ``limit`` (all when None) as plain dicts."""
    if resolved_since is None:
        resolved_since = utc_now() - RESOLVED_LOOKBACK
    table = read_incidents(reader, where, resolved_since)
    if table is None:
        return IncidentRows(False, 0, 0, [], dict.fromkeys(SEVERITIES, 0), dict.fromkeys(RULES, 0))
    statuses = table.column("status").to_pylist()
    firing_rows = table.slice(0, statuses.count(FIRING))
    by_severity = dict.fromkeys(SEVERITIES, 0)
    by_rule = dict.fromkeys(RULES, 0)
    for severity, rule in zip(
        firing_rows.column("severity").to_pylist(),
        firing_rows.column("rule").to_pylist(),
        strict=True,
    ):
        by_severity[severity] = by_severity.get(severity, 0) + 1
        by_rule[rule] = by_rule.get(rule, 0) + 1
    shown = table if limit is None else table.slice(0, limit)
    return IncidentRows(
        exists=True,
        firing=firing_rows.num_rows,
        resolved=table.num_rows - firing_rows.num_rows,
        rows=shown.to_pylist(),
        firing_by_severity=by_severity,
        firing_by_rule=by_rule,
    )


def incident_duration(row: dict[str, Any]) -> float | None:
    """Seconds of event time: started_at to resolved_at once resolved; while firing, to
    the newest alert's event time (last_seen_at)."""
    started = as_utc(row["started_at"])
    end = as_utc(row["resolved_at"] if row["status"] == RESOLVED else row["last_seen_at"])
    if started is None or end is None:
        return None
    return max(0.0, (end - started).total_seconds())


def incident_record(row: dict[str, Any]) -> dict[str, Any]:
    """An incident as a JSON-ready dict: every column (timestamps in ISO-8601 UTC) and
    its duration in seconds."""
    record = {
        column: iso(row[column]) if isinstance(row[column], datetime) else row[column]
        for column in INCIDENT_COLUMNS
    }
    record["duration_seconds"] = incident_duration(row)
    return record


def describe_duration(seconds: float | None) -> str:
    """``45s``, ``12m``, ``3m20s``, ``2h05m``, ``3d4h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    return f"{secs}s"


def describe_peak(row: dict[str, Any], column: str, units: Mapping[str, str] | None = None) -> str:
    """An incident's peak_value or threshold with its rule's unit (:func:`unit_of`)."""
    value = row[column]
    if value is None:
        return "-"
    unit = unit_of(row["rule"], units)
    return f"{value:.0f} s" if unit == "s" else f"{value:.{_decimals(unit)}f} {unit}".rstrip()


def rule_annotations(
    row: dict[str, Any],
    rules: RuleSet | None,
    value_column: str,
    start: datetime | None,
    end: datetime | None,
) -> dict[str, str]:
    """The annotations the rules file gives the row's rule (summary, description,
    runbook_url), placeholders filled in from the row; none when the rule is not there."""
    rule = None if rules is None else rules.by_name().get(row["rule"])
    if rule is None:
        return {}
    units = rules.units() if rules is not None else None
    return rule.annotations(
        {
            "sensor_id": row["sensor_id"],
            "site": row["site"] or UNREGISTERED,
            "value": describe_peak(row, value_column, units),
            "threshold": describe_peak(row, "threshold", units),
            "field": getattr(rule, "field", None) or "",
            "window_start": iso(start) or "",
            "window_end": iso(end) or "",
        }
    )
