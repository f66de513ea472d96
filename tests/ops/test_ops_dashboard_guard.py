"""The dashboard asks who is there (docs/architecture.md#connections-and-security): a token
or basic auth from settings, required whenever it answers beyond loopback; the page and its
API answer 401 without them. (The browser side: tests/ops/test_ops_dashboard_browser.py.)"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conf.settings.base import SettingsError, load_settings
from conf.settings.dashboard import DashboardSettings
from ops.dashboard.__main__ import read_command_line
from tests.support.ops_lake import dashboard

TOKEN, USER, PASSWORD = "tok-9f2c1e", "ops", "pa:ss word"


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("USER", "PASSWORD", "TOKEN", "PUBLISHED_ADDRESS", "HOST"):
        for suffix in ("", "_FILE"):
            variable = f"SENSORWATCH_DASHBOARD_{name}{suffix}"
            monkeypatch.setenv(variable, "")
            monkeypatch.delenv(variable)
    return monkeypatch


def get(url: str, authorization: str | None = None) -> tuple[int, dict[str, str], Any]:
    headers = {"Authorization": authorization} if authorization else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            body = r.read()
            return r.status, dict(r.headers), body
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::"])
def test_beyond_loopback_without_credentials_it_refuses_to_start(no_credentials, host) -> None:
    with pytest.raises(SettingsError) as failure:
        load_settings(DashboardSettings, {"dashboard_host": host})

    assert "beyond loopback" in str(failure.value)
    assert "SENSORWATCH_DASHBOARD_TOKEN" in str(failure.value)


@pytest.mark.parametrize(
    ("given", "env"),
    [
        ({"dashboard_host": "127.0.0.1"}, {}),
        ({"dashboard_host": "localhost"}, {}),
        ({"dashboard_host": "::1"}, {}),
        ({"dashboard_host": "0.0.0.0"}, {"SENSORWATCH_DASHBOARD_TOKEN": TOKEN}),
        ({"dashboard_host": "0.0.0.0", "dashboard_user": USER},
         {"SENSORWATCH_DASHBOARD_PASSWORD": PASSWORD}),
        # compose: listening on every address of its container, published on the host's
        # loopback only.
        ({"dashboard_host": "0.0.0.0", "dashboard_published_address": "127.0.0.1"}, {}),
    ],
)  # fmt: skip
def test_loopback_or_credentials_let_it_start(no_credentials, given, env) -> None:
    for name, value in env.items():
        no_credentials.setenv(name, value)

    settings = load_settings(DashboardSettings, given)

    assert settings.asks_who_is_there == bool(env)


def test_a_published_address_beyond_loopback_needs_credentials(no_credentials) -> None:
    given = {"dashboard_host": "0.0.0.0", "dashboard_published_address": "0.0.0.0"}

    with pytest.raises(SettingsError, match="beyond loopback"):
        load_settings(DashboardSettings, given)


def test_basic_auth_needs_both_halves_and_no_secret_is_a_flag(
    no_credentials, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as shown:
        read_command_line(["--help"])
    flags = capsys.readouterr().out
    assert shown.value.code == 0
    with pytest.raises(SystemExit) as refused:
        read_command_line(["--dashboard-password", PASSWORD])
    assert refused.value.code == 2
    assert "unrecognized arguments: --dashboard-password" in capsys.readouterr().err

    with pytest.raises(SettingsError, match="needs both dashboard_user"):
        load_settings(DashboardSettings, {"dashboard_user": USER})
    assert "--dashboard-user" in flags
    assert "--dashboard-password" not in flags and "--dashboard-token" not in flags


def test_the_page_and_api_answer_401_without_credentials(no_credentials, tmp_path: Path) -> None:
    no_credentials.setenv("SENSORWATCH_DASHBOARD_TOKEN", TOKEN)
    no_credentials.setenv("SENSORWATCH_DASHBOARD_USER", USER)
    no_credentials.setenv("SENSORWATCH_DASHBOARD_PASSWORD", PASSWORD)
    with dashboard("--lake", tmp_path) as url:
        refused = {
            (path, authorization): get(url + path, authorization)
            for path in ("/", "/api/alerts", "/api/incidents", "/static/app.js")
            for authorization in (None, "Bearer wrong", basic(USER, "wrong"), "Basic !!")
        }
        allowed = [
            get(url + "/api/incidents", authorization)
            for authorization in (f"Bearer {TOKEN}", basic(USER, PASSWORD))
        ]
        silence = urllib.request.Request(
            url + "/api/silences", data=b"{}", method="POST",
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as posted:
            urllib.request.urlopen(silence, timeout=30)
        probe, probe_known = get(url + "/healthz"), get(url + "/healthz", f"Bearer {TOKEN}")

    assert len(refused) == 16
    for (status, headers, _), asked in zip(refused.values(), refused, strict=True):
        assert status == 401, asked
        assert headers["www-authenticate"].startswith('Basic realm="SensorWatch"')
    assert [status for status, _, _ in allowed] == [200, 200]
    assert posted.value.code == 401
    assert probe[0] == 200 and json.loads(probe[2]) == {"status": "ok"}
    assert json.loads(probe_known[2])["lake"] == str(tmp_path)
