"""The dashboard's Prometheus metrics (docs/metrics.md), at its own ``/metrics``, behind
its credentials check like every other page: requests and their time to the first byte
by route and status, and the pages following the live alerts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def route_of(path: str) -> str:
    """The route a request path belongs to: one label value per route, whatever the
    sensor id or static file."""
    if path.startswith("/static/"):
        return "/static"
    if path.startswith("/api/sensors/") and path.endswith("/stats"):
        return "/api/sensors/{sensor_id}/stats"
    return path


class _LivePages(Collector):
    def __init__(self, count: Callable[[], int]) -> None:
        self.count = count

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "sensorwatch_dashboard_live_pages",
            "Pages following the real-time alerts (open event streams)",
            value=self.count(),
        )


class DashboardMetrics:
    """The dashboard's metrics, in a registry of their own."""

    def __init__(self, live_pages: Callable[[], int] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "sensorwatch_dashboard_requests",
            "Requests answered, by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "sensorwatch_dashboard_request_duration_seconds",
            "Time to the first byte of the answer, by route",
            ["route"],
            buckets=SECONDS,
            registry=self.registry,
        )
        if live_pages is not None:
            self.registry.register(_LivePages(live_pages))

    def endpoint(self, request: Request) -> Response:
        """GET /metrics: the registry in Prometheus' text format."""
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class Measured:
    """ASGI middleware: counts and times every HTTP request into DashboardMetrics."""

    def __init__(self, app: ASGIApp, metrics: DashboardMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route, started = route_of(scope["path"]), time.perf_counter()

        async def measured(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.duration.labels(route).observe(time.perf_counter() - started)
                self.metrics.requests.labels(route, str(message["status"])).inc()
            await send(message)

        await self.app(scope, receive, measured)
