"""The alert rules: pure functions of DataFrames (static or per micro-batch input), and
for overheat_reading the last step in plain Python over the few rows it concerns.

Every alert gets ``alert_id`` = sha256(sensor_id | rule | window_start): the same alert
found again (a replayed batch, a duplicate reading, a restart) has the same id, and the
alerts table keeps one row per id.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from jobs.registry import Sensor
from jobs.tables import ALERTS

OVERHEAT = "overheat_reading"
SUSTAINED = "sustained_high"
SILENT = "sensor_silent"
SEVERITY = {OVERHEAT: "critical", SUSTAINED: "warning", SILENT: "warning"}
UNREGISTERED = "unregistered"  # site of a sensor missing from the registry


def alert_id(sensor_id: Column, rule: str, window_start: Column) -> Column:
    """Deterministic id of an alert: the same sensor, rule and window give the same id."""
    start = F.date_format(window_start, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
    return F.sha2(F.concat_ws("|", sensor_id, F.lit(rule), start), 256)


def _as_alerts(df: DataFrame, rule: str, detected_at: Column) -> DataFrame:
    """Add id, rule, severity and detection time; keep the alerts table's columns."""
    return (
        df.withColumn("alert_id", alert_id(F.col("sensor_id"), rule, F.col("window_start")))
        .withColumn("rule", F.lit(rule))
        .withColumn("severity", F.lit(SEVERITY[rule]))
        .withColumn("detected_at", detected_at)
        .select(*(F.col(f.name).cast(f.dataType) for f in ALERTS.fields))
        .dropDuplicates(["alert_id"])
    )


def with_registry(df: DataFrame, registry: DataFrame) -> DataFrame:
    """Left-join the registry: every row kept; unregistered sensors get site 'unregistered'."""
    return (
        df.join(F.broadcast(registry), "sensor_id", "left")
        .withColumn("registered", F.col("site").isNotNull())
        .withColumn("site", F.coalesce(F.col("site"), F.lit(UNREGISTERED)))
    )


def overheat_threshold(sensors: Mapping[str, Sensor], critical_c: float) -> Column:
    """Each reading's overheat threshold: its sensor's registered max_temp_c, else
    ``critical_c``. One flat CASE over the registry's distinct thresholds, each with its
    sensors as a set, so no join is planned per micro-batch."""
    by_threshold: dict[float, list[str]] = defaultdict(list)
    for sensor_id, sensor in sensors.items():
        if sensor.max_temp_c is not None:
            by_threshold[sensor.max_temp_c].append(sensor_id)
    if not by_threshold:
        return F.lit(float(critical_c))
    branches = sorted(by_threshold.items())
    value, ids = branches[0]
    threshold = F.when(F.col("sensor_id").isin(ids), F.lit(float(value)))
    for value, ids in branches[1:]:
        threshold = threshold.when(F.col("sensor_id").isin(ids), F.lit(float(value)))
    return threshold.otherwise(F.lit(float(critical_c)))


def overheat_candidates(readings: DataFrame, threshold: Column) -> DataFrame:
    """The readings at or above their sensor's overheat ``threshold`` (the expression of
    :func:`overheat_threshold`), with the alert they belong to: event_id, sensor_id,
    temperature_c, threshold, and the alert's window_start, window_end (the reading's
    1-minute event-time bucket) and alert_id. A handful of rows per batch:
    :func:`overheat_alerts` takes them from there."""
    bucket = F.date_trunc("minute", F.col("event_time"))
    return (
        readings.withColumn("threshold", threshold)
        .filter(F.col("temperature_c") >= F.col("threshold"))
        .select(
            "event_id",
            "sensor_id",
            "temperature_c",
            "threshold",
            bucket.alias("window_start"),
            (bucket + F.expr("INTERVAL 1 MINUTE")).alias("window_end"),
            alert_id(F.col("sensor_id"), OVERHEAT, bucket).alias("alert_id"),
        )
    )


def overheat_groups(candidates: DataFrame) -> DataFrame:
    """:func:`overheat_candidates` grouped by alert in Spark, for a batch with too many to
    bring to the driver one by one: the same columns, ``temperature_c`` the hottest, and
    ``readings``, the distinct readings (no ``event_id``)."""
    return candidates.groupBy(
        "alert_id", "sensor_id", "threshold", "window_start", "window_end"
    ).agg(
        F.max("temperature_c").alias("temperature_c"),
        F.count_distinct("event_id").alias("readings"),
    )


def overheat_alerts(
    candidates: Iterable[Row], sensors: Mapping[str, Sensor], detected_at: datetime
) -> list[Row]:
    """overheat_reading: one alert per sensor per 1-minute event-time bucket in which a
    reading reached the sensor's threshold, with the bucket's hottest value and how many
    distinct readings reached it. ``candidates`` are rows of :func:`overheat_candidates`,
    or of :func:`overheat_groups` (already one per alert, with ``readings``).

    Plain Python over a few rows: a Spark job for them would cost more than the rule,
    and this runs before the alert can be written (docs/benchmarks.md).
    """
    hits: dict[str, dict[str, Any]] = {}
    seen: dict[str, set[str]] = defaultdict(set)
    counted: dict[str, int] = {}
    for row in candidates:
        sensor = sensors.get(row.sensor_id)
        site = sensor.site if sensor is not None and sensor.site is not None else UNREGISTERED
        hit = hits.setdefault(
            row.alert_id,
            {
                "alert_id": row.alert_id,
                "sensor_id": row.sensor_id,
                "site": site,
                "rule": OVERHEAT,
                "severity": SEVERITY[OVERHEAT],
                "window_start": row.window_start,
                "window_end": row.window_end,
                "observed_value": row.temperature_c,
                "threshold": row.threshold,
            },
        )
        hit["observed_value"] = max(hit["observed_value"], row.temperature_c)
        if "readings" in row.__fields__:
            counted[row.alert_id] = row.readings
        else:
            seen[row.alert_id].add(row.event_id)  # a re-sent reading counts once
    alerts = []
    for key, hit in hits.items():
        values = {**hit, "readings": counted.get(key, len(seen[key])), "detected_at": detected_at}
        alerts.append(Row(**{name: values[name] for name in ALERTS.fieldNames()}))
    return alerts


def sustained_alerts(
    stats_5m: DataFrame,
    registry: DataFrame,
    warning_c: float,
    min_readings: int,
    detected_at: Column,
) -> DataFrame:
    """sustained_high: closed 5-minute windows averaging at least ``warning_c`` over at least
    ``min_readings`` readings."""
    warm = stats_5m.filter(
        (F.col("avg_temperature_c") >= warning_c) & (F.col("readings") >= min_readings)
    )
    found = (
        with_registry(warm, registry)
        .withColumn("observed_value", F.col("avg_temperature_c"))
        .withColumn("threshold", F.lit(warning_c))
    )
    return _as_alerts(found, SUSTAINED, detected_at)


def silence_alerts(
    silences: DataFrame,
    registry: DataFrame,
    timeout_s: float,
    registered_only: bool,
    detected_at: Column,
) -> DataFrame:
    """sensor_silent: silences found by the silence query (sensor_id, window_start = the
    last reading before it, window_end, observed_value = seconds without a reading)."""
    found = with_registry(silences, registry)
    if registered_only:
        found = found.filter("registered")
    found = found.withColumn("threshold", F.lit(float(timeout_s))).withColumn(
        "readings", F.lit(0).cast("long")
    )
    return _as_alerts(found, SILENT, detected_at)
