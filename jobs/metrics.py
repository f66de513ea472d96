"""The job's Prometheus metrics (docs/metrics.md), served at its /metrics
(telemetry/endpoint.py).

Per query, from the same progress events as ``pipeline_metrics`` (jobs/writer/pipeline_metrics.py):
batch duration, rows in and written, rows/s, records behind the topic's end per
partition, watermark delay, state rows, and when it last reported (a progress, or
Spark's idle event when it has nothing to do: so the time since grows only when a query
is stuck). From the driver's own work: records quarantined by reason, alerts raised by
rule and severity, the lake path's alert latency, commit duration per table, and the
lake's lease.

Counters count what this process did: a batch replayed after a crash counts again in the
new process, as Prometheus expects of a restarted target (its rate() sees the reset).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql import Row

from telemetry.alert_latency import LAKE, alert_latency

# Bucket bounds, in seconds, around what each measures on a laptop and a cluster alike.
BATCH_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
COMMIT_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _SinceProgress(Collector):
    """sensorwatch_seconds_since_progress, computed when Prometheus scrapes."""

    def __init__(self, last: Mapping[str, float], clock: Callable[[], float]) -> None:
        self.last, self.clock = last, clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "sensorwatch_seconds_since_progress",
            "Seconds since the query last reported progress or idleness (grows only when "
            "it is stuck)",
            labels=["query"],
        )
        now = self.clock()
        for query, at in sorted(self.last.items()):
            family.add_metric([query], max(0.0, now - at))
        yield family


def _kafka_offsets(offsets: Any) -> dict[tuple[str, str], int]:
    """(topic, partition) -> offset of a Kafka source's progress offsets; nothing for
    another source's (a Delta table's version)."""
    found: dict[tuple[str, str], int] = {}
    if not isinstance(offsets, dict):
        return found
    for topic, partitions in offsets.items():
        if not isinstance(partitions, dict):
            return {}
        for partition, offset in partitions.items():
            if not isinstance(offset, int):
                return {}
            found[(topic, str(partition))] = offset
    return found


def records_behind(progress: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    """(topic, partition) -> records between what the batch read up to and the
    partition's end when it was planned, for each Kafka source of a progress."""
    behind: dict[tuple[str, str], int] = {}
    for source in progress.get("sources") or []:
        end = _kafka_offsets(source.get("endOffset"))
        latest = _kafka_offsets(source.get("latestOffset"))
        for key, offset in latest.items():
            if key in end:
                behind[key] = max(0, offset - end[key])
    return behind


