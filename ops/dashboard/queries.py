"""What the dashboard shows, as pure functions over the lake: no HTTP here.

Every function returns a JSON-ready dict with ``exists``: False when the table it reads
does not exist yet (the job has not created it), in which case the data is empty.
Chart series are columns (``t`` in epoch seconds, then one list per line), the form the
chart library takes as is.

Each reads only the time range the page shows (docs/architecture.md#running-for-weeks: a
reader's cost must not grow with the table's age), says which in its result, and leaves
the rest of the table's files unopened (``lake.reader``). Ranges of event time end at the
table's newest data, not at the clock, so a lake filled from a replayed topic still shows;
ranges of the job's wall clock (detected_at) end now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from contract.alerts import SEVERITIES, incident_labels, rule_on_sensor
from contract.registry import Entry
from contract.rules.limits import temperature_limits
from contract.rules.model import DeviationRule, RuleSet
from contract.times import as_utc, iso
from lake.layout import ALERTS, PIPELINE_METRICS, SENSOR_STATS_1M
from lake.reader import AllOf, AtLeast, LakeReader, OneOf, count_by, maximum, newest, read_table
from ops.alert_reader import AlertFilter, incident_record, query_incidents
from ops.baselines import newest_baselines
from ops.dashboard.silences import silencing

# Bucket sizes for the alerts-over-time chart, the smallest that gives at most MAX_BUCKETS.
BUCKETS = (60, 300, 600, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86_400)
MAX_BUCKETS = 120
# Spark reports the watermark as the epoch before the first one is set.
_NO_WATERMARK = datetime(1970, 1, 1, tzinfo=UTC)
# What the page shows: alert counts and the alerts timeline of the last day, the sensors
# with statistics in the last day, the pipeline's batches of the last hour.
ALERT_WINDOW = timedelta(hours=24)
SENSOR_WINDOW = timedelta(hours=24)
PIPELINE_WINDOW = timedelta(hours=1)
PIPELINE_COLUMNS = [
    "query",
    "batch_id",
    "timestamp",
    "input_rows",
    "input_rows_per_second",
    "processed_rows_per_second",
    "batch_duration_ms",
    "watermark",
    "rows_dropped_by_watermark",
    "state_rows",
]


def _hours(span: timedelta) -> float:
    return span.total_seconds() / 3600


@dataclass(frozen=True)
class Thresholds:
    """The temperature thresholds the dashboard draws for a sensor, from the rules file
    and the registry as the job resolves them (contract.rules.limits.temperature_limits)."""

    rules: Callable[[], RuleSet]
    registry: Callable[[], Mapping[str, Entry]]

    def for_sensor(self, sensor_id: str) -> dict[str, Any]:
        """Critical threshold (with the rule and where its value came from: the registry,
        an override, the rule) and warning threshold; None where no rule covers it."""
        entry = self.registry().get(sensor_id)
        own = (
            None if entry is None or entry.max_temp_c is None else {"max_temp_c": entry.max_temp_c}
        )
        site, model = (None, None) if entry is None else (entry.site, entry.model)
        limits = temperature_limits(self.rules(), sensor_id, site, model, own)
        return {
            "critical": limits.critical_c,
            "warning": limits.warning_c,
            "critical_source": limits.critical_source,
        }


def baseline_bands(reader: LakeReader, sensor_id: str, thresholds: Thresholds) -> list[dict]:
    """The normal band of each deviation rule on temperature that covers the sensor: its
    newest baseline (ops/baselines.py), mean -/+ deviations x sd (at least min_sd), as the
    job judges the next pane by; the mean and band None where it has none yet."""
    entry = thresholds.registry().get(sensor_id)
    site, model = (None, None) if entry is None else (entry.site, entry.model)
    rules = [
        rule
        for rule in thresholds.rules().rules
        if isinstance(rule, DeviationRule)
        and rule.field == "temperature_c"
        and rule.scope.covers(sensor_id, site, model)
    ]
    try:
        learned = newest_baselines(reader, (sensor_id,), rules)
    except (OSError, ValueError, KeyError, DeltaError, pa.ArrowException):
        learned = {}  # an unreadable table or checkpoint: the chart without its band
    bands = []
    for rule in rules:
        found: dict[str, Any] = {
            "rule": rule.name,
            "direction": rule.direction,
            "deviations": rule.deviations,
            "min_sd": rule.min_sd,
            "mean": None,
            "sd": None,
            "low": None,
            "high": None,
            "warm": False,
            "taught": 0,
            "last_pane": None,
            "breach_since": None,
        }
        newest = learned.get((sensor_id, rule.name))
        if newest is not None:
            state = newest.baseline
            low, high = newest.band
            found.update(
                mean=state.mean, sd=state.sd, low=low, high=high, warm=newest.warm,
                taught=state.taught, last_pane=iso(state.last_pane),
                breach_since=iso(state.breach_since),
            )  # fmt: skip
        bands.append(found)
    return bands


def _seconds(column: pa.ChunkedArray) -> list[float | None]:
    """A timestamp column as epoch seconds."""
    micros = pc.cast(column.cast(pa.timestamp("us", tz="UTC")), pa.int64())
    return [None if v is None else v / 1e6 for v in micros.to_pylist()]


def alert_summary(reader: LakeReader, open_minutes: float, now: datetime) -> dict[str, Any]:
    """Alerts by severity: open ones (detected in the last ``open_minutes``) and all those
    detected in the last ``total_hours`` (:data:`ALERT_WINDOW`, or ``open_minutes`` if
    longer), both by detected_at (the job's wall clock) back from ``now``; and the newest
    detection, however old."""
    opened = dict.fromkeys(SEVERITIES, 0)
    total = dict.fromkeys(SEVERITIES, 0)
    window = max(ALERT_WINDOW, timedelta(minutes=open_minutes))
    table = reader.open(ALERTS)
    newest_detected = None
    if table is not None:
        rows = read_table(table, ["severity", "detected_at"], AtLeast("detected_at", now - window))
        opened_since = now - timedelta(minutes=open_minutes)
        for severity, detected in zip(
            rows.column("severity").to_pylist(),
            rows.column("detected_at").to_pylist(),
            strict=True,
        ):
            total[severity] = total.get(severity, 0) + 1
            if as_utc(detected) >= opened_since:
                opened[severity] = opened.get(severity, 0) + 1
        # Older than the window: the Delta log's statistics know it, no file is read.
        newest_detected = _newest(rows, "detected_at") or newest(table, "detected_at")
    return {
        "exists": table is not None,
        "open_minutes": open_minutes,
        "open": opened,
        "total_hours": _hours(window),
        "total": total,
        "newest_detected_at": iso(newest_detected),
    }


def silence_url(alertmanager_url: str, rule: str, sensor_id: str) -> str:
    """Alertmanager's "new silence" form, filled in for one rule on one sensor: the labels
    the notifier posts an incident with (alertname = rule, sensor_id)."""
    labels = rule_on_sensor(rule, sensor_id).items()
    matchers = "{" + ",".join(f'{name}="{_label(value)}"' for name, value in labels) + "}"
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
    """Alerts per event-time bucket (their window_start) and severity, over the last
    ``hours`` (:data:`ALERT_WINDOW`) before the newest alert's window, from ``since``.

    Event time rather than detected_at: it says when the incidents happened, also for a
    lake that was filled in one go from a replayed topic.
    """
    opened = reader.open(ALERTS)
    last = None if opened is None else newest(opened, "window_start")
    since = None if last is None else last - ALERT_WINDOW
    empty = {
        "exists": opened is not None,
        "hours": _hours(ALERT_WINDOW),
        "since": iso(since),
        "bucket_seconds": BUCKETS[0],
        "t": [],
    }
    empty.update({s: [] for s in SEVERITIES})
    if opened is None or since is None:
        return empty
    table = read_table(opened, ["severity", "window_start"], AtLeast("window_start", since))
    if table.num_rows == 0:
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
    result: dict[str, Any] = {**empty, "bucket_seconds": bucket, "t": times}
    result.update({s: [counts.get((t, s), 0) for t in times] for s in SEVERITIES})
    return result


def sensors(reader: LakeReader) -> dict[str, Any]:
    """The sensors with a 1-minute window in the last ``hours`` (:data:`SENSOR_WINDOW`)
    before the newest one, from ``since``, with their alerts of that range (by the
    alert's window_start), most alerts first."""
    stats = reader.open(SENSOR_STATS_1M)
    since = _sensor_list_start(stats)
    result: dict[str, Any] = {
        "exists": stats is not None,
        "hours": _hours(SENSOR_WINDOW),
        "since": iso(since),
        "sensors": [],
    }
    if stats is None or since is None:
        return result
    recent = AtLeast("window_start", since)
    known = count_by(stats, "sensor_id", recent)
    alerts = reader.open(ALERTS)
    alert_counts = {} if alerts is None else count_by(alerts, "sensor_id", recent)
    rows = [{"sensor_id": s, "alerts": alert_counts.get(s, 0)} for s in known if s is not None]
    rows.sort(key=lambda r: (-r["alerts"], r["sensor_id"]))
    result["sensors"] = rows
    return result


def _sensor_list_start(stats: DeltaTable | None) -> datetime | None:
    """Where the sensor list's range starts: :data:`SENSOR_WINDOW` before the newest
    1-minute window (from the Delta log); None without a table or a window."""
    last = None if stats is None else newest(stats, "window_start")
    return None if last is None else last - SENSOR_WINDOW


def sensor_stats(
    reader: LakeReader, sensor_id: str, thresholds: Thresholds, hours: float = 6.0
) -> dict[str, Any]:
    """A sensor's 1-minute temperatures (avg, min, max) over the last ``hours`` of its data
    (from ``since``), with the thresholds its alerts use and the normal band of each
    deviation rule on it (:func:`baseline_bands`).

    The sensor's data ends at its newest window within the sensor list's range (the
    sensors of :func:`sensors`); a sensor without one there shows no data.
    """
    stats = reader.open(SENSOR_STATS_1M)
    result: dict[str, Any] = {
        "exists": stats is not None,
        "sensor_id": sensor_id,
        "thresholds": thresholds.for_sensor(sensor_id),
        "baselines": baseline_bands(reader, sensor_id, thresholds),
        "hours": hours,
        "since": None,
        "t": [],
        "avg": [],
        "min": [],
        "max": [],
        "readings": [],
    }
    listed = _sensor_list_start(stats)
    if stats is None or listed is None:
        return result
    this_sensor = OneOf("sensor_id", (sensor_id,))
    # Relative to the sensor's newest window, not the clock: a replayed lake still shows.
    last = maximum(stats, "window_start", AllOf([this_sensor, AtLeast("window_start", listed)]))
    if last is None:
        return result
    since = as_utc(last) - timedelta(hours=hours)
    table = read_table(
        stats,
        [
            "window_start",
            "readings",
            "avg_temperature_c",
            "min_temperature_c",
            "max_temperature_c",
        ],
        AllOf([this_sensor, AtLeast("window_start", since)]),
    ).sort_by("window_start")
    result["since"] = iso(since)
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
    """Per query: its latest micro-batch (rates, duration, watermark lag), its ``batches``
    and the rows they dropped as late, and series of its last ``points`` batches; all of
    the batches of the last ``minutes`` (:data:`PIPELINE_WINDOW`) before the newest one
    (from ``since``)."""
    opened = reader.open(PIPELINE_METRICS)
    last_batch = None if opened is None else newest(opened, "timestamp")
    since = None if last_batch is None else last_batch - PIPELINE_WINDOW
    result: dict[str, Any] = {
        "exists": opened is not None,
        "minutes": PIPELINE_WINDOW.total_seconds() / 60,
        "since": iso(since),
        "queries": [],
        "series": {},
    }
    if opened is None or since is None:
        return result
    table = read_table(opened, PIPELINE_COLUMNS, AtLeast("timestamp", since))
    if table.num_rows == 0:
        return result
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
    result.update(queries=queries, series=series)
    return result


def _watermark(value: datetime | None) -> datetime | None:
    utc = as_utc(value)
    return None if utc is None or utc == _NO_WATERMARK else utc


def _lag(batch_time: datetime | None, watermark: datetime | None) -> float | None:
    """How far the watermark trails the batch's wall-clock time, in seconds (meaningful
    with a real-time event clock; a replay of old data shows the age of the data)."""
    mark, at = _watermark(watermark), as_utc(batch_time)
    return None if mark is None or at is None else round((at - mark).total_seconds(), 3)
