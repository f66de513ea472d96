"""`docker compose up` as a user runs it: the whole stack, until alerts are in the table.

Needs a Docker engine with the compose plugin; skipped with the reason where none answers.
The stack runs under its own project name and free host ports, so a demo already running
on the machine is left alone; `down --volumes` removes everything afterwards.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid

import pytest

from conf.paths import PROJECT_ROOT
from scripts.kafka_local import free_port

pytestmark = pytest.mark.docker


def compose_unavailable_reason() -> str | None:
    try:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker compose cannot run ({exc})"
    return None if done.returncode == 0 else "the docker compose plugin is missing"


def alerts_in_lake(compose) -> list[dict]:
    """The alert rows, read inside the stack with the alerts CLI (JSON lines)."""
    try:
        out, _err, code = compose.exec_in_container(
            ["scripts/alerts", "--lake", "/data/lake", "--json"], service_name="dashboard"
        )
    except subprocess.CalledProcessError:
        return []  # the table does not exist yet
    return [json.loads(line) for line in out.splitlines() if line.strip()] if code == 0 else []


def test_compose_up_brings_alerts_within_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    reason = compose_unavailable_reason()
    if reason:
        pytest.skip(reason)
    from testcontainers.compose import DockerCompose

    dashboard_port = free_port()
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"sensorwatch-test-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("KAFKA_HOST_PORT", str(free_port()))
    monkeypatch.setenv("DASHBOARD_PORT", str(dashboard_port))
    compose = DockerCompose(PROJECT_ROOT, compose_file_name="docker-compose.yml", build=True,
                            wait=False)  # fmt: skip
    with compose:
        deadline = time.monotonic() + 600  # image build on a cold cache, then the demo
        alerts: list[dict] = []
        while not alerts and time.monotonic() < deadline:
            alerts = alerts_in_lake(compose)
            if not alerts:
                time.sleep(5)  # polling interval, bounded by the deadline
        logs = "" if alerts else "\n".join(compose.get_logs("job", "producer"))[-5000:]
        assert alerts, f"no alert within the deadline; logs:\n{logs}"
        url = f"http://127.0.0.1:{dashboard_port}/healthz"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.status == 200

    assert {a["rule"] for a in alerts} >= {"overheat_reading"}
    assert len({a["alert_id"] for a in alerts}) == len(alerts), "an alert landed twice"
