"""sensorwatch_alert_latency_seconds: one histogram, two observers. The job observes the
lake path (jobs/metrics.py), the notifier the real-time path (ops/notifier/metrics.py);
Prometheus tells them apart by the ``path`` label."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

# Milliseconds (the real-time path) to seconds (the micro-batch path).
LATENCY_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LAKE, REALTIME = "lake", "realtime"


def alert_latency(registry: CollectorRegistry) -> Histogram:
    """The histogram in ``registry``: from the hot reading reaching Kafka to its
    overheat alert committed to the alerts table (path=lake) or received from the
    alerts topic by the notifier (path=realtime)."""
    return Histogram(
        "sensorwatch_alert_latency_seconds",
        "From the hot reading reaching Kafka to its overheat alert: committed to the alerts "
        "table (path=lake), or read from the alerts topic by the notifier (path=realtime)",
        ["path"],
        buckets=LATENCY_SECONDS,
        registry=registry,
    )
