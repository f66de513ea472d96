"""The dashboard's HTTP layer: a Starlette app over the pure queries of ``queries.py``.

Read-only on the lake: it opens the Delta tables for each request and never writes
them. The one write is to Alertmanager: ``POST /api/silences`` silences an incident
there (``silences.py``). ``/api/alerts/live`` streams the real-time path's alerts from
Kafka as they arrive (``live.py``). The page is static HTML/JS/CSS with the chart library vendored
under ``static/vendor``: no build step, no network at run time.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from conf.rules_watch import RulesFile
from conf.settings.dashboard import DashboardSettings
from contract.alerts import SEVERITIES
from contract.registry import RegistryFile
from contract.rules.model import known_rules
from contract.times import iso, parse_since, utc_now
from lake.reader import LakeReader
from ops.alert_reader import (
    RESOLVED_LOOKBACK,
    AlertFilter,
    alert_record,
    query_alerts,
)
from ops.alertmanager_api import Alertmanager, AlertmanagerUnavailable
from ops.dashboard import queries, silences
from ops.dashboard.guard import AUTHENTICATED, Guard
from ops.dashboard.live import LiveAlerts
from ops.dashboard.metrics import DashboardMetrics, Measured
from ops.dashboard.prometheus_view import PrometheusView

STATIC = Path(__file__).parent / "static"
MAX_LIMIT = 5000
MAX_BODY = 4096  # bytes of a POST /api/silences body


class BadRequest(ValueError):
    """A query parameter is invalid; the message names it."""


def _finite(value: Any) -> Any:
    """NaN and infinities (Spark reports NaN rates) as null: JSON has no NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class DataResponse(JSONResponse):
    """JSON that is never cached: the tables change all the time."""

    def __init__(self, content: Any, status_code: int = 200) -> None:
        super().__init__(_finite(content), status_code, headers={"Cache-Control": "no-store"})

    def render(self, content: Any) -> bytes:
        """Compact UTF-8 JSON."""
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _listed(request: Request, name: str, allowed: tuple[str, ...] | None = None) -> tuple:
    """A repeatable, comma-separated query parameter."""
    found = tuple(v.strip() for item in request.query_params.getlist(name) for v in item.split(","))
    found = tuple(v for v in found if v)
    bad = [v for v in found if allowed is not None and v not in allowed]
    if bad:
        raise BadRequest(f"{name}: unknown value(s) {bad}; choose from {list(allowed or ())}")
    return found


def _number(request: Request, name: str, default: float, low: float, high: float) -> float:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise BadRequest(f"{name}: expected a number, got {text!r}") from None
    if not low <= value <= high:
        raise BadRequest(f"{name}: expected {low:g} to {high:g}, got {text!r}")
    return value


def _filter(request: Request, known: tuple[str, ...]) -> AlertFilter:
    """The filter of /api/alerts and /api/incidents: since, sensor, site, severity, rule
    (one of ``known``)."""
    since_text = request.query_params.get("since")
    try:
        since = parse_since(since_text) if since_text else None
    except ValueError as exc:
        raise BadRequest(f"since: {exc}") from None
    return AlertFilter(
        since=since,
        sensors=_listed(request, "sensor"),
        sites=_listed(request, "site"),
        severities=_listed(request, "severity", SEVERITIES),
        rules=_listed(request, "rule", known),
    )


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()


