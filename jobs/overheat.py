"""overheat_reading, the low-latency rule, on one ingest micro-batch held as Arrow.

Ingest brings each micro-batch to the driver once, as Arrow, to commit it (jobs/ingest.py);
the rule runs there, vectorised, before anything is committed: a Spark job of its own
would cost more than the rule (docs/benchmarks.md). One alert per sensor per 1-minute
event-time bucket in which a reading reached the sensor's threshold (its registered
``max_temp_c``, else the critical default), with the bucket's hottest value and how many
distinct readings reached it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row

from contract.alerts import OVERHEAT, SEVERITY, UNREGISTERED, alert_id
from contract.registry import Entry
from jobs.tables import ALERTS

BUCKET = timedelta(minutes=1)


def thresholds(
    sensor_ids: pa.ChunkedArray, sensors: Mapping[str, Entry], critical_c: float
) -> pa.Array | pa.ChunkedArray:
    """Each reading's overheat threshold: its sensor's max_temp_c, else ``critical_c``."""
    limits = {sid: s.max_temp_c for sid, s in sensors.items() if s.max_temp_c is not None}
    if not limits:
        return pa.array([float(critical_c)] * len(sensor_ids), pa.float64())
    position = pc.index_in(sensor_ids, value_set=pa.array(list(limits), pa.string()))
    found = pc.take(pa.array(list(limits.values()), pa.float64()), position)
    return pc.fill_null(found, float(critical_c))


def overheat_hits(readings: pa.Table, sensors: Mapping[str, Entry], critical_c: float) -> pa.Table:
    """The batch's readings at or above their threshold, one row per sensor and 1-minute
    bucket: sensor_id, window_start (UTC), observed_value (the hottest), readings (distinct
    event ids), threshold."""
    limit = thresholds(readings["sensor_id"], sensors, critical_c)
    hot = readings.select(["event_id", "sensor_id", "event_time", "temperature_c"])
    hot = hot.append_column("threshold", limit)
    hot = hot.filter(pc.greater_equal(hot["temperature_c"], hot["threshold"]))
    hot = hot.append_column("window_start", pc.floor_temporal(hot["event_time"], unit="minute"))
    grouped = hot.group_by(["sensor_id", "window_start"]).aggregate(
        [("temperature_c", "max"), ("event_id", "count_distinct"), ("threshold", "max")]
    )
    return grouped.rename_columns(
        {
            "temperature_c_max": "observed_value",
            "event_id_count_distinct": "readings",
            "threshold_max": "threshold",
        }
    )


def overheat_alerts(
    hits: pa.Table, sensors: Mapping[str, Entry], detected_at: datetime
) -> list[Row]:
    """The alerts table's rows for :func:`overheat_hits`, detected at ``detected_at``."""
    alerts = []
    for hit in hits.to_pylist():
        sensor = sensors.get(hit["sensor_id"])
        start = hit["window_start"]
        values = {
            **hit,
            "alert_id": alert_id(hit["sensor_id"], OVERHEAT, start),
            "site": sensor.site if sensor is not None and sensor.site is not None else UNREGISTERED,
            "rule": OVERHEAT,
            "severity": SEVERITY[OVERHEAT],
            "window_start": start,
            "window_end": start + BUCKET,
            "detected_at": detected_at,
        }
        alerts.append(Row(**{name: values[name] for name in ALERTS.fieldNames()}))
    return alerts
