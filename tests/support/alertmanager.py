"""A real Prometheus Alertmanager for tests, a webhook that records what it is sent, and
an ``incidents`` table written directly with delta-rs.

No mock Alertmanager: the binary of scripts/setup (Debian's prometheus-alertmanager) runs
on a free loopback port with short timings, and its ``sensorwatch`` receiver posts to a
small HTTP server in the test process.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import INCIDENTS_SCHEMA
from local_stack.alertmanager import (
    AlertmanagerError,
    AlertmanagerInfo,
    Timings,
    find_binary,
    start,
    stop,
)
from local_stack.server import free_port
from tests.support.polling import wait_until

# Short enough for tests, and the same route and inhibit rules as conf/alertmanager.yml.
FAST = Timings(group_wait="1s", group_wait_critical="1s", group_interval="1s", repeat_interval="1h")


def require_alertmanager() -> None:
    """Skip the calling test, saying why, when no Alertmanager binary is installed."""
    try:
        find_binary()
    except AlertmanagerError:
        pytest.skip(
            "needs Prometheus Alertmanager (/usr/bin/prometheus-alertmanager): run "
            "scripts/setup (apt-get install prometheus-alertmanager)"
        )


class Webhook:
    """An HTTP server on loopback that records every JSON payload posted to it."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with received._lock:
                    received.payloads.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: pytest shows the test's own output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where Alertmanager posts."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def notified(self, **labels: str) -> list[tuple[str, dict[str, Any]]]:
        """(status, alert) of every alert in every notification so far whose labels
        include ``labels``, in the order received."""
        with self._lock:
            payloads = list(self.payloads)
        return [
            (alert["status"], alert)
            for payload in payloads
            for alert in payload["alerts"]
            if labels.items() <= alert["labels"].items()
        ]

    def count(self, status: str, **labels: str) -> int:
        """How many notifications carried a matching alert in ``status``."""
        return sum(1 for s, _ in self.notified(**labels) if s == status)

    def wait_for(self, status: str, timeout: float = 15.0, n: int = 1, **labels: str) -> None:
        """Wait until ``n`` notifications carried a matching alert in ``status``."""
        wait_until(
            lambda: self.count(status, **labels) >= n,
            timeout,
            f"{n} {status} notification(s) for {labels}; got {self.notified(**labels)}",
        )

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def alertmanager(
    data_dir: Path,
    webhook: Webhook,
    port: int | None = None,
    web_config: Path | None = None,
    tls: bool = False,
) -> Iterator[AlertmanagerInfo]:
    """A real Alertmanager on ``data_dir`` posting to ``webhook``; stopped on exit.
    ``web_config``: its ``--web.config.file`` (basic auth, TLS: then ``tls``)."""
    info = start(
        data_dir, port or free_port(), webhook_url=webhook.url, timings=FAST,
        web_config=web_config, tls=tls,
    )  # fmt: skip
    try:
        yield info
    finally:
        stop(data_dir)


def active_alerts(url: str, **labels: str) -> list[dict[str, Any]]:
    """Alertmanager's current alerts (GET /api/v2/alerts) whose labels include ``labels``."""
    query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in labels.items()])
    with urllib.request.urlopen(f"{url}/api/v2/alerts?{query}", timeout=10) as response:
        return json.loads(response.read())


def sensor() -> str:
    """A sensor id no other test uses (tests share one Alertmanager)."""
    return f"sensor-{uuid.uuid4().hex[:8]}"


def incident(sensor_id: str, rule: str = "overheat_reading", **columns: Any) -> dict[str, Any]:
    """An incidents row: firing, started two minutes ago; ``columns`` override."""
    now = datetime.now(UTC)
    severity = "critical" if rule == "overheat_reading" else "warning"
    row: dict[str, Any] = {
        "incident_id": f"inc-{uuid.uuid4().hex[:12]}",
        "sensor_id": sensor_id,
        "site": "site-north",
        "rule": rule,
        "severity": severity,
        "status": "firing",
        "started_at": now - timedelta(minutes=2),
        "last_seen_at": now - timedelta(minutes=1),
        "resolved_at": None,
        "peak_value": 600.0 if rule == "sensor_silent" else 47.5,
        "threshold": 300.0 if rule == "sensor_silent" else 45.0,
        "alert_count": 3,
        # First written by the job well before: its resolution is posted as it is.
        "created_at": now - timedelta(minutes=10),
        "updated_at": now,
    }
    row.update(columns)
    return row


def resolved(row: dict[str, Any], **columns: Any) -> dict[str, Any]:
    """The row after the job resolved it (updated_at: now)."""
    now = datetime.now(UTC)
    return {**row, "status": "resolved", "resolved_at": now, "updated_at": now, **columns}


def upsert_incidents(lake: Path, rows: list[dict[str, Any]]) -> None:
    """Upsert ``rows`` by incident_id as the job does (a delta-rs merge), creating the
    table with its schema from jobs/writer/tables.py on first use."""
    schema = arrow_schema(INCIDENTS_SCHEMA)
    data = pa.Table.from_pylist(rows, schema=schema)
    path = str(lake / "incidents")
    if not DeltaTable.is_deltatable(path):
        write_deltalake(path, data)
        return
    (
        DeltaTable(path)
        .merge(data, "t.incident_id = s.incident_id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def quiet_period(webhook: Webhook) -> None:
    """Let a notification that should not come have its chance to arrive: the counts
    asserted after this would show it."""
    deadline = time.monotonic() + QUIET
    while time.monotonic() < deadline:
        time.sleep(0.1)  # an observation window, not a synchronisation: nothing is awaited


def delivered(url: str) -> float:
    """The webhook notifications Alertmanager has had a success answer for: it counts a
    request once it has the answer (notify.RetryStage), just before it logs what was sent."""
    requests = metric(url, "alertmanager_notification_requests_total", integration="webhook")
    failed = metric(url, "alertmanager_notification_requests_failed_total", integration="webhook")
    return requests - failed


# Longer than Alertmanager's group_interval (1 s) twice over: a notification that was
# going to be sent would have arrived within it.
QUIET = 2.5


def metric(url: str, name: str, **labels: str) -> float:
    """A counter of Alertmanager's /metrics, summed over the series matching ``labels``."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
