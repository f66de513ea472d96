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
from jobs.alert_sink import AlertWriter, detection_moment
from jobs.alerts import OVERHEAT, overheat_alerts, overheat_candidates, overheat_groups
from jobs.context import JobContext
from jobs.delta_io import BatchWriter, run_together
from jobs.metrics import OUTPUT_METRICS
from jobs.parse import parse_records, to_quarantine, to_readings

QUERY = "ingest"

# At most this many readings over their threshold are brought to the driver one by one;
# beyond it the batch's overheat candidates are grouped by alert in Spark first.
DRIVER_CANDIDATES = 10_000


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


def raw_for_errors_only(parsed: DataFrame) -> DataFrame:
    """Drop the raw text of valid records (only quarantine keeps it): the cached batch is
    then a fraction of the size."""
    return parsed.withColumn("raw_value", F.when(F.col("error").isNotNull(), F.col("raw_value")))


def write_batch(
    ctx: JobContext, writer: BatchWriter, alerts: AlertWriter, parsed: DataFrame, batch_id: int
) -> None:
    """Write one parsed micro-batch, each table once per batch id: its overheat alerts
    first (the latency that matters), then readings and quarantine side by side."""
    lake = ctx.lake
    parsed = raw_for_errors_only(parsed).persist()  # read Kafka and parse once, for all
    try:
        ingested_at = F.lit(datetime.now(UTC)).cast("timestamp")
        readings = to_readings(parsed, ingested_at)
        sensors, threshold = ctx.overheat_inputs()
        # The batch's first Spark job reads Kafka, parses, fills the cache and brings back
        # the few readings over their threshold; nothing else runs before their alerts
        # are written.
        candidates = overheat_candidates(readings, threshold)
        hot = candidates.limit(DRIVER_CANDIDATES + 1).collect()
        if len(hot) > DRIVER_CANDIDATES:  # a backlog or a site-wide heat wave
            hot = overheat_groups(candidates).collect()
        found = overheat_alerts(hot, sensors, detection_moment())
        alerts.write(found, batch_id, ctx.echo)
        # Only then the batch's two tables, side by side, each from the cache (an empty
        # one commits nothing).
        bad = to_quarantine(parsed, ingested_at)
        run_together(
            lambda: writer.append(readings, lake.table("readings"), batch_id),
            lambda: writer.append(bad, lake.table("quarantine"), batch_id),
        )
    finally:
        parsed.unpersist()


def start_ingest(ctx: JobContext) -> StreamingQuery:
    """Start the ingest query with its checkpoint under <lake>/_checkpoints/ingest."""
    parsed = parse_records(kafka_records(ctx.spark, ctx.settings)).observe(
        OUTPUT_METRICS,
        F.count_if(F.col("error").isNull()).alias("rows"),
        F.count_if(F.col("error").isNotNull()).alias("quarantined"),
    )
    checkpoint = ctx.lake.checkpoint(QUERY)
    writer = BatchWriter(ctx.spark, ctx.lake, QUERY)
    alerts = AlertWriter(writer, (OVERHEAT,))
    return (
        parsed.writeStream.queryName(QUERY)
        .foreachBatch(lambda batch, batch_id: write_batch(ctx, writer, alerts, batch, batch_id))
        .option("checkpointLocation", checkpoint)
        .trigger(**ctx.trigger())
        .start()
    )
