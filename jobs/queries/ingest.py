"""The ingest query: Kafka -> parse -> readings + quarantine (exactly once) + the alerts
of the reading rules.

The rules file's ``reading`` rules (overheat_reading, battery_low, ...) are applied here,
in the micro-batch that brings the reading, so they do not wait for any watermark.

A micro-batch is one Spark job. Each of its tasks (one per executor core, each holding
whole Kafka partitions) parses its records, writes them as a new data file of
``readings`` and one of ``quarantine``, and applies the reading rules to them
(:class:`IngestTask`, jobs/alerting/reading_rules.py); the driver receives the files' descriptions
and the breached buckets only, then writes the alerts and commits both tables.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
)

from contract.times import utc_now
from jobs.alerting.alert_sink import AlertWriter, detection_moment
from jobs.alerting.reading_rules import (
    RULE_BUCKET,
    CompiledRule,
    merge_buckets,
    reading_alerts,
    rule_buckets,
)
from jobs.ingest.parse import parse_records, split_ingested, to_ingested
from jobs.ingest.source import kafka_records
from jobs.queries.context import JobContext
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.data_files import DATA_FILE, DataFileWriter, per_core, task_started
from jobs.writer.delta_io import BatchWriter, run_together
from jobs.writer.pending import uncommitted
from jobs.writer.pipeline_metrics import OUTPUT_METRICS
from jobs.writer.tables import (
    ALERTS_SCHEMA,
    PANES_SCHEMA,
    QUARANTINE_SCHEMA,
    READINGS_SCHEMA,
    columns,
)
from lake import layout
from lake.layout import Lake

QUERY = "ingest"

# What each ingest task returns: a row per data file it wrote (``table`` set), a row per
# rule, sensor and bucket with a breach (``rule`` set), and with ``count_reasons`` a row
# per quarantine reason.
TASK_RESULT = StructType(
    [
        *DATA_FILE.fields,
        *columns(ALERTS_SCHEMA, "rule sensor_id window_start observed_value readings threshold"),
        *columns(PANES_SCHEMA, "first_reading_at"),
        # A row per quarantine reason the task met (``table`` and ``sensor_id`` null): how
        # many records, for Prometheus (jobs/metrics.py), counted where they are.
        StructField("reason", StringType()),
        StructField("reason_count", LongType()),
    ]
)
TASK_RESULT_ARROW = arrow_schema(TASK_RESULT)


def update_incidents(ctx: JobContext, found: list[Row]) -> None:
    """Open or extend the incidents of the batch's reading-rule alerts (new or not: a replay
    computes the same). Resolving them is the windows query's part: it has the clock."""
    if ctx.incidents is not None and found:
        ctx.incidents.update([(r.sensor_id, r.rule, r.window_start) for r in found])


@dataclass(frozen=True)
class IngestTask:
    """What one ingest task does with its share of a micro-batch (on an executor): split
    :func:`jobs.ingest.parse.to_ingested` rows into readings and quarantine, write each to a new
    data file, and find the buckets that breach a reading rule (jobs/alerting/reading_rules.py).

    Called with the task's Arrow batches; yields :data:`TASK_RESULT` rows.
    """

    lake: Lake
    batch_id: int
    rules: tuple[CompiledRule, ...]
    count_reasons: bool = False

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        reasons: Counter[str] = Counter()
        tables = {layout.READINGS: READINGS_SCHEMA, layout.QUARANTINE: QUARANTINE_SCHEMA}
        files = {
            name: DataFileWriter(self.lake.table(name), arrow_schema(schema), self.batch_id)
            for name, schema in tables.items()
        }
        breached = [RULE_BUCKET.empty_table()]
        for batch in batches:
            readings, quarantine = split_ingested(pa.Table.from_batches([batch]))
            files[layout.READINGS].write(readings)
            files[layout.QUARANTINE].write(quarantine)
            breached.append(rule_buckets(readings, self.rules))
            if self.count_reasons and quarantine.num_rows:
                for found in pc.value_counts(quarantine["error"]).to_pylist():
                    reasons[found["values"]] += found["counts"]
        rows = [f for f in (w.close() for w in files.values()) if f is not None]
        rows += merge_buckets(pa.concat_tables(breached), self.rules).to_pylist()
        rows += [{"reason": r, "reason_count": n} for r, n in sorted(reasons.items())]
        if rows:
            yield pa.RecordBatch.from_pylist(rows, TASK_RESULT_ARROW)


def write_batch(
    ctx: JobContext, writer: BatchWriter, alerts: AlertWriter, parsed: DataFrame, batch_id: int
) -> None:
    """Write one parsed micro-batch, each table once per batch id: its reading rules'
    alerts first (the latency that matters), their incidents, then readings and quarantine
    side by side.

    The batch's one Spark job reads Kafka, parses, writes the data files and applies the
    rules, on the executors (:class:`IngestTask`); the driver merges the breached buckets
    into alerts and commits (delta-rs), without another Spark job or a cache of the batch."""
    sensors = ctx.sensors()
    rules = ctx.reading_rules(sensors)
    task = IngestTask(ctx.lake, batch_id, rules, count_reasons=ctx.metrics is not None)
    lake = ctx.lake
    # From before the first data file to the commits: VACUUM spares the batch's files
    # however long the commits wait (jobs/writer/pending.py).
    with uncommitted(lake.table(layout.READINGS), lake.table(layout.QUARANTINE)):
        ingested = to_ingested(parsed, F.lit(utc_now()))
        result = per_core(ingested).mapInArrow(task, TASK_RESULT).toArrow()
        is_file = pc.is_valid(result["table"])
        files = result.filter(is_file).select(DATA_FILE.fieldNames()).to_pylist()
        breached = result.filter(pc.is_valid(result["rule"])).select(RULE_BUCKET.names)
        hits = merge_buckets(breached, rules)
        if ctx.metrics is not None:
            counted = result.filter(pc.is_valid(result["reason"]))
            ctx.metrics.quarantined_by(
                counted["reason"].to_pylist(), counted["reason_count"].to_pylist()
            )
        found = reading_alerts(hits, rules, sensors, detection_moment())
        first_at = {
            (h["rule"], h["sensor_id"], h["window_start"]): h["first_reading_at"]
            for h in hits.to_pylist()
        }
        alerts.write(found, batch_id, ctx.echo, first_at)
        # Before the readings: when the windows query sees a reading, the incident of its
        # alert exists, so the watermark that reading moves can resolve it.
        update_incidents(ctx, found)

        def commit(table: str) -> None:
            path = lake.table(table)
            writer.commit_files([f for f in files if f["table"] == path], path, batch_id)

        run_together(lambda: commit(layout.READINGS), lambda: commit(layout.QUARANTINE))


def start_ingest(ctx: JobContext) -> StreamingQuery:
    """Start the ingest query with its checkpoint under <lake>/_checkpoints/ingest."""
    error = F.col("error")
    parsed = parse_records(kafka_records(ctx.spark, ctx.settings)).observe(
        OUTPUT_METRICS,
        F.count_if(error.isNull()).alias("rows"),
        F.count_if(error.isNotNull()).alias("quarantined"),
    )
    checkpoint = ctx.checkpoint(QUERY)
    writer = BatchWriter(ctx.spark, ctx.lake, QUERY, ctx.metrics)
    alerts = AlertWriter(writer, ctx.rule_names("reading"), traits=ctx.rule_traits)
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
