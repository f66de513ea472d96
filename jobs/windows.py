"""The statistics queries: readings (Delta stream) -> dedup -> windows -> sensor_stats_*."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf.settings import JobSettings
from jobs.metrics import OUTPUT_METRICS
from jobs.stats import deduplicate, window_stats
from jobs.tables import Lake

# Query (and table) name -> (window size, slide; None for tumbling windows).
WINDOWS: dict[str, tuple[str, str | None]] = {
    "sensor_stats_1m": ("1 minute", None),
    "sensor_stats_5m": ("5 minutes", "1 minute"),
}


def start_window_stats(
    spark: SparkSession,
    settings: JobSettings,
    lake: Lake,
    name: str,
    trigger: dict[str, object],
) -> StreamingQuery:
    """Start one statistics query; append mode writes each window once, when it closes.

    It reads the readings table rather than Kafka: records are parsed once, and the
    table is the record of what was ingested. The Delta sink is exactly-once by itself.
    """
    size, slide = WINDOWS[name]
    readings = spark.readStream.format("delta").load(lake.table("readings"))
    stats = window_stats(deduplicate(readings, settings.watermark_delay), size, slide).observe(
        OUTPUT_METRICS, F.count(F.lit(1)).alias("rows")
    )
    return (
        stats.writeStream.queryName(name)
        .format("delta")
        .outputMode("append")
        .option("checkpointLocation", lake.checkpoint(name))
        .trigger(**trigger)
        .start(lake.table(name))
    )
