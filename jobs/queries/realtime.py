"""The realtime query: Kafka ``sensor-readings`` -> parse and validate -> the reading rules
with their thresholds (a broadcast join) -> one message per reading that breaches a rule
on the Kafka topic ``sensor-alerts``, in Spark's real-time mode.

Real-time mode runs one long-lived task per Kafka partition that handles each record as
it arrives (milliseconds), committing to the checkpoint once per interval
(``realtime_checkpoint_interval``; not a latency). It allows a Kafka source and sink,
Spark SQL expressions and broadcast stream-static joins: no Python on the hot path, no
aggregation, no Delta. So the rules here are the per-reading form of the ingest query's
(jobs/alerting/reading_rules.py), with the same alert_id (sensor, rule, 1-minute bucket):
the lake path still writes one ``alerts`` row per bucket, exactly once; the topic gets
every hot reading, at least once (a restart replays the interval since the last
checkpoint), and a consumer deduplicates by the message key, the alert_id.

In an ``availableNow`` run the same query runs as a micro-batch and exits with the others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from conf.kafka_client import spark_options
from jobs.alerting.alert_columns import (
    alert_id,
    breached,
    threshold_of,
    thresholds_frame,
    with_registry,
)
from jobs.alerting.reading_rules import CompiledRule
from jobs.ingest.parse import parse_records
from jobs.ingest.source import kafka_records
from jobs.queries.context import JobContext
from jobs.spark.checkpoints import uncommitted_batch
from jobs.writer.tables import ALERTS_SCHEMA

QUERY = "realtime"


def wall_clock() -> Column:
    """The moment a row is computed, per row, in Spark SQL.

    ``current_timestamp()`` is fixed when a batch is planned, and a real-time batch lasts
    the whole checkpoint interval: detected_at would lag by up to that long. Java's clock,
    called by ``reflect`` for each row, does not (and needs no Python)."""
    millis = F.reflect(F.lit("java.lang.System"), F.lit("currentTimeMillis")).cast("long")
    return F.timestamp_millis(millis)


def rule_messages(
    parsed: DataFrame,
    rules: Sequence[CompiledRule],
    thresholds: DataFrame,
    registry: DataFrame,
    detected_at: Column,
    judged_before: datetime | None = None,
) -> DataFrame:
    """:func:`jobs.ingest.parse.parse_records` rows -> one Kafka message per valid reading and
    reading rule it breaches, by the rule's threshold for its sensor (``thresholds``:
    :func:`jobs.alerting.alert_columns.thresholds_frame` of ``rules``).

    Each reading becomes a row per rule (an ``explode`` of the rules as literals), which
    the broadcast join gives its sensor's threshold: no union, one scan of the topic.
    ``key``: the alert_id; ``value``: JSON with the alerts table's columns (``readings``
    is 1, ``observed_value`` the reading's value) and the reading's Kafka timestamp
    (``reading_at``), from which a consumer can tell the path's latency.

    ``judged_before``: readings whose Kafka time is earlier are left out. After an edit
    of the rules or the registry, the query starts again on its checkpoint and reads what
    came since its last commit (up to ``realtime_checkpoint_interval``) once more: the
    path judged those readings already, by the rules then in force, as the lake path
    does, and the new rules are not to judge them again.
    """
    readings = parsed.filter(F.col("error").isNull())
    if judged_before is not None:
        readings = readings.filter(F.col("kafka_timestamp") >= F.lit(judged_before))
    each = [
        F.struct(
            F.lit(rule.name).alias("rule"),
            F.lit(rule.severity).alias("severity"),
            F.lit(rule.op).alias("op"),
            F.col(str(rule.field)).cast("double").alias("value"),
            F.lit(rule.unregistered).cast("double").alias("default_threshold"),
        )
        for rule in rules
    ]
    checked = readings.select("*", F.explode(F.array(*each)).alias("checked"))
    checked = checked.select("*", "checked.*").drop("checked")
    joined = checked.join(F.broadcast(thresholds), ["rule", "sensor_id"], "left")
    threshold = threshold_of(F.col("default_threshold"))
    start = F.date_trunc("minute", F.col("event_time"))
    hot = with_registry(joined, registry).filter(
        threshold.isNotNull() & breached(F.col("op"), F.col("value"), threshold)
    )
    values = {
        "alert_id": alert_id(F.col("sensor_id"), F.col("rule"), start),
        "sensor_id": F.col("sensor_id"),
        "site": F.col("site"),
        "rule": F.col("rule"),
        "severity": F.col("severity"),
        "window_start": start,
        "window_end": start + F.expr("INTERVAL 1 MINUTE"),
        "observed_value": F.col("value"),
        "threshold": threshold,
        "readings": F.lit(1),
        "detected_at": detected_at,
    }
    columns = [values[f.name].cast(f.dataType).alias(f.name) for f in ALERTS_SCHEMA.fields]
    message = F.struct(*columns, F.col("kafka_timestamp").alias("reading_at"))
    return hot.select(
        values["alert_id"].alias("key"), F.to_json(message, {"timestampFormat": ISO}).alias("value")
    )


# Instants in the messages as the event's own: ISO-8601, milliseconds, UTC with a Z.
ISO = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"


def start_realtime(ctx: JobContext, judged_before: datetime | None = None) -> StreamingQuery:
    """Start the realtime query with its checkpoint under <lake>/_checkpoints/realtime;
    ``judged_before``: see :func:`rule_messages`."""
    settings = ctx.settings
    checkpoint = ctx.checkpoint(QUERY)
    rules = ctx.reading_rules(ctx.sensors())
    messages = rule_messages(
        # Unbounded: a real-time batch reads for its whole interval, waiting for records
        # (an availableNow run is a micro-batch: it reads a known range).
        parse_records(
            kafka_records(ctx.spark, settings, bounded=False, ranged=settings.available_now)
        ),
        rules,
        thresholds_frame(ctx.spark, rules),
        ctx.registry_frame(),
        wall_clock(),
        judged_before,
    )
    writer = (
        messages.writeStream.queryName(QUERY)
        .format("kafka")
        .options(**spark_options(settings))
        .option("topic", settings.alerts_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("update")
    )
    if settings.available_now:
        return writer.trigger(availableNow=True).start()
    unfinished = uncommitted_batch(checkpoint)
    if unfinished is not None and ctx.echo:
        # Spark's own warning about it is dropped (conf/log4j2.properties): this says it.
        ctx.echo(
            f"realtime: batch {unfinished} was not committed before the last stop; the path "
            f"runs it again, so the alerts it sent reach {settings.alerts_topic} again "
            "(consumers keep one per alert_id)"
        )
    return writer.trigger(realTime=settings.realtime_checkpoint_interval).start()


_LOCAL = re.compile(r"^local(\[(?P<threads>\d+|\*)(?P<failures>,\d+)?\])?$")


@dataclass(frozen=True)
class LocalSlots:
    """Local mode sized for both paths: ``master`` to start, ``lake`` slots of it for the
    micro-batch queries (the others are the real-time path's)."""

    master: str
    lake: int


def local_slots(master: str, partitions: int, cores: int | None = None) -> LocalSlots | None:
    """``master`` with one more task slot per topic partition, for a local master
    (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``); None for any other.

    local[N] keeps meaning N slots for the lake path: the real-time query holds one slot
    per partition for as long as it runs, and Spark's local mode counts slots, not CPUs.
    """
    found = _LOCAL.match(master.strip())
    if found is None:
        return None
    threads = found["threads"] or "1"
    base = (cores or os.cpu_count() or 1) if threads == "*" else int(threads)
    return LocalSlots(f"local[{base + partitions}{found['failures'] or ''}]", base)


def missing_slots(slots: int, partitions: int) -> int:
    """How many task slots the real-time path and the lake path lack together: one per
    partition, held for good, and at least one more for the micro-batches."""
    return max(0, partitions + 1 - slots)
