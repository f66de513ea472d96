"""Alerts as Spark columns: their id, their rows (the windows query's rules,
jobs/alerting/window_rules.py; the real-time path, jobs/queries/realtime.py).

Every alert gets ``alert_id`` = sha256(sensor_id | rule | window_start): the same alert
found again (a replayed batch, a duplicate reading, a restart) has the same id, and the
alerts table keeps one row per id.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from contract.alerts import ID_SEPARATOR, ID_TIME_SPARK, UNREGISTERED
from jobs.alerting.reading_rules import CompiledRule
from jobs.spark.local_frames import local_frame
from jobs.spark.sql_text import projection, sql_text
from jobs.writer.tables import ALERTS_SCHEMA

# A compiled rule's thresholds as data: one row per rule and sensor it lists (the
# registry's sensors it covers, the sensors it names), joined by (rule, sensor_id).
RULE_THRESHOLDS = StructType(
    [
        StructField("rule", StringType()),
        StructField("sensor_id", StringType()),
        StructField("sensor_threshold", DoubleType()),
    ]
)


def thresholds_frame(spark: SparkSession, rules: Sequence[CompiledRule]) -> DataFrame:
    """:data:`RULE_THRESHOLDS` rows of ``rules`` (small: rules x sensors), held in the plan."""
    rows = [
        (rule.name, sensor_id, threshold)
        for rule in rules
        for sensor_id, threshold in zip(rule.sensor_ids, rule.thresholds, strict=True)
    ]
    return local_frame(spark, rows, RULE_THRESHOLDS)


def threshold_of(default: Column) -> Column:
    """A row's threshold after the join with :func:`thresholds_frame`: its sensor's, else
    ``default`` (a rule's threshold for sensors the registry lacks; null: not covered)."""
    return F.coalesce(F.col("sensor_threshold"), default)


def breached(op: Column, value: Column, threshold: Column) -> Column:
    """Whether ``value`` breaches ``threshold`` by the comparison ``op`` names."""
    return (
        F.when(op == ">", value > threshold)
        .when(op == ">=", value >= threshold)
        .when(op == "<", value < threshold)
        .when(op == "<=", value <= threshold)
        .otherwise(F.lit(False))
    )


def alert_id(sensor_id: Column, rule: str | Column, window_start: Column) -> Column:
    """:func:`contract.alerts.alert_id` as a Spark column (the same text, the same hash;
    ``date_format`` writes UTC: the session's time zone is UTC)."""
    start = F.date_format(window_start, ID_TIME_SPARK)
    named = F.lit(rule) if isinstance(rule, str) else rule
    return F.sha2(F.concat_ws(ID_SEPARATOR, sensor_id, named, start), 256)


def alert_id_sql(sensor_id: str, rule: str, window_start: str) -> str:
    """:func:`alert_id` as SQL text over the named columns (the same expression)."""
    start = f"date_format(`{window_start}`, {sql_text(ID_TIME_SPARK)})"
    return f"sha2(concat_ws({sql_text(ID_SEPARATOR)}, `{sensor_id}`, `{rule}`, {start}), 256)"


def as_alerts(found: DataFrame, detected_at: Column) -> DataFrame:
    """Alert rows (jobs/writer/tables.py ALERTS_SCHEMA), one per alert_id, from rows with
    the rule, its severity, the sensor's site (null: unregistered), the window, the
    observed value, the threshold and the readings."""
    # Two projections in SQL text (jobs/spark/sql_text.py projection): the windows query
    # builds this plan in every micro-batch.
    computed = {
        "alert_id": alert_id_sql("sensor_id", "rule", "window_start"),
        "site": f"coalesce(`site`, {sql_text(UNREGISTERED)})",
        "detected_at": "`_detected_at`",
    }
    return (
        found.select("*", detected_at.alias("_detected_at"))
        .selectExpr(*projection(ALERTS_SCHEMA, computed))
        .dropDuplicates(["alert_id"])
    )


def with_registry(df: DataFrame, registry: DataFrame) -> DataFrame:
    """Left-join the registry: every row kept; unregistered sensors get site 'unregistered'."""
    return (
        df.join(F.broadcast(registry), "sensor_id", "left")
        .withColumn("registered", F.col("site").isNotNull())
        .withColumn("site", F.coalesce(F.col("site"), F.lit(UNREGISTERED)))
    )
