"""The alerts table as the ops view sees it: filters, newest first, one record per alert.

Pure functions over a :class:`~ops.lake.LakeReader`; the command line (``ops.alerts_cli``)
and the dashboard (``ops.dashboard``) both use them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ops.lake import ALERTS, LakeReader, iso, timestamp_at_least

SEVERITIES = ("critical", "warning")
RULES = ("overheat_reading", "sustained_high", "sensor_silent")
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

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``1h``, ``30m``, ``2d``, ``90s`` (that long before ``now``) or an ISO-8601 timestamp
    (without a zone: UTC), as an aware UTC datetime.

    Raises:
        ValueError: neither form.
    """
    match = _DURATION.match(text)
    if match:
        amount, unit = match.groups()
        return (now or datetime.now(UTC)) - timedelta(**{_UNIT[unit]: float(amount)})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a duration such as 90s, 30m, 1h, 2d or an ISO-8601 timestamp, got {text!r}"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass(frozen=True)
class AlertFilter:
    """Which alerts to show; an empty tuple means any value."""

    since: datetime | None = None
    sensors: tuple[str, ...] = ()
    sites: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()

    def where(self, data: pa.Table) -> pa.ChunkedArray | pa.Array:
        """The filter as a boolean mask over rows of the alerts table."""
        mask: pa.ChunkedArray | pa.Array = pa.array([True] * data.num_rows)
        if self.since is not None:
            mask = pc.and_(mask, timestamp_at_least("detected_at", self.since)(data))
        for column, values in (
            ("sensor_id", self.sensors),
            ("site", self.sites),
            ("severity", self.severities),
            ("rule", self.rules),
        ):
            if values:
                chosen = pc.is_in(data.column(column), value_set=pa.array(values, pa.string()))
                mask = pc.and_(mask, chosen)
        return mask


@dataclass(frozen=True)
class AlertRows:
    """Result of a query: whether the table exists, how many matched, the rows shown."""

    exists: bool
    total: int
    rows: list[dict[str, Any]]


def read_alerts(reader: LakeReader, where: AlertFilter = AlertFilter()) -> pa.Table | None:
    """Matching alerts, newest first, as an Arrow table; None when the table does not exist."""
    table = reader.read(ALERTS, COLUMNS, where.where)
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


def describe_value(row: dict[str, Any]) -> str:
    """The observation in words: degrees against the threshold, or seconds of silence."""
    if row["rule"] == "sensor_silent":
        return f"{row['observed_value']:.0f} s silent"
    return f"{row['observed_value']:.1f} °C ≥ {row['threshold']:.1f}"


def values(items: Iterable[str]) -> tuple[str, ...]:
    """Values of a repeatable, comma-separated flag, flattened and without blanks."""
    return tuple(v.strip() for item in items for v in item.split(",") if v.strip())
