"""The ingest query: Kafka -> parse -> readings + quarantine (exactly once) + overheat alerts.

overheat_reading alerts are raised here, in the micro-batch that brings the reading, so
they do not wait for any watermark: this is the low-latency path.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf.settings import JobSettings
from contract.alerts import OVERHEAT
from contract.times import utc_now
from jobs.alert_sink import AlertWriter, detection_moment
from jobs.context import JobContext
from jobs.delta_io import BatchWriter, run_together
from jobs.metrics import OUTPUT_METRICS
from jobs.overheat import overheat_alerts, overheat_hits
from jobs.parse import parse_records, split_ingested, to_ingested

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


def update_incidents(ctx: JobContext, found: list[Row]) -> None:
    """Open or extend the incidents of the batch's overheat alerts (new or not: a replay
    computes the same). Resolving them is the windows query's part: it has the clock."""
    if ctx.incidents is not None and found:
        ctx.incidents.update([(r.sensor_id, r.rule, r.window_start) for r in found])


def write_batch(
    ctx: JobContext, writer: BatchWriter, alerts: AlertWriter, parsed: DataFrame, batch_id: int
) -> None:
    """Write one parsed micro-batch, each table once per batch id: its overheat alerts
    first (the latency that matters), their incidents, then readings and quarantine side
    by side.

    The batch's one Spark job reads Kafka, parses, and hands every record to the driver
    as Arrow; the rule and the commits (delta-rs) run there, without another Spark job
    or a cache of the batch."""
    ingested_at = F.lit(utc_now())
    batch = to_ingested(parsed, ingested_at).toArrow()
    readings, quarantine = split_ingested(batch)
    sensors = ctx.sensors()
    hits = overheat_hits(readings, sensors, ctx.settings.critical_temp_c)
    found = overheat_alerts(hits, sensors, detection_moment())
    alerts.write(found, batch_id, ctx.echo)
    # Before the readings: when the windows query sees a reading, the incident of its
    # alert exists, so the watermark that reading moves can resolve it.
    update_incidents(ctx, found)
    lake = ctx.lake
    run_together(
        lambda: writer.append_arrow(readings, lake.table("readings"), batch_id),
        lambda: writer.append_arrow(quarantine, lake.table("quarantine"), batch_id),
    )


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
        .foreachBatch(
            ctx.foreach_batch(
                QUERY, lambda df, batch_id: write_batch(ctx, writer, alerts, df, batch_id)
            )
        )
        .option("checkpointLocation", checkpoint)
        .trigger(**ctx.trigger())
        .start()
    )
