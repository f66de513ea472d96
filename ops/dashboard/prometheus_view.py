"""The pipeline over the last hour as Prometheus saw it: backlog, rows/s, batch duration
and alert latency, from Prometheus' HTTP API (``/api/v1/query_range``), for the
dashboard's pipeline view. When no Prometheus answers, the answer says so and the page
shows that line instead of charts."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ops.http import FAILURES, request

# One chart each: (title, unit, PromQL, the label that names each line).
CHARTS: dict[str, tuple[str, str, str, str]] = {
    "backlog": (
        "records behind the topic's end",
        "records",
        "sum by (query) (sensorwatch_kafka_records_behind)",
        "query",
    ),
    "rows_per_second": (
        "rows read per second",
        "rows/s",
        "sum by (query) (rate(sensorwatch_input_rows_total[1m]))",
        "query",
    ),
    "batch_duration": (
        "mean batch duration",
        "s",
        "sum by (query) (rate(sensorwatch_batch_duration_seconds_sum[5m]))"
        " / sum by (query) (rate(sensorwatch_batch_duration_seconds_count[5m]))",
        "query",
    ),
    "alert_latency": (
        "alert latency, p95",
        "s",
        "histogram_quantile(0.95, sum by (le, path) "
        "(rate(sensorwatch_alert_latency_seconds_bucket[5m])))",
        "path",
    ),
}
# A page refresh must not wait long for a Prometheus that is not there.
TIMEOUT_S = 3.0


class PrometheusUnavailable(RuntimeError):
    """Prometheus did not answer, or answered with an error."""


@dataclass(frozen=True)
class PrometheusView:
    """Range queries against the Prometheus at ``url`` (its base URL as the dashboard
    server reaches it)."""

    url: str
    window: timedelta = timedelta(hours=1)
    points: int = 240

    def _query_range(self, promql: str, start: datetime, end: datetime) -> list[dict]:
        step = max(1.0, (end - start).total_seconds() / self.points)
        query = {"query": promql, "start": start.timestamp(), "end": end.timestamp(), "step": step}
        target = f"{self.url.rstrip('/')}/api/v1/query_range"
        try:
            answer = request("GET", target, TIMEOUT_S, params=query)
            if not answer.is_success:
                code = answer.status_code
                raise PrometheusUnavailable(f"Prometheus at {self.url} answered {code}")
            body = json.loads(answer.content)
        except FAILURES as exc:
            raise PrometheusUnavailable(f"no Prometheus answers at {self.url} ({exc})") from None
        if body.get("status") != "success":
            raise PrometheusUnavailable(f"Prometheus at {self.url}: {body.get('error')}")
        return body["data"]["result"]

    def charts(self, now: datetime) -> dict[str, Any]:
        """Every chart of :data:`CHARTS` over the window up to ``now``: a shared time
        axis (Unix seconds) and one line per label value; or the error that stopped it."""
        start = now - self.window
        result: dict[str, Any] = {"prometheus_url": self.url, "error": None, "charts": {}}
        try:
            for name, (title, unit, promql, label) in CHARTS.items():
                found = self._query_range(promql, start, now)
                result["charts"][name] = {"title": title, "unit": unit, **lines(found, label)}
        except PrometheusUnavailable as exc:
            result["error"] = str(exc)
            result["charts"] = {}
        return result


def lines(found: list[dict], label: str) -> dict[str, Any]:
    """A range query's matrix as one time axis and a line per ``label`` value (null
    where a line has no point at a time, or its value is not a number)."""
    times = sorted({float(t) for series in found for t, _ in series["values"]})
    named: dict[str, list[float | None]] = {}
    for series in found:
        name = series["metric"].get(label, "all")
        values = {float(t): float(v) for t, v in series["values"]}
        named[name] = [
            values[t] if t in values and math.isfinite(values[t]) else None for t in times
        ]
    return {"t": times, "lines": dict(sorted(named.items()))}
