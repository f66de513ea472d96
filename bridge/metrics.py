"""The bridge's Prometheus metrics (docs/metrics.md), served at its /metrics
(telemetry/endpoint.py): messages received from MQTT, forwarded to Kafka (confirmed) and
acknowledged back, what is in flight and how long the oldest has waited, errors by kind.
Counters are read from the bridge's own tally when Prometheus scrapes; only the forward
latency is observed per message."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
    """The bridge's counts. Each field is written by one thread only."""

    received: int = 0
    redelivered: int = 0
    forwarded: int = 0
    acknowledged: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    mqtt_connected: bool = False
    kafka_reachable: bool = True


@dataclass(frozen=True)
class Flight:
    """What is in flight right now."""

    messages: int
    oldest_age: float


class BridgeCollector(Collector):
    """The tally and the messages in flight, read at each scrape."""

    def __init__(self, tally: Tally, flight: Callable[[], Flight]) -> None:
        self.tally = tally
        self.flight = flight

    def collect(self) -> Iterator[Metric]:
        tally, flight = self.tally, self.flight()
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
            value=flight.messages,
        )
        yield GaugeMetricFamily(
            prefix + "oldest_unacknowledged_age_seconds",
            "How long the oldest unacknowledged message has waited (0: none waits)",
            value=flight.oldest_age,
        )
        yield GaugeMetricFamily(
            prefix + "mqtt_connected", "1 while connected to the MQTT broker",
            value=int(tally.mqtt_connected),
        )  # fmt: skip
        yield GaugeMetricFamily(
            prefix + "kafka_reachable", "0 while Kafka is reported unreachable",
            value=int(tally.kafka_reachable),
        )  # fmt: skip


def bridge_registry(
    tally: Tally, flight: Callable[[], Flight]
) -> tuple[CollectorRegistry, Histogram]:
    """A registry holding the bridge's metrics, and its forward latency histogram."""
    registry = CollectorRegistry()
    registry.register(BridgeCollector(tally, flight))
    latency = Histogram(
        "sensorwatch_bridge_forward_seconds",
        "Seconds from a message's arrival at the bridge to Kafka's confirmation",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    return registry, latency
