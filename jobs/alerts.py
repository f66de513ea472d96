"""The alert rules of the windows query: pure functions of DataFrames (static or per
micro-batch input). overheat_reading runs in ingest, on Arrow (jobs/overheat.py).

Every alert gets ``alert_id`` = sha256(sensor_id | rule | window_start): the same alert
found again (a replayed batch, a duplicate reading, a restart) has the same id, and the
alerts table keeps one row per id.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from contract.alerts import (
    ID_SEPARATOR,
    ID_TIME_SPARK,
    SEVERITY,
    SILENT,
    SUSTAINED,
    UNREGISTERED,
)
from jobs.tables import ALERTS


def alert_id(sensor_id: Column, rule: str, window_start: Column) -> Column:
    """:func:`contract.alerts.alert_id` as a Spark column (the same text, the same hash;
    ``date_format`` writes UTC: the session's time zone is UTC)."""
    start = F.date_format(window_start, ID_TIME_SPARK)
    return F.sha2(F.concat_ws(ID_SEPARATOR, sensor_id, F.lit(rule), start), 256)


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