def _warn(line: str) -> None:
    print(f"ops.dashboard: {line}", file=sys.stderr, flush=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def create_app(settings: DashboardSettings) -> Starlette:
    """The dashboard app for the lake and thresholds in ``settings``.

    Raises:
        contract.registry.RegistryError: the registry file exists but is malformed (a
            file that does not exist yet means default thresholds until it appears).
    """
    reader = LakeReader(settings.lake)
    alertmanager_url = settings.alertmanager_url.rstrip("/")  # the browser's, for links
    # The server's own way to Alertmanager's API (in compose, not the browser's address).
    alertmanager = Alertmanager.from_settings(settings, settings.alertmanager_api_url)
    # Strict at start (a malformed registry fails here, not on the first request);
    # later edits are read leniently, each skipped line said on stderr.
    registry = RegistryFile(settings.registry, log=_warn)
    registry.current()
    # The rules file followed like the job follows it: an edit is drawn once valid.
    rules = RulesFile(settings.rules, settings.alert_rules, log=_warn)
    thresholds = queries.Thresholds(rules=rules.current, registry=registry.current)

    # The pipeline as the ops team's Prometheus saw it (prometheus_view.py).
    view = PrometheusView(settings.prometheus_url) if settings.prometheus_url else None

    # The real-time path's alerts, pushed to the page as they arrive (live.py).
    live = LiveAlerts(settings, log=_say, warn=_say) if settings.realtime_alerts else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if live is not None:
            live.start()
        yield
        if live is not None:
            live.close()
            live.join(timeout=5)

    def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    def healthz(request: Request) -> Response:
        # Healthy means serving; a lake the job has not created yet is an empty state.
        if not request.scope.get(AUTHENTICATED, True):
            return DataResponse({"status": "ok"})  # a probe without credentials
        return DataResponse(
            {"status": "ok", "lake": str(reader.root), "lake_exists": reader.exists()}
        )

    def config(request: Request) -> Response:
        return DataResponse(
            {
                "lake": str(reader.root),
                "alertmanager_url": alertmanager_url,
                "refresh_seconds": settings.refresh_seconds,
                "open_minutes": settings.open_minutes,
                "rules": str(settings.rules),
                "rules_version": rules.current().version(),
                "units": rules.current().units(),
                "registry": str(settings.registry) if settings.registry else None,
                "live_alerts": settings.alerts_topic if live is not None else None,
                "prometheus_url": settings.prometheus_browser_url or settings.prometheus_url,
            }
        )

    def alerts(request: Request) -> Response:
        where = _filter(request, known_rules(rules.current()))
        if where.since is None:
            # Without a since, the page's day (docs/architecture.md#running-for-weeks: a
            # reader reads the range it shows, never the table's whole history); an older
            # one must be asked for.
            where = replace(where, since=utc_now() - queries.ALERT_WINDOW)
        limit = int(_number(request, "limit", 200, 1, MAX_LIMIT))
        result = query_alerts(reader, where, limit)
        return DataResponse(
            {
                "exists": result.exists,
                "since": iso(where.since),
                "total": result.total,
                "alerts": [alert_record(row) for row in result.rows],
            }
        )

    def live_alerts(request: Request) -> Response:
        if live is None:
            return DataResponse(
                {"error": "live alerts are off (realtime_alerts is false)"}, status_code=404
            )
        # X-Accel-Buffering: a proxy (nginx) in front passes each event at once.
        return StreamingResponse(
            live.events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    def incidents(request: Request) -> Response:
        where = _filter(request, known_rules(rules.current()))
        limit = int(_number(request, "limit", 200, 1, MAX_LIMIT))
        resolved_since = where.since or utc_now() - RESOLVED_LOOKBACK
        result = queries.incidents(reader, alertmanager_url, where, resolved_since, limit)
        if not result["incidents"]:
            return DataResponse(result)
        # Which are silenced: asked with a short timeout; without an answer the table
        # still shows, just without silence state.
        try:
            active, error = alertmanager.active_silences(silences.READ_TIMEOUT), None
        except AlertmanagerUnavailable as exc:
            active, error = None, str(exc)
        return DataResponse(queries.mark_silenced(result, active, error))

    async def create_silence(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").partition(";")[0].strip()
        if content_type != "application/json":
            # Also keeps other sites' pages out: a cross-origin JSON POST needs a CORS
            # preflight, which this server does not grant.
            return DataResponse(
                {"error": "expected Content-Type: application/json"}, status_code=415
            )
        body = await request.body()
        if len(body) > MAX_BODY:
            raise silences.InvalidSilence(f"body: more than {MAX_BODY} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise silences.InvalidSilence("body: not JSON") from None
        wanted = silences.parse_request(data, known_rules(rules.current()))
        silence_id = await run_in_threadpool(
            alertmanager.create_silence, wanted.body(utc_now()), silences.CREATE_TIMEOUT
        )
        return DataResponse(
            {
                "silence_id": silence_id,
                "sensor_id": wanted.sensor_id,
                "rule": wanted.rule,
                "hours": wanted.hours,
                "comment": wanted.comment,
                "alertmanager_url": alertmanager_url,
            }
        )

    def summary(request: Request) -> Response:
        return DataResponse(queries.alert_summary(reader, settings.open_minutes, utc_now()))

    def timeline(request: Request) -> Response:
        return DataResponse(queries.alert_timeline(reader))

    def sensor_list(request: Request) -> Response:
        return DataResponse(queries.sensors(reader))

    def sensor_stats(request: Request) -> Response:
        hours = _number(request, "hours", 6.0, 0.1, 24 * 31)
        sensor_id = request.path_params["sensor_id"]
        return DataResponse(queries.sensor_stats(reader, sensor_id, thresholds, hours))

    def pipeline(request: Request) -> Response:
        return DataResponse(queries.pipeline(reader))

    def pipeline_prometheus(request: Request) -> Response:
        if view is None:
            return DataResponse({"prometheus_url": None, "error": "no prometheus_url set",
                                 "charts": {}})  # fmt: skip
        return DataResponse(view.charts(utc_now()))

    async def bad_request(request: Request, exc: Exception) -> Response:
        return DataResponse({"error": str(exc)}, status_code=400)

    async def bad_gateway(request: Request, exc: Exception) -> Response:
        return DataResponse({"error": str(exc)}, status_code=502)

    metrics = DashboardMetrics(live.pages if live is not None else None)
    # Outermost: a request the guard turns away is counted too (status 401).
    guard = [Middleware(Measured, metrics=metrics)]
    if settings.asks_who_is_there:
        guard.append(
            Middleware(
                Guard,
                token=_secret(settings.dashboard_token),
                user=settings.dashboard_user,
                password=_secret(settings.dashboard_password),
            )
        )
    app = Starlette(
        lifespan=lifespan,
        middleware=guard,
        routes=[
            Route("/", index),
            Route("/healthz", healthz),
            Route("/api/config", config),
            Route("/api/alerts", alerts),
            Route("/api/alerts/summary", summary),
            Route("/api/alerts/timeline", timeline),
            Route("/api/alerts/live", live_alerts),
            Route("/api/incidents", incidents),
            Route("/api/silences", create_silence, methods=["POST"]),
            Route("/api/sensors", sensor_list),
            Route("/api/sensors/{sensor_id}/stats", sensor_stats),
            Route("/api/pipeline", pipeline),
            Route("/api/pipeline/prometheus", pipeline_prometheus),
            Route("/metrics", metrics.endpoint),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={
            BadRequest: bad_request,
            silences.InvalidSilence: bad_request,
            AlertmanagerUnavailable: bad_gateway,
        },
    )
    app.state.live = live  # the server ends its streams when it stops (__main__.py)
    return app
