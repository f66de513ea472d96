"""Window statistics per sensor, pure DataFrame functions (streaming or static input)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


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


def window_stats(readings: DataFrame, size: str, slide: str | None = None) -> DataFrame:
    """Per sensor and event-time window: count, temperature avg/min/max, humidity avg.

    ``slide`` None gives tumbling windows of ``size``; else sliding windows.
    """
    window = F.window("event_time", size, slide) if slide else F.window("event_time", size)
    return (
        readings.groupBy("sensor_id", window.alias("window"))
        .agg(
            F.count(F.lit(1)).alias("readings"),
            F.avg("temperature_c").alias("avg_temperature_c"),
            F.min("temperature_c").alias("min_temperature_c"),
            F.max("temperature_c").alias("max_temperature_c"),
            F.avg("humidity_pct").alias("avg_humidity_pct"),
        )
        .select(
            "sensor_id",
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "readings",
            "avg_temperature_c",
            "min_temperature_c",
            "max_temperature_c",
            "avg_humidity_pct",
        )
    )
