"""The pipeline over the last hour as Prometheus saw it: backlog, rows/s, batch duration
and alert latency, from Prometheus' HTTP API (``/api/v1/query_range``), for the
dashboard's pipeline view; and the MQTT bridge where Prometheus scrapes one (job
``sensorwatch-bridge``): each instance now (``/api/v1/query``) and its messages per
second over the hour. When no Prometheus answers, the answer says so and the page
shows that line instead of charts."""

from __future__ import annotations

import itertools
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
# The MQTT bridge's scrape job, as conf/prometheus/prometheus.yml names it and the rules
# of conf/prometheus/alerts.yml match it. No target of it: no bridge runs (the default
# demo), and the view has none to show.
BRIDGE_JOB = "sensorwatch-bridge"
BRIDGE = f'job="{BRIDGE_JOB}"'
# Each bridge now, per instance (field, PromQL), asked in one query: each part labelled
# with its field. Without a scrape its own metrics go stale: null. Messages per second
# between its last two scrapes (irate): right from its second scrape, where rate over a
# minute would count a bridge started seconds ago at a fraction of its pace.
BRIDGE_NOW: dict[str, str] = {
    "mqtt_connected": f"sensorwatch_bridge_mqtt_connected{{{BRIDGE}}}",
    "kafka_reachable": f"sensorwatch_bridge_kafka_reachable{{{BRIDGE}}}",
    "received_per_second": f"irate(sensorwatch_bridge_messages_received_total{{{BRIDGE}}}[1m])",
    "forwarded_per_second": f"irate(sensorwatch_bridge_messages_forwarded_total{{{BRIDGE}}}[1m])",
    "in_flight": f"sensorwatch_bridge_messages_in_flight{{{BRIDGE}}}",
    "oldest_unacknowledged_age_seconds": (
        f"sensorwatch_bridge_oldest_unacknowledged_age_seconds{{{BRIDGE}}}"
    ),
}
# Its errors by kind: every sample of the view's window (``%d``: seconds), counted in
# :func:`counted` (increase() extrapolates: 2 errors of a bridge scraped for seconds can
# come out as 4).
BRIDGE_ERRORS = f"sensorwatch_bridge_errors_total{{{BRIDGE}}}[%ds]"
# The chart: messages received from MQTT and forwarded (Kafka confirmed) per second, all
# instances together.
BRIDGE_MESSAGES = " or ".join(
    f"label_replace(sum(rate(sensorwatch_bridge_messages_{what}_total{{{BRIDGE}}}[1m])),"
    f' "line", "{what}", "", "")'
    for what in ("received", "forwarded")
)
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
        return self._ask("query_range", query)["result"]

    def _query(self, promql: str, at: datetime) -> list[dict]:
        return self._ask("query", {"query": promql, "time": at.timestamp()})["result"]

    def _targets(self, job: str) -> list[dict]:
        """The active scrape targets of ``job``."""
        found = self._ask("targets", {"state": "active", "scrapePool": job})["activeTargets"]
        return [t for t in found if t.get("labels", {}).get("job") == job]

    def _ask(self, api: str, query: dict[str, str | float]) -> Any:
        target = f"{self.url.rstrip('/')}/api/v1/{api}"
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
        return body["data"]

    def charts(self, now: datetime) -> dict[str, Any]:
        """Every chart of :data:`CHARTS` over the window up to ``now``: a shared time
        axis (Unix seconds) and one line per label value; and ``bridge``, the MQTT
        bridge (:meth:`bridge`), null where Prometheus scrapes none; or the error that
        stopped it."""
        start = now - self.window
        result: dict[str, Any] = {
            "prometheus_url": self.url, "error": None, "charts": {}, "bridge": None,
        }  # fmt: skip
        try:
            for name, (title, unit, promql, label) in CHARTS.items():
                found = self._query_range(promql, start, now)
                result["charts"][name] = {"title": title, "unit": unit, **lines(found, label)}
            result["bridge"] = self.bridge(now)
        except PrometheusUnavailable as exc:
            result["error"] = str(exc)
            result["charts"] = {}
        return result

    def bridge(self, now: datetime) -> dict[str, Any] | None:
        """The MQTT bridge at ``now``, or None when Prometheus scrapes none (no target of
        job ``sensorwatch-bridge``). Per target (``instances``): whether its last scrape
        answered (``up``; null before the first), the scrape's error, MQTT connected,
        Kafka reachable, messages received and forwarded per second (its last scrapes), in
        flight, the oldest unacknowledged one's age, and ``errors`` by kind over the
        window; and the chart of messages per second (``messages``).

        Raises:
            PrometheusUnavailable: Prometheus did not answer.
        """
        targets = self._targets(BRIDGE_JOB)
        if not targets:
            return None
        parts = [
            f'label_replace({promql}, "field", "{field}", "", "")'
            for field, promql in BRIDGE_NOW.items()
        ]
        found = self._query(" or ".join(parts), now)
        errors = self._query(BRIDGE_ERRORS % int(self.window.total_seconds()), now)
        messages = self._query_range(BRIDGE_MESSAGES, now - self.window, now)
        return {
            "instances": bridge_instances(targets, found, errors),
            "messages": {"title": "bridge messages per second", "unit": "messages/s",
                         **lines(messages, "line")},
        }  # fmt: skip


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


# The bridge's gauges that are flags (1 or 0), and those that count messages.
_FLAGS = ("mqtt_connected", "kafka_reachable")
_COUNTS = ("in_flight",)


def bridge_instances(
    targets: list[dict], found: list[dict], errors: list[dict]
) -> list[dict[str, Any]]:
    """One record per bridge target (Prometheus' ``activeTargets``), sorted by instance,
    with the instant vector of the bridge's query (each series labelled with its
    ``field``) in it, a field without a series (not scraped lately) null; and its
    ``errors`` by kind, :func:`counted` in the samples of its error counters."""
    instances: dict[str, dict[str, Any]] = {}
    for target in targets:
        name = target["labels"].get("instance", "")
        health = target.get("health")
        instances[name] = {
            "instance": name,
            "up": {"up": True, "down": False}.get(health),
            "scrape_error": target.get("lastError") or None,
            **dict.fromkeys(BRIDGE_NOW),
            "errors": {},
        }
    for series in found:
        labels, value = series["metric"], float(series["value"][1])
        record = instances.get(labels.get("instance", ""))
        if record is None or not math.isfinite(value):
            continue  # a bridge Prometheus no longer scrapes (a series not stale yet)
        field = labels["field"]
        if field in _FLAGS:
            record[field] = value == 1
        elif field in _COUNTS:
            record[field] = int(value)
        else:
            record[field] = value
    for record in instances.values():
        if record["up"] is False:
            # Its last scrape failed: what it said before is not what it is now. (The
            # targets answer after the instant query's time: a failure after it would
            # otherwise show a bridge down and connected.)
            record.update(dict.fromkeys(BRIDGE_NOW))
    for series in errors:
        labels = series["metric"]
        record = instances.get(labels.get("instance", ""))
        if record is not None:
            record["errors"][labels.get("kind", "")] = counted(series["values"])
    for record in instances.values():
        record["errors"] = dict(sorted(record["errors"].items()))
    return [instances[name] for name in sorted(instances)]


def counted(values: list[list]) -> int:
    """What a counter counted between its first and last sample (``[time, "value"]``
    pairs, oldest first): each rise, and after a restart (a drop) all it counted since."""
    samples = [float(v) for _, v in values if math.isfinite(float(v))]
    return int(sum(b - a if b >= a else b for a, b in itertools.pairwise(samples)))
