"""The producer's Prometheus metrics (docs/metrics.md), served at its /metrics
(telemetry/endpoint.py): messages the broker acknowledged and messages that failed,
read from the sender's own tally when Prometheus scrapes (nothing added per message)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from producer.sender import Summary


class SenderTally(Collector):
    """sensorwatch_producer_messages_sent_total and _failed_total of a running sender."""

    def __init__(self, summary: Callable[[], Summary]) -> None:
        self.summary = summary

    def collect(self) -> Iterator[CounterMetricFamily]:
        summary = self.summary()
        yield CounterMetricFamily(
            "sensorwatch_producer_messages_sent",
            "Messages the broker acknowledged",
            value=summary.delivered,
        )
        yield CounterMetricFamily(
            "sensorwatch_producer_messages_failed",
            "Messages the broker did not take (delivery errors, left queued at exit)",
            value=summary.failed,
        )


def producer_registry(summary: Callable[[], Summary]) -> CollectorRegistry:
    """A registry holding the sender's tally."""
    registry = CollectorRegistry()
    registry.register(SenderTally(summary))
    return registry
