"""Alertmanager behind basic auth and TLS (its --web.config.file,
docs/architecture.md#connections-and-security): the notifier, the dashboard's silences
and Prometheus' own alerts work against a real Alertmanager configured so, with the user,
password and CA from settings (the password from the environment or a file only);
without them, one line that says what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from conf.paths import PROJECT_ROOT
from local_stack.alertmanager import AlertmanagerInfo
from local_stack.server import free_port
from local_stack.tls import export_pem, make_authority, make_server_keystore
from ops.alertmanager_api import Alertmanager
from tests.support.alertmanager import (
    Webhook,
    alertmanager,
    incident,
    require_alertmanager,
    sensor,
    upsert_incidents,
)
from tests.support.ops_lake import dashboard, post_json
from tests.support.polling import wait_until
from tests.support.prometheus import require_prometheus

USER, PASSWORD = "ops", "correct horse battery staple"


def pem_files(folder: Path) -> tuple[Path, Path, Path]:
    """A CA (PEM) and a server certificate and key (PEM) for 127.0.0.1 signed by it."""
    authority = make_authority(folder, "Alertmanager test CA")
    keystore, password = make_server_keystore(folder, authority, name="alertmanager")
    cert, key = export_pem(keystore, password, folder, "server")
    return authority.certificate, cert, key


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AlertmanagerInfo, Path]]:
    """A real Alertmanager with TLS and one basic-auth user; yields it and its CA."""
    require_alertmanager()
    folder = tmp_path_factory.mktemp("guarded-am")
    ca, cert, key = pem_files(folder / "tls")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    web = folder / "web.yml"
    web.write_text(
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"basic_auth_users:\n  {USER}: '{hashed}'\n",
        encoding="utf-8",
    )
    hook = Webhook()
    try:
        with alertmanager(folder / "am", hook, web_config=web, tls=True) as info:
            yield info, ca
    finally:
        hook.close()


def client_env(guarded: tuple[AlertmanagerInfo, Path], tmp_path: Path, **more: str) -> dict:
    info, ca = guarded
    secret = tmp_path / "am-password"
    secret.write_text(PASSWORD + "\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith("SENSORWATCH_")}
    return {
        **base,
        "SENSORWATCH_ALERTMANAGER_URL": info.url,
        "SENSORWATCH_ALERTMANAGER_USER": USER,
        "SENSORWATCH_ALERTMANAGER_PASSWORD_FILE": str(secret),
        "SENSORWATCH_ALERTMANAGER_CA_LOCATION": str(ca),
        **more,
    }


def notify_once(lake: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops.notify", "--once", "--lake", str(lake)],
        capture_output=True, text=True, timeout=90, cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip


def test_the_notifier_posts_through_basic_auth_and_tls(guarded, tmp_path: Path) -> None:
    (info, ca), lake, sid = guarded, tmp_path / "lake", sensor()
    row = incident(sid)
    upsert_incidents(lake, [row])

    done = notify_once(lake, client_env(guarded, tmp_path))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"notify: 1 firing, 0 resolved -> Alertmanager {info.url}")
    assert PASSWORD not in done.stdout + done.stderr
    held = Alertmanager(info.url, user=USER, password=PASSWORD, ca=ca).alerts(sensor_id=sid)
    assert [a["labels"]["incident_id"] for a in held] == [row["incident_id"]]


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("no credentials", "HTTP 401"),
        ("a wrong password", "HTTP 401"),
        ("an untrusted certificate", "its certificate is not trusted"),
    ],
)
def test_without_the_right_credentials_the_notifier_says_why(
    guarded, tmp_path: Path, fault: str, said: str
) -> None:
    lake = tmp_path / "lake"
    upsert_incidents(lake, [incident(sensor())])
    env = client_env(guarded, tmp_path)
    if fault == "no credentials":
        del env["SENSORWATCH_ALERTMANAGER_USER"], env["SENSORWATCH_ALERTMANAGER_PASSWORD_FILE"]
    elif fault == "a wrong password":
        env["SENSORWATCH_ALERTMANAGER_PASSWORD"] = "not the password"
        del env["SENSORWATCH_ALERTMANAGER_PASSWORD_FILE"]
    else:
        other = make_authority(tmp_path / "other", "Somebody else's CA")
        env["SENSORWATCH_ALERTMANAGER_CA_LOCATION"] = str(other.certificate)

    done = notify_once(lake, env)

    # Refused: a setting to fix, said at once (no retries as for an outage).
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and said in lines[0] and "nothing was sent" in lines[0], lines
    assert PASSWORD not in done.stdout + done.stderr


def test_the_dashboard_silences_through_basic_auth_and_tls(
    guarded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (info, ca), lake, sid = guarded, tmp_path / "lake", sensor()
    row = incident(sid)
    upsert_incidents(lake, [row])
    env = client_env(guarded, tmp_path)
    for name in [k for k in os.environ if k.startswith("SENSORWATCH_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("SENSORWATCH_"):
            monkeypatch.setenv(name, value)
    am = Alertmanager(info.url, user=USER, password=PASSWORD, ca=ca)
    assert notify_once(lake, env).returncode == 0  # the incident at Alertmanager first

    with dashboard("--lake", lake) as url:
        status, body = post_json(
            url + "/api/silences",
            {"sensor_id": sid, "rule": row["rule"], "hours": 0.5, "comment": "on it"},
        )

    assert status == 200, body
    silences = am._call("GET", "/api/v2/silences")
    mine = [s for s in silences if s["id"] == body["silence_id"]]
    assert mine and mine[0]["status"]["state"] == "active"
    assert {"name": "sensor_id", "value": sid} in [
        {"name": m["name"], "value": m["value"]} for m in mine[0]["matchers"]
    ]


def prometheus_local(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "local_stack.prometheus", *args],
        capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip


def test_prometheus_pages_through_basic_auth_and_tls(guarded, tmp_path: Path) -> None:
    """The pipeline's own alerts reach the guarded Alertmanager: scripts/prometheus-local
    takes the notifier's variables (user, password file, CA), the password never in the
    config it writes."""
    require_prometheus()
    (info, ca), data = guarded, tmp_path / "prometheus"
    # A rule that fires once it has held for 10 s: by then Prometheus knows where its
    # Alertmanager is (its discovery's first update takes up to 5 s, and an alert sent
    # before it goes nowhere until the resend a minute later).
    rules = tmp_path / "always.yml"
    rules.write_text(
        "groups:\n  - name: guarded\n    rules:\n      - alert: SensorWatchGuardedTest\n"
        "        expr: vector(1)\n        for: 10s\n"
        "        labels: {severity: warning, component: job}\n",
        encoding="utf-8",
    )
    env = client_env(guarded, tmp_path)
    started = prometheus_local(
        env, "start", "--data-dir", str(data), "--port", str(free_port()),
        "--rules", str(rules), "--evaluation-interval", "1s",
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        assert PASSWORD not in started.stdout + started.stderr
        assert PASSWORD not in (data / "prometheus.yml").read_text(encoding="utf-8")
        held = Alertmanager(info.url, user=USER, password=PASSWORD, ca=ca)
        [alert] = wait_until(
            lambda: held.alerts(alertname="SensorWatchGuardedTest"),
            timeout=180,
            what="Prometheus' alert in the guarded Alertmanager",
        )
        assert alert["labels"]["component"] == "job"
    finally:
        prometheus_local(env, "stop", "--data-dir", str(data))


def test_prometheus_takes_the_password_from_a_file_only(guarded, tmp_path: Path) -> None:
    env = client_env(guarded, tmp_path)
    del env["SENSORWATCH_ALERTMANAGER_PASSWORD_FILE"]
    env["SENSORWATCH_ALERTMANAGER_PASSWORD"] = PASSWORD

    done = prometheus_local(env, "render")

    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "SENSORWATCH_ALERTMANAGER_PASSWORD_FILE" in done.stderr
    assert "Prometheus reads the password from a file" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
