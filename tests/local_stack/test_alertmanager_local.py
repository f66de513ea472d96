"""scripts/alertmanager-local: a real Alertmanager per data dir, on loopback, no cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from conf.paths import PROJECT_ROOT
from local_stack import alertmanager as am_local
from local_stack.alertmanager import AlertmanagerError, find_binary, read_template, render_config
from local_stack.server import free_port
from tests.support.alertmanager import Webhook, active_alerts, require_alertmanager

CLI = str(PROJECT_ROOT / "scripts" / "alertmanager-local")


def alertmanager_local(*args: str | Path, wrapper: bool = False) -> subprocess.CompletedProcess:
    """Run the command: through its bash wrapper (which runs scripts/setup first, a
    second or so) or straight through the venv's Python."""
    command = [CLI] if wrapper else [str(PROJECT_ROOT / ".venv/bin/python"), "-m",
                                      "local_stack.alertmanager"]  # fmt: skip
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=90, cwd=PROJECT_ROOT
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    require_alertmanager()
    path = tmp_path / "am"
    yield path
    alertmanager_local("stop", "--data-dir", path)  # whatever the test did, leave nothing


def test_start_status_stop_restart(data_dir: Path) -> None:
    port, webhook = free_port(), Webhook()
    try:
        started = alertmanager_local(
            "start", "--data-dir", data_dir, "--port", port, "--webhook-url", webhook.url,
            wrapper=True,
        )  # fmt: skip

        assert started.returncode == 0, started.stderr
        url = f"http://127.0.0.1:{port}"
        assert started.stdout.strip().splitlines()[-1] == f"alertmanager={url}"
        pid = json.loads((data_dir / "alertmanager.json").read_text())["pid"]
        # One listening socket, on loopback: the API port, no cluster (gossip) port.
        listening = [
            c.laddr for c in psutil.Process(pid).net_connections("all") if c.status == "LISTEN"
        ]
        assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)], listening
        with urllib.request.urlopen(f"{url}/api/v2/status", timeout=10) as response:
            status = json.loads(response.read())
        assert status["cluster"]["status"] == "disabled"
        assert webhook.url in status["config"]["original"]  # the rendered project config
        assert "sensor_id" in status["config"]["original"]
        log = (data_dir / "alertmanager.log").read_text()
        assert "level=warn" not in log and "level=error" not in log, log

        status_cmd = alertmanager_local("status", "--data-dir", data_dir)
        assert status_cmd.returncode == 0 and f"alertmanager={url}" in status_cmd.stdout
        again = alertmanager_local("start", "--data-dir", data_dir, "--port", port)
        assert again.returncode == 0 and again.stdout.strip() == f"alertmanager={url}"
        assert json.loads((data_dir / "alertmanager.json").read_text())["pid"] == pid
        other_port = alertmanager_local("start", "--data-dir", data_dir, "--port", free_port())
        assert other_port.returncode == 2 and f"at port {port}" in other_port.stderr

        stopped = alertmanager_local("stop", "--data-dir", data_dir)

        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, "port still open after stop"
        assert alertmanager_local("status", "--data-dir", data_dir).returncode == 1
        # A clean stop wrote the notification log and silences for the next start.
        assert {p.name for p in (data_dir / "data").iterdir()} >= {"nflog", "silences"}
        assert "exiting gracefully" in (data_dir / "alertmanager.log").read_text()

        restarted = alertmanager_local("start", "--data-dir", data_dir, "--port", port)
        assert restarted.returncode == 0, restarted.stderr
    finally:
        webhook.close()


def test_without_webhook_the_receiver_is_a_null_receiver(data_dir: Path) -> None:
    rendered = render_config(read_template())
    settings = [line for line in rendered.splitlines() if not line.lstrip().startswith("#")]
    assert "    webhook_configs: []" in settings
    assert not [line for line in settings if "${" in line], "a placeholder left unfilled"
    port = free_port()
    assert alertmanager_local("start", "--data-dir", data_dir, "--port", port).returncode == 0
    url = f"http://127.0.0.1:{port}"
    now = datetime.now(UTC)
    alert = {
        "labels": {"alertname": "overheat_reading", "sensor_id": "s-null", "severity": "critical"},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(minutes=15)).isoformat(),
    }
    request = urllib.request.Request(
        f"{url}/api/v2/alerts", data=json.dumps([alert]).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200

    assert [a["labels"]["sensor_id"] for a in active_alerts(url)] == ["s-null"]


def test_a_taken_port_fails_clearly(data_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = alertmanager_local("start", "--data-dir", data_dir, "--port", port)

    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_invalid_config_fails_with_alertmanagers_reason(data_dir: Path, tmp_path: Path) -> None:
    config = tmp_path / "bad.yml"
    config.write_text(
        "route:\n  receiver: nobody\nreceivers:\n  - name: sensorwatch\n"
        "    webhook_configs: ${WEBHOOK_CONFIGS}\n"
    )

    result = alertmanager_local("start", "--data-dir", data_dir, "--port", free_port(),
                                "--config", config)  # fmt: skip

    assert result.returncode == 2
    assert "config invalid" in result.stderr
    assert 'FAILED: undefined receiver "nobody" used in route' in result.stderr
    assert str(config) in result.stderr and "Traceback" not in result.stderr
    assert alertmanager_local("status", "--data-dir", data_dir).returncode == 1


def test_an_unknown_placeholder_or_bad_webhook_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AlertmanagerError, match=r"unknown placeholder \$\{GROUP_WIAT\}"):
        render_config("route:\n  group_wait: ${GROUP_WIAT}\n")
    # A placeholder in a comment stays as it is (a commented example may carry one).
    assert render_config("# ${ANYTHING}\n") == "# ${ANYTHING}\n"

    result = alertmanager_local("render", "--webhook-url", "ftp://example.com/hook")

    assert result.returncode == 2
    assert "--webhook-url (SENSORWATCH_ALERT_WEBHOOK_URL)" in result.stderr


def test_render_out_writes_the_config_or_says_why_not(tmp_path: Path) -> None:
    """compose's alertmanager-init: the config into a file Alertmanager's user can read;
    a file it cannot write is one line naming it, exit 2."""
    written = tmp_path / "alertmanager.yml"
    done = alertmanager_local("render", "--out", written)
    missing = tmp_path / "no-such-volume" / "alertmanager.yml"
    refused = alertmanager_local("render", "--out", missing)

    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert written.read_text(encoding="utf-8") == render_config(read_template())
    assert written.stat().st_mode & 0o777 == 0o644
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"alertmanager-local: cannot write {missing}: No such file or directory "
        f"(running as uid {os.getuid()})"
    ]


def test_a_missing_binary_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(am_local, "BINARIES", ("/nonexistent/alertmanager",))

    with pytest.raises(AlertmanagerError, match=r"run scripts/setup.*prometheus-alertmanager"):
        find_binary()
