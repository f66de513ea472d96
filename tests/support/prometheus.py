"""A real Prometheus for the tests (scripts/prometheus-local's, at the tests' pace), the
pipeline's shipped alerting rules, and a stand-in for the programs it scrapes."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, start_http_server

from local_stack.prometheus import (
    RULES,
    Intervals,
    PrometheusError,
    PrometheusInfo,
    find_binary,
    start,
    stop,
)
from local_stack.server import free_port

# The tests' pace: Prometheus scrapes and evaluates every second (production: 15s).
FAST = Intervals(scrape="1s", evaluation="1s")


def require_prometheus() -> None:
    """Skip the calling test, saying why, when no Prometheus binary is installed."""
    try:
        find_binary()
    except PrometheusError:
        pytest.skip(
            "needs Prometheus (/usr/bin/prometheus, Debian's prometheus package): run "
            "scripts/setup (apt-get install prometheus)"
        )


def api(url: str, path: str, **params: str) -> Any:
    """The ``data`` of a Prometheus HTTP API answer (GET ``path``)."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}{path}{query}", timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


class StandIn:
    """A stand-in for a program's /metrics: prometheus_client's own HTTP server on a free
    loopback port, serving ``registry``; stopped on exit (or by ``stop``: a program that
    goes away)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._server, self._thread = start_http_server(0, addr="127.0.0.1", registry=registry)
        self._stopped = False

    @property
    def address(self) -> str:
        """Its host:port, a scrape target."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        """Stop serving: scrapes fail from now on (connection refused)."""
        if not self._stopped:
            self._stopped = True
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def local_prometheus(data_dir: Path, **options: Any) -> Iterator[PrometheusInfo]:
    """A real Prometheus on ``data_dir`` with the tests' short intervals; stopped on exit."""
    info = start(data_dir, free_port(), intervals=FAST, **options)
    try:
        yield info
    finally:
        stop(data_dir)


def fast_rules(path: Path) -> Path:
    """A copy of the shipped rules with every ``for:`` cut to 1s and nothing else
    changed (the exprs are checked to be the shipped ones): the tests' clock."""
    text = re.sub(r"(?m)^(\s+for: )\S+$", r"\g<1>1s", RULES.read_text(encoding="utf-8"))
    path.write_text(text, encoding="utf-8")
    copy = {r["alert"]: r for g in yaml.safe_load(text)["groups"] for r in g["rules"]}
    for rule in shipped_rules():
        assert copy[rule["alert"]]["expr"] == rule["expr"]
        assert copy[rule["alert"]]["for"] == "1s"
    return path


def shipped_rules() -> list[dict[str, Any]]:
    """Every rule of conf/prometheus/alerts.yml, as parsed YAML."""
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]
