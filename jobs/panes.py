"""One-minute panes and everything assembled from them, as pure DataFrame functions.

A pane is one sensor's deduplicated readings of one event-time minute, reduced to what
every later result needs: the count, the sums, min and max, and the first and last event
time. The job aggregates each reading into exactly one pane, once; then

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
from pyspark.sql.window import Window

from jobs.tables import PANES, SENSOR_STATS

PANE = "1 minute"
PANES_PER_WINDOW = 5  # sensor_stats_5m: 5 minutes, sliding by 1 minute


def _minutes(n: Column | int) -> Column:
    return F.make_dt_interval(F.lit(0), F.lit(0), n if isinstance(n, Column) else F.lit(n))


def panes(readings: DataFrame) -> DataFrame:
    """Deduplicated readings -> one row per (sensor, event-time minute) with data (PANES)."""
    window = F.window("event_time", PANE)
    return (
        readings.groupBy("sensor_id", window.alias("pane"))
        .agg(
            F.count(F.lit(1)).alias("readings"),
            F.sum("temperature_c").alias("sum_temperature_c"),
            F.min("temperature_c").alias("min_temperature_c"),
            F.max("temperature_c").alias("max_temperature_c"),
            F.sum("humidity_pct").alias("sum_humidity_pct"),
            F.min("event_time").alias("first_reading_at"),
            F.max("event_time").alias("last_reading_at"),
        )
        .select(
            "sensor_id",
            F.col("pane.start").alias("window_start"),
            F.col("pane.end").alias("window_end"),
            *PANES.fieldNames()[3:],
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


def _stats(grouped: DataFrame) -> DataFrame:
    """Sums to averages, in the sensor_stats_* columns."""
    return grouped.select(
        "sensor_id",
        "window_start",
        "window_end",
        "readings",
        (F.col("sum_temperature_c") / F.col("readings")).alias("avg_temperature_c"),
        "min_temperature_c",
        "max_temperature_c",
        (F.col("sum_humidity_pct") / F.col("readings")).alias("avg_humidity_pct"),
    ).select(*(F.col(f.name).cast(f.dataType) for f in SENSOR_STATS.fields))


def stats_1m(panes_df: DataFrame) -> DataFrame:
    """sensor_stats_1m rows: one per pane."""
    return _stats(panes_df)


def stats_5m(panes_df: DataFrame, after: datetime | None, until: datetime) -> DataFrame:
    """sensor_stats_5m rows of the 5-minute windows (sliding by 1 minute) whose end lies in
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
    grouped = (
        spread.filter(closed)
        .groupBy("sensor_id", "window_start", "window_end")
        .agg(
            F.sum("readings").alias("readings"),
            F.sum("sum_temperature_c").alias("sum_temperature_c"),
            F.min("min_temperature_c").alias("min_temperature_c"),
            F.max("max_temperature_c").alias("max_temperature_c"),
            F.sum("sum_humidity_pct").alias("sum_humidity_pct"),
        )
    )
    return _stats(grouped)


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
