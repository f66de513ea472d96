"""The windows query: readings (Delta stream) -> deduplicate once -> one-minute panes ->
sensor_stats_1m, sensor_stats_5m, and the alerts of the window, stuck and absence rules
(sustained_high, humidity_high, sensor_silent, ...).

Every reading is deduplicated once and aggregated once, into its pane (jobs/windows/panes.py);
Spark emits a pane when the watermark closes its minute. Each micro-batch then knows,
from its checkpoint, the range of watermarks ``(after, until]`` it covers, and writes
exactly what closed in that range: its panes (``sensor_stats_1m`` and the internal
``_panes``), the 5-minute windows ending in it (from its panes and the ones before, read
back from ``_panes``), the window rules' alerts of both (jobs/alerting/window_rules.py), and the
silences decided in it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from jobs.alerting.alert_sink import AlertWriter, detection_time
from jobs.alerting.incident_sink import silence_readings
from jobs.alerting.learned_rules import LEARNED_KINDS, learned_results, learned_rules, rate_reach
from jobs.alerting.window_rules import absence_alerts, longest_absence, window_alerts
from jobs.queries.context import JobContext
from jobs.spark.checkpoints import batch_watermark, has_committed
from jobs.windows.panes import (
    PANES_PER_WINDOW,
    as_stats,
    deduplicate,
    measures_1m,
    measures_5m,
    panes,
    stats_1m,
)
from jobs.windows.source import source_options
from jobs.writer.delta_io import BatchWriter, collect_rows, run_together
from jobs.writer.pipeline_metrics import OUTPUT_METRICS
from lake.layout import BASELINES, PANES, READINGS, SENSOR_STATS_1M, SENSOR_STATS_5M

QUERY = "windows"


def history_horizon(ctx: JobContext) -> timedelta:
    """How far before a batch's first watermark its results may reach back: a 5-minute
    window's first pane, the last reading before a silence (plus its pane), or what a
    rate rule fits its slope to."""
    window = timedelta(minutes=PANES_PER_WINDOW)
    silence = timedelta(seconds=longest_absence(ctx.rule_set.rules))
    rate = rate_reach(learned_rules(ctx.rule_set, {}))
    return max(window, silence, rate) + timedelta(minutes=2)


def earlier_panes(ctx: JobContext, after: datetime) -> DataFrame:
    """The panes closed before ``after`` that windows or silences closing now may need."""
    table = ctx.spark.read.format("delta").load(ctx.lake.table(PANES))
    since = after - history_horizon(ctx)
    # window_start bounds let Delta skip every older file by its statistics.
    return table.filter((F.col("window_start") > F.lit(since)) & (F.col("window_end") <= after))


def update_incidents(
    ctx: JobContext, found: list[Row], watermark: datetime, known: DataFrame
) -> None:
    """Bring the incidents up to date with the batch's alerts and its watermark (the clock
    that resolves episodes); a silence resolves at its sensor's first reading after it."""
    if ctx.incidents is None:
        return
    silent = ctx.incidents.silent_sensors((r.sensor_id, r.rule, r.window_start) for r in found)
    readings = {}
    if silent:
        panes = known.filter(F.col("sensor_id").isin(sorted(silent)))
        readings = silence_readings(collect_rows(panes.select("sensor_id", "first_reading_at")))
    keys = [(r.sensor_id, r.rule, r.window_start) for r in found]
    ctx.incidents.update(keys, watermark, readings)


def write_batch(
    ctx: JobContext,
    writer: BatchWriter,
    alerts: AlertWriter,
    closed: DataFrame,
    batch_id: int,
) -> None:
    """Write what the watermark closed in this micro-batch, each table once per batch id:
    alerts first (the latency that matters), then the incidents and the three tables side
    by side."""
    # Always run the batch's plan: that is what commits the dedup and pane state.
    new = closed.persist()
    count = new.count()
    checkpoint = ctx.lake.checkpoint(QUERY)
    after, until = batch_watermark(checkpoint, batch_id - 1), batch_watermark(checkpoint, batch_id)
    if until is None or until == after:
        new.unpersist()
        return  # the watermark did not move: nothing closed (and no pane was emitted)
    lake = ctx.lake
    # ``new`` is cached already; only a union with earlier panes needs caching of its own.
    known = new if after is None else new.unionByName(earlier_panes(ctx, after)).persist()
    m5 = measures_5m(known, after, until).persist()
    judged = None
    try:
        detected_at = detection_time()
        registry = ctx.registry()
        rules = ctx.window_rules()
        raised = window_alerts(measures_1m(new), "1m", rules, registry, detected_at).unionByName(
            window_alerts(m5, "5m", rules, registry, detected_at)
        )
        silent = absence_alerts(
            known, rules, registry, ctx.registry_cache.enabled, after, until, detected_at
        )
        if silent is not None:
            raised = raised.unionByName(silent)
        learned = learned_rules(ctx.rule_set, ctx.sensors())
        if learned and count:
            # The earlier panes ``known`` holds (cached): no second read of _panes.
            earlier = None if after is None else known.filter(F.col("window_end") <= after)
            baselines = ctx.spark.read.format("delta").load(lake.table(BASELINES))
            judged = learned_results(
                learned, new, earlier, baselines, registry, detected_at, writer.app_id, batch_id
            )
            raised = raised.unionByName(judged.alerts)
        found = collect_rows(raised)
        alerts.write(found, batch_id, ctx.echo)
        writes = [lambda: update_incidents(ctx, found, until, known)]
        if judged is not None:
            moved = judged.baselines
            writes.append(lambda: writer.append(moved, lake.table(BASELINES), batch_id))
        if count:
            writes.append(lambda: writer.append(new, lake.table(PANES), batch_id))
            writes.append(
                lambda: writer.append(stats_1m(new), lake.table(SENSOR_STATS_1M), batch_id)
            )
        if not m5.isEmpty():
            writes.append(
                lambda: writer.append(as_stats(m5), lake.table(SENSOR_STATS_5M), batch_id)
            )
        run_together(*writes)
    finally:
        if judged is not None:
            judged.release()
        m5.unpersist()
        known.unpersist()
        new.unpersist()


def start_windows(ctx: JobContext) -> StreamingQuery:
    """Start the windows query with its checkpoint under <lake>/_checkpoints/windows.

    It reads the readings table rather than Kafka: records are parsed once, and the table
    is the record of what was ingested.
    """
    checkpoint = ctx.checkpoint(QUERY)
    table = ctx.lake.table(READINGS)
    readings = (
        ctx.spark.readStream.format("delta")
        .options(**source_options(table, new_query=not has_committed(checkpoint)))
        .load(table)
    )
    closed = panes(deduplicate(readings, ctx.settings.watermark_delay))
    closed = closed.observe(OUTPUT_METRICS, F.count(F.lit(1)).alias("rows"))
    writer = BatchWriter(ctx.spark, ctx.lake, QUERY, ctx.metrics)
    alerts = AlertWriter(
        writer,
        ctx.rule_names("window", "stuck", "absence", *LEARNED_KINDS),
        traits=ctx.rule_traits,
    )
    return (
        closed.writeStream.queryName(QUERY)
        .outputMode("append")
        .foreachBatch(
            ctx.foreach_batch(
                QUERY, lambda df, batch_id: write_batch(ctx, writer, alerts, df, batch_id)
            )
        )
        .option("checkpointLocation", checkpoint)
        .trigger(**ctx.trigger(readers=True))
        .start()
    )
