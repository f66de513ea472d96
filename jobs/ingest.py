"""The ingest query: Kafka -> parse -> readings + quarantine (exactly once) + overheat alerts.

overheat_reading alerts are raised here, in the micro-batch that brings the reading, so
they do not wait for any watermark: this is the low-latency path.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf.settings import JobSettings
from jobs.alert_sink import detection_time, write_alerts
from jobs.alerts import overheat_alerts
from jobs.context import JobContext
from jobs.delta_io import append_once, run_together
from jobs.metrics import OUTPUT_METRICS
from jobs.parse import parse_records, to_quarantine, to_readings

QUERY = "ingest"


def kafka_records(spark: SparkSession, settings: JobSettings) -> DataFrame:
    """The topic as a stream of Kafka records (key, value, partition, offset, timestamp)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", settings.topic)
        .option("startingOffsets", settings.starting_offsets)
        # true: offsets that vanished (retention, a recreated topic) stop the job with an
        # error instead of being skipped; see fail_on_data_loss in conf/pipeline.toml.
        .option("failOnDataLoss", str(settings.fail_on_data_loss).lower())
        # Ride out a broker restart: keep asking for offsets for about a minute (Spark's
        # default gives up after 3 tries 10 ms apart, failing the query on any blip).
        .option("fetchOffset.numRetries", 60)
        .option("fetchOffset.retryIntervalMs", 1000)
    )
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    return reader.load()


def write_batch(ctx: JobContext, parsed: DataFrame, batch_id: int) -> None:
    """Write one parsed micro-batch, each table once per batch id: its overheat alerts
    first (the latency that matters), then readings and quarantine side by side."""
    lake = ctx.lake
    parsed = parsed.persist()  # read Kafka and parse once, for every output
    try:
        counts = {row.valid: row["count"] for row in parsed.groupBy(
            F.col("error").isNull().alias("valid")).count().collect()}  # fmt: skip
        ingested_at = F.lit(datetime.now(UTC)).cast("timestamp")
        app_id = f"{QUERY}-{lake.checkpoint_id(QUERY)}"
        writes = []
        if counts.get(True):
            readings = to_readings(parsed, ingested_at)
            alerts = overheat_alerts(
                readings, ctx.registry(), ctx.settings.critical_temp_c, detection_time()
            )
            found = alerts.collect()
            write_alerts(ctx.spark, found, lake.table("alerts"), app_id, batch_id, ctx.echo)
            writes.append(lambda: append_once(readings, lake.table("readings"), app_id, batch_id))
        if counts.get(False):
            quarantine = to_quarantine(parsed, ingested_at)
            writes.append(
                lambda: append_once(quarantine, lake.table("quarantine"), app_id, batch_id)
            )
        run_together(*writes)
    finally:
        parsed.unpersist()


def start_ingest(ctx: JobContext) -> StreamingQuery:
    """Start the ingest query with its checkpoint under <lake>/_checkpoints/ingest."""
    parsed = parse_records(kafka_records(ctx.spark, ctx.settings)).observe(
        OUTPUT_METRICS,
        F.count_if(F.col("error").isNull()).alias("rows"),
        F.count_if(F.col("error").isNotNull()).alias("quarantined"),
    )
    return (
        parsed.writeStream.queryName(QUERY)
        .foreachBatch(lambda batch, batch_id: write_batch(ctx, batch, batch_id))
        .option("checkpointLocation", ctx.lake.checkpoint(QUERY))
        .trigger(**ctx.trigger())
        .start()
    )
