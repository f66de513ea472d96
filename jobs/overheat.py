"""overheat_reading, the low-latency rule, on one ingest micro-batch.

Each ingest task applies the rule to the readings it holds, as Arrow, while it writes
them (jobs/ingest.py): :func:`hot_buckets` reduces them to one row per sensor and 1-minute
event-time bucket in which a reading reached the sensor's threshold (its registered
``max_temp_c``, else the critical default). The driver receives those rows only, merges
the tasks' rows of one bucket (:func:`merge_buckets`) and makes them alerts
(:func:`overheat_alerts`): one per sensor and bucket, with the bucket's hottest value and
how many distinct readings reached it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import pyarrow as pa
from pyspark.sql import Row

from contract.alerts import OVERHEAT, SEVERITY, UNREGISTERED, alert_id
from contract.registry import Entry
from jobs.reading_rules import RULE_BUCKET, CompiledRule, rule_buckets, rule_thresholds
from jobs.tables import ALERTS

BUCKET = timedelta(minutes=1)

# One row per sensor and bucket with a hot reading: what a task hands the driver (the
# reading rules' bucket, of this one rule).
HOT_BUCKET = RULE_BUCKET.remove(RULE_BUCKET.get_field_index("rule"))


def overheat_limits(sensors: Mapping[str, Entry]) -> dict[str, float]:
    """sensor_id -> the registered ``max_temp_c``, for the sensors that have one."""
    return {sid: s.max_temp_c for sid, s in sensors.items() if s.max_temp_c is not None}


def _overheat_rule(limits: Mapping[str, float], critical_c: float) -> CompiledRule:
    """overheat_reading as a compiled reading rule: a sensor's limit, else ``critical_c``."""
    return CompiledRule(
        OVERHEAT, "temperature_c", ">=", tuple(limits), tuple(limits.values()), float(critical_c)
    )


def thresholds(
    sensor_ids: pa.Array | pa.ChunkedArray, limits: Mapping[str, float], critical_c: float
) -> pa.Array | pa.ChunkedArray:
    """Each reading's overheat threshold: its sensor's limit, else ``critical_c``."""
    return rule_thresholds(sensor_ids, _overheat_rule(limits, critical_c))


def _per_bucket(rows: pa.Table, columns: Mapping[str, tuple[str, str]]) -> pa.Table:
    """``rows`` grouped by sensor and bucket into :data:`HOT_BUCKET` rows; ``columns``
    gives each other column as (the column of ``rows``, the aggregation)."""
    grouped = rows.group_by(["sensor_id", "window_start"]).aggregate(list(columns.values()))
    grouped = grouped.rename_columns(
        {f"{source}_{how}": name for name, (source, how) in columns.items()}
    )
    return grouped.select(HOT_BUCKET.names).cast(HOT_BUCKET)


def hot_buckets(readings: pa.Table, limits: Mapping[str, float], critical_c: float) -> pa.Table:
    """The readings at or above their threshold, one row per sensor and 1-minute bucket
    (:data:`HOT_BUCKET`): the hottest value, how many distinct event ids, the threshold,
    the first hot reading's Kafka timestamp (jobs/reading_rules.py does the work)."""
    found = rule_buckets(readings, [_overheat_rule(limits, critical_c)])
    return found.drop_columns(["rule"])


def merge_buckets(buckets: pa.Table) -> pa.Table:
    """The tasks' :func:`hot_buckets` rows, one per sensor and bucket.

    Counts add up: a reading and its re-sent copies share their Kafka key, the sensor id,
    so they reach the same Kafka partition and with it the same task (Spark's Kafka
    source reads a topic partition in one task, and the job merges only whole ones).
    """
    return _per_bucket(
        buckets,
        {
            "observed_value": ("observed_value", "max"),
            "readings": ("readings", "sum"),
            "threshold": ("threshold", "max"),
            "first_reading_at": ("first_reading_at", "min"),
        },
    )


def overheat_hits(readings: pa.Table, sensors: Mapping[str, Entry], critical_c: float) -> pa.Table:
    """:func:`hot_buckets` of readings held in one place (tests, tools)."""
    return merge_buckets(hot_buckets(readings, overheat_limits(sensors), critical_c))


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
