"""The notifier's Prometheus metrics (docs/metrics.md), served at its /metrics
(telemetry/endpoint.py): its posts to Alertmanager and their failures, per lane (the
incidents sync, the real-time alerts), whether Alertmanager answers, when the last sync
went through, the incidents firing, the episodes reported late, whether the real-time
lane reads its topic and how often it restarted, and the real-time path's alert latency."""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from contract.alerts import FIRING
from contract.times import parse_instant
from telemetry.alert_latency import REALTIME, alert_latency

# The lanes that post to Alertmanager (ops/notifier/loop.py, ops/notifier/alert_stream.py).
SYNC, STREAM = "incidents", "realtime"


class NotifierMetrics:
    """The notifier's metrics, in a registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.posts = Counter(
            "sensorwatch_notifier_posts",
            "Posts of alerts that Alertmanager accepted, by lane",
            ["lane"],
            registry=r,
        )
        self.failures = Counter(
            "sensorwatch_notifier_post_failures",
            "Posts that failed (Alertmanager down, refusing or answering an error), by lane",
            ["lane"],
            registry=r,
        )
        self.sync_failures = Counter(
            "sensorwatch_notifier_sync_failures",
            "Syncs of the incidents with Alertmanager that failed (Alertmanager down, "
            "refusing or answering an error); each is retried",
            registry=r,
        )
        self.up = Gauge(
            "sensorwatch_alertmanager_up",
            "1 when Alertmanager answered the notifier's last call, 0 when it did not",
            registry=r,
        )
        self.last_sync = Gauge(
            "sensorwatch_notifier_last_sync_timestamp_seconds",
            "When the notifier last synced the incidents with Alertmanager (Unix time)",
            registry=r,
        )
        self.firing = Gauge(
            "sensorwatch_incidents_firing",
            "Incidents firing in the lake's incidents table, by rule and severity",
            ["rule", "severity"],
            registry=r,
        )
        self.late = Counter(
            "sensorwatch_notifier_reported_late",
            "Resolved incidents reported late: they ended before any notification said they "
            'fired (posted briefly firing with the label late="true")',
            registry=r,
        )
        # Made by the first report of a lane: a notifier without one (realtime_alerts
        # false) has no such series, so the rule on it does not fire for it.
        self.lane_up: Gauge | None = None
        self.lane_restarts = Counter(
            "sensorwatch_notifier_lane_restarts",
            "Times the real-time lane failed and was started again",
            registry=r,
        )
        self.latency = alert_latency(r)
        self._firing_labels: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def posted(self, lane: str) -> None:
        """Alertmanager accepted a post of ``lane``."""
        self.posts.labels(lane).inc()
        self.up.set(1)

    def failed(self, lane: str, reachable: bool) -> None:
        """A post of ``lane`` failed; ``reachable``: Alertmanager answered (refusing)."""
        self.failures.labels(lane).inc()
        self.up.set(1 if reachable else 0)

    def sync_failed(self, reachable: bool) -> None:
        """A sync of the incidents failed; ``reachable``: Alertmanager answered (refusing)."""
        self.sync_failures.inc()
        self.up.set(1 if reachable else 0)

    def reported_late(self, count: int) -> None:
        """``count`` resolved incidents were reported late."""
        self.late.inc(count)

    def lane(self, up: bool) -> None:
        """The real-time lane reads its topic (``up``) or does not."""
        with self._lock:
            if self.lane_up is None:
                self.lane_up = Gauge(
                    "sensorwatch_notifier_lane_up",
                    "1 while the real-time lane reads the alerts topic (Kafka answers, the "
                    "topic exists), 0 while it does not (failed and restarting, topic "
                    "missing, Kafka down); absent without a lane (realtime_alerts false)",
                    registry=self.registry,
                )
        self.lane_up.set(1 if up else 0)

    def lane_restarted(self) -> None:
        """The real-time lane failed; it starts again."""
        self.lane_restarts.inc()

    def synced(self, at: datetime, incidents: Iterable[Mapping[str, Any]]) -> None:
        """A sync went through at ``at`` with these incidents (rows with status, rule and
        severity); rule and severity pairs no longer firing drop to 0."""
        counts = Tally((r["rule"], r["severity"]) for r in incidents if r["status"] == FIRING)
        with self._lock:
            self._firing_labels |= set(counts)
            for labels in self._firing_labels:
                self.firing.labels(*labels).set(counts.get(labels, 0))
        self.last_sync.set(at.timestamp())
        self.up.set(1)

    def received(self, message: Mapping[str, Any], at: datetime) -> None:
        """A real-time alert read at ``at``: its latency since its reading reached Kafka
        (the message's ``reading_at``, when it has one)."""
        reading_at = message.get("reading_at")
        if isinstance(reading_at, str):
            seconds = (at - parse_instant(reading_at)).total_seconds()
            self.latency.labels(REALTIME).observe(max(0.0, seconds))
