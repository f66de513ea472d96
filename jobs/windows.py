"""The statistics queries: readings (Delta stream) -> dedup -> windows -> sensor_stats_*.

sensor_stats_5m also raises sustained_high alerts: its micro-batches hold exactly the
windows the watermark has just closed.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.alert_sink import detection_time, write_alerts
from jobs.alerts import sustained_alerts
from jobs.context import JobContext
from jobs.delta_io import append_once
from jobs.metrics import OUTPUT_METRICS
from jobs.stats import deduplicate, window_stats

# Query (and table) name -> (window size, slide; None for tumbling windows).
WINDOWS: dict[str, tuple[str, str | None]] = {
    "sensor_stats_1m": ("1 minute", None),
    "sensor_stats_5m": ("5 minutes", "1 minute"),
}


def write_stats_5m(ctx: JobContext, stats: DataFrame, batch_id: int) -> None:
    """Write closed 5-minute windows once per batch id, then their sustained_high alerts."""
    name = "sensor_stats_5m"
    stats = stats.persist()
    try:
        if stats.isEmpty():
            return
        app_id = f"{name}-{ctx.lake.checkpoint_id(name)}"
        append_once(stats, ctx.lake.table(name), app_id, batch_id)
        detected, detected_at = detection_time()
        settings = ctx.settings
        alerts = sustained_alerts(
            stats, ctx.registry(), settings.warning_temp_c, settings.sustained_min_readings,
            detected_at,
        )  # fmt: skip
        write_alerts(ctx.spark, alerts, ctx.lake.table("alerts"), detected, ctx.echo)
    finally:
        stats.unpersist()


def start_window_stats(ctx: JobContext, name: str) -> StreamingQuery:
    """Start one statistics query; append mode emits each window once, when it closes.

    It reads the readings table rather than Kafka: records are parsed once, and the
    table is the record of what was ingested. sensor_stats_1m uses the Delta sink
    (exactly once by itself); sensor_stats_5m writes in foreachBatch for its alerts.
    """
    size, slide = WINDOWS[name]
    readings = ctx.spark.readStream.format("delta").load(ctx.lake.table("readings"))
    stats = window_stats(deduplicate(readings, ctx.settings.watermark_delay), size, slide)
    stats = stats.observe(OUTPUT_METRICS, F.count(F.lit(1)).alias("rows"))
    writer = (
        stats.writeStream.queryName(name)
        .outputMode("append")
        .option("checkpointLocation", ctx.lake.checkpoint(name))
        .trigger(**ctx.trigger(readers=True))
    )
    if name == "sensor_stats_5m":
        return writer.foreachBatch(
            lambda batch, batch_id: write_stats_5m(ctx, batch, batch_id)
        ).start()
    return writer.format("delta").start(ctx.lake.table(name))
