"""The bridge's Prometheus metrics (docs/metrics.md), served at its /metrics
(telemetry/endpoint.py): messages received from MQTT, forwarded to Kafka (confirmed) and
acknowledged back, what is in flight and how long the oldest has waited, errors by kind,
and the forward latency. The engine counts them (bridge/engine/stats.go) and reports
them several times a second; each scrape reads the latest report (the tally)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# What sensorwatch_bridge_errors_total counts, by kind (each exported from the start).
KAFKA_DELIVERY = "kafka_delivery"  # Kafka refused a record: it is sent again, not acknowledged
KAFKA_UNREACHABLE = "kafka_unreachable"  # an outage began: no broker of Kafka answers
MQTT_CONNECTION = "mqtt_connection"  # the MQTT connection was lost or a connect refused
TOPIC_WITHOUT_SENSOR = "topic_without_sensor"  # forwarded with an empty key
ERROR_KINDS = (KAFKA_DELIVERY, KAFKA_UNREACHABLE, MQTT_CONNECTION, TOPIC_WITHOUT_SENSOR)

# Seconds from a message's arrival at the bridge to Kafka's confirmation.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@dataclass
class Tally:
    """The bridge's counts, as the engine's latest report gave them."""

    received: int = 0
    redelivered: int = 0
    forwarded: int = 0
    acknowledged: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    mqtt_connected: bool = False
    kafka_reachable: bool = True
    in_flight: int = 0
    oldest_age: float = 0.0  # seconds the oldest unacknowledged message has waited
    # The forward latency: counts per bucket of LATENCY_BUCKETS (not cumulative), the
    # last one above the last bound, and their sum of seconds.
    latency_counts: tuple[int, ...] = (0,) * (len(LATENCY_BUCKETS) + 1)
    latency_sum: float = 0.0

    @classmethod
    def from_report(cls, report: dict[str, Any]) -> Tally:
        """The tally of an engine's stats line (bridge/engine/stats.go, report)."""
        return cls(
            received=report["received"],
            redelivered=report["redelivered"],
            forwarded=report["forwarded"],
            acknowledged=report["acknowledged"],
            errors=Counter(report["errors"] or {}),
            mqtt_connected=report["mqtt_connected"],
            kafka_reachable=report["kafka_reachable"],
            in_flight=report["in_flight"],
            oldest_age=report["oldest_age"],
            latency_counts=tuple(report["latency_counts"]),
            latency_sum=report["latency_sum"],
        )


class BridgeCollector(Collector):
    """The latest tally, read at each scrape."""

    def __init__(self, tally: Callable[[], Tally]) -> None:
        self.tally = tally

    def collect(self) -> Iterator[Metric]:
        tally = self.tally()
        prefix = "sensorwatch_bridge_"
        for name, text, value in (
            ("messages_received", "Messages received from MQTT", tally.received),
            (
                "messages_redelivered",
                "Messages the MQTT broker sent again (unacknowledged before a reconnect)",
                tally.redelivered,
            ),
            ("messages_forwarded", "Messages Kafka confirmed", tally.forwarded),
            (
                "messages_acknowledged",
                "Messages acknowledged to MQTT (after Kafka confirmed them and those before)",
                tally.acknowledged,
            ),
        ):
            yield CounterMetricFamily(prefix + name, text, value=value)
        errors = CounterMetricFamily(prefix + "errors", "Errors by kind", labels=["kind"])
        for kind in sorted({*ERROR_KINDS, *tally.errors}):
            errors.add_metric([kind], tally.errors[kind])
        yield errors
        yield GaugeMetricFamily(
            prefix + "messages_in_flight",
            "Messages received and not yet acknowledged to MQTT",
            value=tally.in_flight,
        )
        yield GaugeMetricFamily(
            prefix + "oldest_unacknowledged_age_seconds",
            "How long the oldest unacknowledged message has waited (0: none waits)",
            value=tally.oldest_age,
        )
        yield GaugeMetricFamily(
            prefix + "mqtt_connected", "1 while connected to the MQTT broker",
            value=int(tally.mqtt_connected),
        )  # fmt: skip
        yield GaugeMetricFamily(
            prefix + "kafka_reachable", "0 while Kafka is reported unreachable",
            value=int(tally.kafka_reachable),
        )  # fmt: skip
        cumulative, buckets = 0, []
        bounds = (*LATENCY_BUCKETS, float("inf"))
        for bound, count in zip(bounds, tally.latency_counts, strict=True):
            cumulative += count
            buckets.append((floatToGoString(bound), cumulative))
        yield HistogramMetricFamily(
            prefix + "forward_seconds",
            "Seconds from a message's arrival at the bridge to Kafka's confirmation",
            buckets=buckets,
            sum_value=tally.latency_sum,
        )


def bridge_registry(tally: Callable[[], Tally]) -> CollectorRegistry:
    """A registry holding the bridge's metrics, read from ``tally()`` at each scrape."""
    registry = CollectorRegistry()
    registry.register(BridgeCollector(tally))
    return registry
