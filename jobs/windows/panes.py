"""One-minute panes and everything assembled from them, as pure DataFrame functions.

A pane is one sensor's deduplicated readings of one event-time minute, reduced to what
every later result needs: the count, the sum, min and max of every measured field
(temperature, humidity, battery: what a window rule may aggregate), and the first and last
event time. The job aggregates each reading into exactly one pane, once; then

- ``sensor_stats_1m`` is the panes themselves;
- a 5-minute window sliding by 1 minute is the union of five consecutive panes (counts and
  sums add, min and max combine), so ``sensor_stats_5m`` needs no second pass over readings;
- a silence is a gap between one pane's last reading and the next pane's first.

Windows and silences are "closed" by a range of watermarks ``(after, until]``: the
micro-batch whose watermark moved from ``after`` to ``until`` emits exactly the windows
whose end lies in that range, so each is written once, and a replayed batch emits the same.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StructField, StructType
from pyspark.sql.window import Window

from contract.rules.model import FIELDS
from jobs.spark.sql_text import projection
from jobs.writer.tables import PANES_SCHEMA, SENSOR_STATS_SCHEMA, WINDOW_COLUMNS

PANE = "1 minute"
PANES_PER_WINDOW = 5  # sensor_stats_5m: 5 minutes, sliding by 1 minute
# What a window rule measures of a closed window (jobs/alerting/window_rules.py): its readings and
# the avg, min and max of every measured field. sensor_stats_* hold the contract's part.
MEASURES = StructType(
    [
        *WINDOW_COLUMNS,
        *(
            StructField(f"{a}_{field}", DoubleType())
            for field in FIELDS
            for a in ("avg", "min", "max")
        ),
    ]
)


def _minutes(n: Column | int) -> Column:
    return F.make_dt_interval(F.lit(0), F.lit(0), n if isinstance(n, Column) else F.lit(n))


def panes(readings: DataFrame) -> DataFrame:
    """Deduplicated readings -> one row per (sensor, event-time minute) with data (PANES_SCHEMA)."""
    window = F.window("event_time", PANE)
    aggregates = {
        f"{name}_{field}": getattr(F, name)(field)
        for field in FIELDS
        for name in ("sum", "min", "max")
    }
    aggregates["first_reading_at"] = F.min("event_time")
    aggregates["last_reading_at"] = F.max("event_time")
    return (
        readings.groupBy("sensor_id", window.alias("pane"))
        .agg(
            F.count(F.lit(1)).alias("readings"),
            *(column.alias(name) for name, column in aggregates.items()),
        )
        .select(
            "sensor_id",
            F.col("pane.start").alias("window_start"),
            F.col("pane.end").alias("window_end"),
            *PANES_SCHEMA.fieldNames()[3:],
        )
    )


def deduplicate(readings: DataFrame, watermark_delay: str) -> DataFrame:
    """Watermark on event_time and drop re-sent readings (same event_id).

    Duplicates are remembered only until the watermark passes them, so the state stays
    bounded; readings older than the watermark are dropped here (and counted by Spark as
    rows dropped by the watermark).
    """
    watermarked = readings.withWatermark("event_time", watermark_delay)
    if not readings.isStreaming:  # static input (tests, backfills): plain dedup, same result
        return watermarked.dropDuplicates(["event_id"])
    return watermarked.dropDuplicatesWithinWatermark(["event_id"])


def measures(grouped: DataFrame) -> DataFrame:
    """Pane sums -> what a window rule measures: readings, and the avg, min and max of
    every measured field (``avg_temperature_c``, ``min_battery_pct``, ...)."""
    averages = {f"avg_{field}": f"`sum_{field}` / `readings`" for field in FIELDS}
    return grouped.selectExpr(*projection(MEASURES, averages))


def as_stats(measured: DataFrame) -> DataFrame:
    """Window measures -> sensor_stats_* rows (the contract's columns)."""
    return measured.select(*(F.col(f.name) for f in SENSOR_STATS_SCHEMA.fields))


def measures_1m(panes_df: DataFrame) -> DataFrame:
    """The measures of every 1-minute window: one per pane."""
    return measures(panes_df)


def stats_1m(panes_df: DataFrame) -> DataFrame:
    """sensor_stats_1m rows: one per pane."""
    return as_stats(measures_1m(panes_df))


def measures_5m(panes_df: DataFrame, after: datetime | None, until: datetime) -> DataFrame:
    """The measures of the 5-minute windows (sliding by 1 minute) whose end lies in
    ``(after, until]`` (``after`` None: no lower bound), from every pane they contain.

    ``panes_df`` must hold all of those windows' panes (the batch's and the earlier ones).
    """
    offsets = F.explode(F.sequence(F.lit(0), F.lit(PANES_PER_WINDOW - 1)))
    spread = panes_df.select("*", offsets.alias("offset")).withColumn(
        "window_start", F.col("window_start") - _minutes(F.col("offset"))
    )
    spread = spread.withColumn("window_end", F.col("window_start") + _minutes(PANES_PER_WINDOW))
    closed = F.col("window_end") <= F.lit(until)
    if after is not None:
        closed &= F.col("window_end") > F.lit(after)
    combine = {"sum": F.sum, "min": F.min, "max": F.max}
    grouped = (
        spread.filter(closed)
        .groupBy("sensor_id", "window_start", "window_end")
        .agg(
            F.sum("readings").alias("readings"),
            *(
                combine[name](f"{name}_{field}").alias(f"{name}_{field}")
                for field in FIELDS
                for name in ("sum", "min", "max")
            ),
        )
    )
    return measures(grouped)


def stats_5m(panes_df: DataFrame, after: datetime | None, until: datetime) -> DataFrame:
    """sensor_stats_5m rows of the 5-minute windows whose end lies in ``(after, until]``
    (:func:`measures_5m`)."""
    return as_stats(measures_5m(panes_df, after, until))


def pane_end(ts: Column) -> Column:
    """End of the minute pane that holds ``ts``."""
    return F.date_trunc("minute", ts) + _minutes(1)


def silences(
    panes_df: DataFrame, timeout_s: float, after: datetime | None, until: datetime
) -> DataFrame:
    """Silences found when the watermark moves from ``after`` to ``until``: rows of
    sensor_id, window_start, window_end, observed_value.

    A sensor's reading ``a`` opens a silence when no reading follows it within
    ``timeout_s``. That is known for sure once every pane up to the one holding
    ``a + timeout`` is closed, so it is decided then: when the end of that pane lies in
    ``(after, until]``. The silence runs to the next reading if there is one by then, else
    to ``until``; its window_start is ``a``, so the same silence always has the same alert
    id. ``panes_df`` must hold every pane of the last ``timeout + 2 minutes`` before
    ``after`` and all panes up to ``until`` (the timeout is at least one minute, so ``a``
    is always the last reading of its pane).
    """
    timeout = F.make_dt_interval(F.lit(0), F.lit(0), F.lit(0), F.lit(float(timeout_s)))
    following = Window.partitionBy("sensor_id").orderBy("window_start")
    order = F.lead("first_reading_at").over(following)
    last = F.col("last_reading_at")
    decided_at = pane_end(last + timeout)
    decided = decided_at <= F.lit(until)
    if after is not None:
        decided &= decided_at > F.lit(after)
    gap = F.unix_micros(F.col("next_reading_at")) - F.unix_micros(last)
    quiet = F.col("next_reading_at").isNull() | (gap > F.lit(int(timeout_s * 1_000_000)))
    found = (
        panes_df.select("sensor_id", "window_start", "first_reading_at", last)
        .withColumn("next_reading_at", order)
        .filter(decided & quiet)
        .withColumn("window_end", F.coalesce(F.col("next_reading_at"), F.lit(until)))
    )
    seconds = (F.unix_micros(F.col("window_end")) - F.unix_micros(last)) / 1_000_000
    return found.select(
        "sensor_id",
        last.alias("window_start"),
        F.col("window_end").cast("timestamp"),
        seconds.cast("double").alias("observed_value"),
    )
