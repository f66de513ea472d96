"""What the dashboard shows, as pure functions over the lake: no HTTP here.

Every function returns a JSON-ready dict with ``exists``: False when the table it reads
does not exist yet (the job has not created it), in which case the data is empty.
Chart series are columns (``t`` in epoch seconds, then one list per line), the form the
chart library takes as is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc

from ops.alerts import SEVERITIES, AlertFilter, incident_record, query_incidents
from ops.dashboard.silences import silencing
from ops.lake import ALERTS, PIPELINE_METRICS, SENSOR_STATS_1M, LakeReader, as_utc, iso
from ops.notify import incident_labels

# Bucket sizes for the alerts-over-time chart, the smallest that gives at most MAX_BUCKETS.
BUCKETS = (60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86_400)
MAX_BUCKETS = 120
# Spark reports the watermark as the epoch before the first one is set.
_NO_WATERMARK = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Thresholds:
    """The alert thresholds the dashboard draws: defaults, and per-sensor critical ones."""

    critical_temp_c: float
    warning_temp_c: float
    max_temp_c: Callable[[], dict[str, float | None]]

    def for_sensor(self, sensor_id: str) -> dict[str, Any]:
        """Critical (the sensor's max_temp_c wins, as in the job) and warning threshold."""
        own = self.max_temp_c().get(sensor_id)
        return {
            "critical": own if own is not None else self.critical_temp_c,
            "warning": self.warning_temp_c,
            "critical_source": "registry" if own is not None else "default",
        }


def _seconds(column: pa.ChunkedArray) -> list[float | None]:
    """A timestamp column as epoch seconds."""
    micros = pc.cast(column.cast(pa.timestamp("us", tz="UTC")), pa.int64())
    return [None if v is None else v / 1e6 for v in micros.to_pylist()]


def alert_summary(reader: LakeReader, open_minutes: float, now: datetime) -> dict[str, Any]:
    """Alerts by severity: open ones (detected in the last ``open_minutes``) and all."""
    table = reader.read(ALERTS, ["severity", "detected_at"])
    opened = dict.fromkeys(SEVERITIES, 0)
    total = dict.fromkeys(SEVERITIES, 0)
    if table is not None:
        since = now - timedelta(minutes=open_minutes)
        for severity, detected in zip(
            table.column("severity").to_pylist(),
            table.column("detected_at").to_pylist(),
            strict=True,
        ):
            total[severity] = total.get(severity, 0) + 1
            if detected is not None and as_utc(detected) >= since:
                opened[severity] = opened.get(severity, 0) + 1
    return {
        "exists": table is not None,
        "open_minutes": open_minutes,
        "open": opened,
        "total": total,
        "newest_detected_at": iso(_newest(table, "detected_at")),
    }


def silence_url(alertmanager_url: str, rule: str, sensor_id: str) -> str:
    """Alertmanager's "new silence" form, filled in for one rule on one sensor: the labels
    the notifier posts an incident with (alertname = rule, sensor_id)."""
    matchers = f'{{alertname="{_label(rule)}",sensor_id="{_label(sensor_id)}"}}'
    return f"{alertmanager_url.rstrip('/')}/#/silences/new?filter={quote(matchers, safe='')}"


def _label(value: str) -> str:
    """A label value inside a matcher's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def incidents(
    reader: LakeReader,
    alertmanager_url: str,
    where: AlertFilter,
    resolved_since: datetime,
    limit: int,
) -> dict[str, Any]:
    """Open (firing) incidents, counted by severity and rule, and the list: firing first,
    then those resolved (their last change) since ``resolved_since``; each with its
    duration and a link to Alertmanager's new-silence form for it. Silence state is
    unknown until ``mark_silenced`` adds it."""
    result = query_incidents(reader, where, resolved_since, limit)
    rows = []
    for row in result.rows:
        record = incident_record(row)
        record["silence_url"] = silence_url(alertmanager_url, row["rule"], row["sensor_id"])
        record["silenced"] = None
        rows.append(record)
    return {
        "exists": result.exists,
        "alertmanager_url": alertmanager_url,
        "silences_known": False,
        "silences_error": None,
        "resolved_since": iso(resolved_since),
        "open": {
            "total": result.firing,
            "by_severity": result.firing_by_severity,
            "by_rule": result.firing_by_rule,
        },
        "resolved": result.resolved,
        "total": result.total,
        "incidents": rows,
    }


def mark_silenced(
    result: dict[str, Any], active: list[dict[str, Any]] | None, error: str | None = None
) -> dict[str, Any]:
    """``result`` of ``incidents`` with each incident's ``silenced``: the active silence
    (of Alertmanager's ``active`` ones) that silences it, or None. ``active`` None: the
    state is unknown (``error`` says why) and every incident stays unmarked."""
    result["silences_known"] = active is not None
    result["silences_error"] = error
    for record in result["incidents"]:
        record["silenced"] = None if active is None else silencing(active, incident_labels(record))
    return result


def _newest(table: pa.Table | None, column: str) -> datetime | None:
    if table is None or table.num_rows == 0:
        return None
    return pc.max(table.column(column)).as_py()


def alert_timeline(reader: LakeReader) -> dict[str, Any]:
    """Alerts per event-time bucket (their window_start) and severity.

    Event time rather than detected_at: it says when the incidents happened, also for a
    lake that was filled in one go from a replayed topic.
    """
    table = reader.read(ALERTS, ["severity", "window_start"])
    empty = {"exists": table is not None, "bucket_seconds": BUCKETS[0], "t": []}
    empty.update({s: [] for s in SEVERITIES})
    if table is None or table.num_rows == 0:
        return empty
    starts = _seconds(table.column("window_start"))
    low, high = min(starts), max(starts)
    bucket = next((b for b in BUCKETS if (high - low) / b < MAX_BUCKETS), BUCKETS[-1])
    first = int(low // bucket) * bucket
    count = int(high // bucket) * bucket // bucket - first // bucket + 1
    counts = Counter(
        (int(start // bucket) * bucket, severity)
        for start, severity in zip(starts, table.column("severity").to_pylist(), strict=True)
    )
    times = [first + i * bucket for i in range(count)]
    result: dict[str, Any] = {"exists": True, "bucket_seconds": bucket, "t": times}
    result.update({s: [counts.get((t, s), 0) for t in times] for s in SEVERITIES})
    return result


def sensors(reader: LakeReader) -> dict[str, Any]:
    """The sensors with 1-minute statistics, with their alert counts (most alerts first)."""
    stats = reader.read(SENSOR_STATS_1M, ["sensor_id"])
    alerts = reader.read(ALERTS, ["sensor_id"])
    alert_counts = Counter(alerts.column("sensor_id").to_pylist()) if alerts is not None else {}
    known = set(pc.unique(stats.column("sensor_id")).to_pylist()) if stats is not None else set()
    rows = [{"sensor_id": s, "alerts": alert_counts.get(s, 0)} for s in known]
    rows.sort(key=lambda r: (-r["alerts"], r["sensor_id"]))
    return {"exists": stats is not None, "sensors": rows}


def sensor_stats(
    reader: LakeReader, sensor_id: str, thresholds: Thresholds, hours: float = 6.0
) -> dict[str, Any]:
    """A sensor's 1-minute temperatures (avg, min, max) over the last ``hours`` of its data,
    with the thresholds its alerts use."""
    table = reader.read(
        SENSOR_STATS_1M,
        [
            "sensor_id",
            "window_start",
            "readings",
            "avg_temperature_c",
            "min_temperature_c",
            "max_temperature_c",
        ],
        lambda data: pc.equal(data.column("sensor_id"), sensor_id),
    )
    result: dict[str, Any] = {
        "exists": table is not None,
        "sensor_id": sensor_id,
        "thresholds": thresholds.for_sensor(sensor_id),
        "t": [],
        "avg": [],
        "min": [],
        "max": [],
        "readings": [],
    }
    if table is None or table.num_rows == 0:
        return result
    table = table.sort_by("window_start")
    newest = pc.max(table.column("window_start")).as_py()
    # Relative to the sensor's newest window, not the clock: a replayed lake still shows.
    oldest = pa.scalar(newest - timedelta(hours=hours), table.schema.field("window_start").type)
    table = table.filter(pc.greater_equal(table.column("window_start"), oldest))
    result["t"] = _seconds(table.column("window_start"))
    for key, column in (
        ("avg", "avg_temperature_c"),
        ("min", "min_temperature_c"),
        ("max", "max_temperature_c"),
        ("readings", "readings"),
    ):
        result[key] = table.column(column).to_pylist()
    return result


def pipeline(reader: LakeReader, points: int = 120) -> dict[str, Any]:
    """Per query: its latest micro-batch (rates, duration, watermark lag, rows dropped as
    late in all its batches) and series of its last ``points`` batches."""
    table = reader.read(PIPELINE_METRICS)
    if table is None or table.num_rows == 0:
        return {"exists": table is not None, "queries": [], "series": {}}
    table = table.sort_by([("query", "ascending"), ("timestamp", "ascending")])
    queries, series = [], {}
    for name in sorted(set(table.column("query").to_pylist())):
        rows = table.filter(pc.equal(table.column("query"), name))
        last = rows.slice(rows.num_rows - 1).to_pylist()[0]
        recent = rows.slice(max(0, rows.num_rows - points))
        queries.append(
            {
                "query": name,
                "batches": rows.num_rows,
                "batch_id": last["batch_id"],
                "timestamp": iso(last["timestamp"]),
                "input_rows": last["input_rows"],
                "input_rows_per_second": last["input_rows_per_second"],
                "processed_rows_per_second": last["processed_rows_per_second"],
                "batch_duration_ms": last["batch_duration_ms"],
                "watermark": iso(_watermark(last["watermark"])),
                "watermark_lag_seconds": _lag(last["timestamp"], last["watermark"]),
                "rows_dropped_by_watermark": pc.sum(
                    rows.column("rows_dropped_by_watermark")
                ).as_py(),
                "state_rows": last["state_rows"],
            }
        )
        series[name] = {
            "t": _seconds(recent.column("timestamp")),
            "input_rows_per_second": recent.column("input_rows_per_second").to_pylist(),
            "processed_rows_per_second": recent.column("processed_rows_per_second").to_pylist(),
            "batch_duration_ms": recent.column("batch_duration_ms").to_pylist(),
            "rows_dropped_by_watermark": recent.column("rows_dropped_by_watermark").to_pylist(),
        }
    return {"exists": True, "queries": queries, "series": series}


def _watermark(value: datetime | None) -> datetime | None:
    utc = as_utc(value)
    return None if utc is None or utc == _NO_WATERMARK else utc


def _lag(batch_time: datetime | None, watermark: datetime | None) -> float | None:
    """How far the watermark trails the batch's wall-clock time, in seconds (meaningful
    with a real-time event clock; a replay of old data shows the age of the data)."""
    mark, at = _watermark(watermark), as_utc(batch_time)
    return None if mark is None or at is None else round((at - mark).total_seconds(), 3)