class JobMetrics:
    """The job's metrics in a registry of their own (one per job: tests run several)."""

    def __init__(
        self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.batch_duration = Histogram(
            "sensorwatch_batch_duration_seconds",
            "Micro-batch duration (Spark's triggerExecution)",
            ["query"],
            buckets=BATCH_SECONDS,
            registry=r,
        )
        self.trigger_interval = Gauge(
            "sensorwatch_trigger_interval_seconds",
            "The query's processing-time trigger: a batch slower than it falls behind",
            ["query"],
            registry=r,
        )
        self.input_rows = Counter(
            "sensorwatch_input_rows", "Rows the query read", ["query"], registry=r
        )
        self.output_rows = Counter(
            "sensorwatch_output_rows", "Rows the query wrote", ["query"], registry=r
        )
        self.rows_per_second = Gauge(
            "sensorwatch_processed_rows_per_second",
            "Rows per second of the query's last batch",
            ["query"],
            registry=r,
        )
        self.behind = Gauge(
            "sensorwatch_kafka_records_behind",
            "Records between what the query read up to and the partition's end",
            ["query", "topic", "partition"],
            registry=r,
        )
        self.watermark_delay = Gauge(
            "sensorwatch_watermark_delay_seconds",
            "How far the query's event-time watermark lags its last batch's start",
            ["query"],
            registry=r,
        )
        self.state_rows = Gauge(
            "sensorwatch_state_rows", "Rows in the query's state store", ["query"], registry=r
        )
        self.last_progress = Gauge(
            "sensorwatch_last_progress_timestamp_seconds",
            "When the query last reported progress or idleness (Unix time)",
            ["query"],
            registry=r,
        )
        self._last: dict[str, float] = {}
        self._clock = clock
        r.register(_SinceProgress(self._last, clock))
        self.quarantined = Counter(
            "sensorwatch_quarantined_records",
            "Records written to the quarantine table, by reason",
            ["reason"],
            registry=r,
        )
        self.alerts = Counter(
            "sensorwatch_alerts",
            "Alerts raised (new rows of the alerts table), by rule and severity",
            ["rule", "severity"],
            registry=r,
        )
        self.alert_latency = alert_latency(r)
        self.commit_duration = Histogram(
            "sensorwatch_commit_duration_seconds",
            "Time to commit one micro-batch to one Delta table",
            ["table"],
            buckets=COMMIT_SECONDS,
            registry=r,
        )
        self.lease_held = Gauge(
            "sensorwatch_lake_lease_held",
            "1 while the job holds its lake's lease, 0 while it waits as a standby",
            registry=r,
        )
        self.lease_takeovers = Counter(
            "sensorwatch_lake_lease_takeovers",
            "Times the job took its lake over from a holder that stopped renewing or died",
            registry=r,
        )

    def triggers(self, intervals: Mapping[str, float]) -> None:
        """Each query's processing-time trigger, in seconds."""
        for query, seconds in intervals.items():
            self.trigger_interval.labels(query).set(seconds)

    def progress(self, progress: Mapping[str, Any], row: Mapping[str, Any]) -> None:
        """A query's progress event (its JSON object) and its pipeline_metrics row."""
        query = row["query"]
        self.batch_duration.labels(query).observe(row["batch_duration_ms"] / 1000)
        self.input_rows.labels(query).inc(row["input_rows"])
        self.output_rows.labels(query).inc(row["output_rows"])
        self.rows_per_second.labels(query).set(row["processed_rows_per_second"])
        self.state_rows.labels(query).set(row["state_rows"])
        watermark: datetime | None = row["watermark"]
        if watermark is not None and watermark.timestamp() > 0 and row["timestamp"]:
            delay = (row["timestamp"] - watermark).total_seconds()
            self.watermark_delay.labels(query).set(max(0.0, delay))
        for (topic, partition), count in records_behind(progress).items():
            self.behind.labels(query, topic, partition).set(count)
        self.reported(query)

    def quarantined_by(self, reasons: Iterable[str], counts: Iterable[int]) -> None:
        """Records a batch quarantined, by reason (counted by the ingest tasks)."""
        for reason, count in zip(reasons, counts, strict=True):
            self.quarantined.labels(reason).inc(count)

    def reported(self, query: str) -> None:
        """The query reported (progress or idleness) just now."""
        self._last[query] = self._clock()
        self.last_progress.labels(query).set(self._last[query])

    def committed(self, table: str, seconds: float) -> None:
        """One table's commit of one micro-batch took ``seconds``."""
        self.commit_duration.labels(table).observe(seconds)

    def raised(
        self,
        alerts: Sequence[Row],
        first_reading_at: Mapping[tuple[str, str, datetime], datetime] | None = None,
        now: datetime | None = None,
    ) -> None:
        """New alerts written; for those in ``first_reading_at`` (by rule, sensor and
        window start: the reading rules' alerts) also the latency from that moment to
        ``now``."""
        for alert in alerts:
            self.alerts.labels(alert.rule, alert.severity).inc()
            at = (first_reading_at or {}).get((alert.rule, alert.sensor_id, alert.window_start))
            if at is not None and now is not None:
                self.alert_latency.labels(LAKE).observe(max(0.0, (now - at).total_seconds()))

    def holds_lake(self, held: bool) -> None:
        """Whether the job holds its lake (False: it waits as a standby)."""
        self.lease_held.set(1 if held else 0)

    def took_over(self) -> None:
        """The job took its lake over from another holder."""
        self.lease_takeovers.inc()
