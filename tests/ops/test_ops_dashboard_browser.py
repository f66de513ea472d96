"""End to end: headless Debian chromium (driven by Playwright) loads the dashboard served
by a real uvicorn over a lake written by the real job, and sees the alerts and the charts;
and over incidents written with delta-rs, the open-incidents headline, their links to
Alertmanager and the buttons that silence them in a real Alertmanager.

The screenshot is a test artifact under pytest's tmp dir. To refresh the image in docs/ops-view.md:

    .venv/bin/python -m pytest -q -p no:cacheprovider --basetemp=var/shot \\
        tests/ops/test_ops_dashboard_browser.py -k alerts_and_charts
    cp var/shot/test_the_page_shows_the_alerts0/dashboard.png docs/img/dashboard.png
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest

from contract.alerts import OVERHEAT, alert_id
from contract.times import iso
from local_stack.server import free_port
from tests.support.alertmanager import Webhook, alertmanager, require_alertmanager, wait_until
from tests.support.browser import CHROMIUM, open_page, page_errors, page_fault
from tests.support.kafka_io import produce
from tests.support.ops_lake import (
    OpsLake,
    append_rows,
    dashboard,
    get_json,
    incident,
    ops_lake,
    write_incidents,
)

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage


pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium: run scripts/setup"
)

# Counts pixels of one colour on a chart's canvas: proof that a series was drawn.
PIXELS_OF = """([selector, r, g, b]) => {
  const canvas = document.querySelector(selector + " canvas");
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < data.length; i += 4)
    if (data[i] === r && data[i + 1] === g && data[i + 2] === b && data[i + 3] === 255) n++;
  return n;
}"""


@pytest.fixture(scope="module")
def lake(spark, kafka, tmp_path_factory) -> OpsLake:
    return ops_lake(spark, kafka, tmp_path_factory.mktemp("ops"))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()


def test_only_the_host_s_network_change_is_excused_among_console_errors() -> None:
    def message(kind: str, text: str) -> ConsoleMessage:
        return SimpleNamespace(type=kind, text=text)  # type: ignore[return-value]

    assert page_fault(message("error", "Failed to load resource: net::ERR_CONNECTION_REFUSED"))
    assert page_fault(message("error", "Uncaught TypeError: rows is undefined"))
    assert not page_fault(message("error", "Failed to load resource: net::ERR_NETWORK_CHANGED"))
    assert not page_fault(message("warning", "a warning"))


def test_the_page_shows_the_alerts_and_charts(browser, lake: OpsLake, tmp_path: Path) -> None:
    counts = Counter(a["severity"] for a in lake.alerts)
    with dashboard("--lake", lake.root, "--registry", lake.registry, "--open-minutes", 1440) as url:
        page, errors = open_page(browser, url)
        rows = page.locator("#alerts-table tbody tr")
        _, timeline = get_json(url + "/api/alerts/timeline")
        selected = page.locator("#sensor").input_value()
        _, stats = get_json(url + f"/api/sensors/{selected}/stats")

        assert rows.count() == len(lake.alerts)
        firing = [i for i in lake.incidents if i["status"] == "firing"]
        assert page.locator("#open-incidents").inner_text() == str(len(firing))
        assert page.locator("#incidents-table tbody tr").count() == len(lake.incidents)
        assert rows.locator(".badge.critical").count() == counts["critical"]
        assert page.locator("#open-critical").inner_text() == str(counts["critical"])
        assert page.locator("#open-warning").inner_text() == str(counts["warning"])
        newest = max(lake.alerts, key=lambda a: (a["detected_at"], a["window_start"]))
        assert newest["sensor_id"] in rows.first.inner_text()

        # Charts: a canvas each, with the data points of their endpoints, drawn.
        assert page.locator("#timeline canvas").count() == 1
        assert int(page.locator("#timeline").get_attribute("data-points")) == len(timeline["t"])
        assert page.evaluate(PIXELS_OF, ["#timeline", 214, 40, 40]) > 0  # critical bars
        assert int(page.locator("#temperature").get_attribute("data-points")) == len(stats["t"]) > 0
        assert page.evaluate(PIXELS_OF, ["#temperature", 37, 99, 235]) > 50  # the avg line
        assert page.evaluate(PIXELS_OF, ["#temperature", 214, 40, 40]) > 50  # critical threshold
        # The sensor's own normal: temperature_off_normal's newest baseline, its two edges.
        (normal,) = stats["baselines"]
        assert normal["mean"] is not None
        assert page.evaluate(PIXELS_OF, ["#temperature", 13, 148, 136]) > 50
        note = page.locator("#thresholds").inner_text()
        assert f"normal band (temperature_off_normal): {normal['low']:.1f} to" in note
        assert "still warming up" in note  # 12 minutes of panes, the rule learns for 30
        assert page.locator("#pipeline-table tbody tr").count() == len(
            {m["query"] for m in lake.metrics}
        )

        # Clicking an alert shows that sensor's temperatures.
        other = next(a for a in lake.alerts if a["sensor_id"] != selected)
        page.locator(f'tr[data-alert-id="{other["alert_id"]}"]').click()
        page.wait_for_function(
            "s => document.getElementById('sensor').value === s", arg=other["sensor_id"]
        )
        page.locator(f'tr[data-alert-id="{newest["alert_id"]}"]').scroll_into_view_if_needed()
        page.select_option("#sensor", selected)
        page.evaluate("window.scrollTo(0, 0)")

        shot = tmp_path / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert errors == []
    assert shot.stat().st_size > 20_000


def test_an_empty_lake_shows_empty_states(browser, tmp_path: Path) -> None:
    with dashboard("--lake", tmp_path) as url:
        page, errors = open_page(browser, url)

        assert page.locator("#alerts-table tbody tr").count() == 0
        assert "No alerts table yet" in page.locator("#alerts-empty").inner_text()
        assert "No pipeline_metrics table yet" in page.locator("#pipeline-empty").inner_text()
        assert page.locator("#open-critical").inner_text() == "0"
        assert page.locator("#open-incidents").inner_text() == "0"
        assert "No incidents table yet" in page.locator("#incidents-empty").inner_text()
        assert errors == []


def test_a_guarded_dashboard_asks_the_browser_who_is_there(
    browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Basic auth (docs/architecture.md#connections-and-security): without credentials the
    page is a 401 with the challenge that makes a browser ask; with them it loads and every
    API call of the page carries them (no script error, its first refresh done)."""
    monkeypatch.setenv("SENSORWATCH_DASHBOARD_USER", "ops")
    monkeypatch.setenv("SENSORWATCH_DASHBOARD_PASSWORD", "s3cret-for-the-test")
    with dashboard("--lake", tmp_path) as url:
        anonymous = browser.new_context()
        # Chromium meets the challenge with no credentials to give: the page never loads.
        with pytest.raises(Exception, match="ERR_INVALID_AUTH_CREDENTIALS"):
            anonymous.new_page().goto(url)
        answer = anonymous.request.get(url + "/api/incidents")
        assert answer.status == 401
        assert answer.headers["www-authenticate"].startswith('Basic realm="SensorWatch"')
        anonymous.close()

        known = browser.new_context(
            http_credentials={"username": "ops", "password": "s3cret-for-the-test"},
            viewport={"width": 1400, "height": 1300},
        )
        page = known.new_page()
        errors = page_errors(page)
        answer = page.goto(url)
        page.wait_for_function("Number(document.body.dataset.refreshes || 0) >= 1", timeout=30_000)

        assert answer is not None and answer.status == 200
        assert "No alerts table yet" in page.locator("#alerts-empty").inner_text()
        assert page.locator("#open-incidents").inner_text() == "0"
        assert errors == []
        known.close()


def test_the_headline_is_the_open_incidents_with_links_to_silence_them(
    browser, tmp_path: Path
) -> None:
    alertmanager = "http://alertmanager.example:9093"
    write_incidents(
        tmp_path,
        [
            incident("hot", "sensor-0001", minutes=3),
            incident("hot2", "sensor-0002", started_minute=9, minutes=0),
            incident("quiet", "sensor-0004", rule="sensor_silent", started_minute=1, minutes=12),
            incident(
                "cooled", "sensor-0003", rule="sustained_high", status="resolved",
                updated_ago=timedelta(hours=2),
            ),
        ],
    )  # fmt: skip
    with dashboard("--lake", tmp_path, "--alertmanager-url", alertmanager) as url:
        page, errors = open_page(browser, url)
        rows = page.locator("#incidents-table tbody tr")

        assert page.locator("#open-incidents").inner_text() == "3"
        assert page.locator("#open-by-severity").inner_text() == "2 critical · 1 warning"
        assert page.locator("#open-by-rule").inner_text() == "2 overheat_reading · 1 sensor_silent"
        assert "firing" in page.locator("#open-card").get_attribute("class")
        # Firing first (critical, newest first), then the resolved one.
        assert [rows.nth(i).get_attribute("data-incident-id") for i in range(4)] == [
            "hot2", "hot", "quiet", "cooled",
        ]  # fmt: skip
        assert rows.nth(0).locator(".badge.firing").count() == 1
        assert rows.nth(3).locator(".badge.resolved").count() == 1
        assert "420 s" in rows.nth(2).inner_text() and "52.5 °C" in rows.nth(1).inner_text()
        # Durations as the terminal writes them (event time, to the newest alert).
        assert rows.nth(1).locator("td").nth(6).inner_text() == "3m"
        assert rows.nth(2).locator("td").nth(6).inner_text() == "12m"
        matchers = '{alertname="overheat_reading",sensor_id="sensor-0001"}'
        assert rows.nth(1).locator("a.silence").get_attribute("href") == (
            f"{alertmanager}/#/silences/new?filter={urllib.parse.quote(matchers, safe='')}"
        )
        assert page.locator("#alertmanager-link").get_attribute("href") == alertmanager
        assert page.locator("#alertmanager-link").is_visible()
        assert "3 firing, 1 resolved" in page.locator("#incidents-count").inner_text()
        page.screenshot(path=str(tmp_path / "incidents.png"), full_page=True)
        assert errors == []


def test_a_button_silences_an_incident_in_alertmanager(browser, tmp_path: Path) -> None:
    require_alertmanager()
    write_incidents(
        tmp_path / "lake",
        [
            incident("hot", "sensor-0001", minutes=3),
            incident("quiet", "sensor-0004", rule="sensor_silent", started_minute=1),
            incident(
                "cooled", "sensor-0003", rule="sustained_high", status="resolved",
                updated_ago=timedelta(hours=2),
            ),
        ],
    )  # fmt: skip
    hook = Webhook()
    try:
        with (
            alertmanager(tmp_path / "alertmanager", hook) as am,
            dashboard("--lake", tmp_path / "lake", "--alertmanager-url", am.url) as url,
        ):
            page, errors = open_page(browser, url)
            hot = page.locator('tr[data-incident-id="hot"]')
            quiet = page.locator('tr[data-incident-id="quiet"]')

            # Firing rows have the buttons (and the link to Alertmanager's form); a
            # resolved one only the link.
            assert hot.locator("button.silence-action").all_inner_texts() == [
                "1 h", "4 h", "24 h",
            ]  # fmt: skip
            assert page.locator('tr[data-incident-id="cooled"] button').count() == 0
            assert (
                hot.locator("a.silence")
                .get_attribute("href")
                .startswith(am.url + "/#/silences/new?filter=")
            )
            assert page.locator("#silence-note").inner_text() == ""

            hot.locator('button.silence-action[data-hours="4"]').click()
            page.wait_for_selector('tr[data-incident-id="hot"].silenced', timeout=15_000)

            assert "silenced until" in hot.locator(".badge.silenced").inner_text()
            assert hot.locator("button.silence-action").count() == 0
            message = page.locator("#silence-message").inner_text()
            assert message.startswith("silenced overheat_reading on sensor-0001 for 4 h")
            assert "silenced" not in (quiet.get_attribute("class") or "")
            assert page.locator("#open-incidents").inner_text() == "2"  # still firing
            with urllib.request.urlopen(am.url + "/api/v2/silences", timeout=10) as reply:
                silences = json.loads(reply.read())
            assert [sorted((m["name"], m["value"]) for m in s["matchers"]) for s in silences] == [
                [("alertname", "overheat_reading"), ("sensor_id", "sensor-0001")]
            ]
            assert silences[0]["id"] in message
            page.screenshot(path=str(tmp_path / "silenced.png"), full_page=True)
            assert errors == []
    finally:
        hook.close()


def test_a_silence_without_alertmanager_says_why(browser, tmp_path: Path) -> None:
    write_incidents(tmp_path, [incident("hot", "sensor-0001", minutes=3)])
    gone = f"http://127.0.0.1:{free_port()}"
    with dashboard("--lake", tmp_path, "--alertmanager-url", gone) as url:
        page, errors = open_page(browser, url)
        hot = page.locator('tr[data-incident-id="hot"]')

        # The table shows; only the silence state is unknown.
        assert hot.locator(".badge.firing").count() == 1
        assert "silence state unknown" in page.locator("#silence-note").inner_text()
        hot.locator('button.silence-action[data-hours="1"]').click()
        page.wait_for_selector("#silence-message.error", timeout=15_000)

        message = page.locator("#silence-message").inner_text()
        assert message.startswith("could not silence overheat_reading on sensor-0001: ")
        assert f"Alertmanager at {gone} is not reachable" in message
        assert hot.locator("button.silence-action:not([disabled])").count() == 3
        # The browser logs the failed request (502) as an error; nothing else may fail.
        assert [e for e in errors if "502" not in e] == []


def live_message(sensor_id: str, start: datetime, value: float) -> dict:
    """A message of the real-time path as jobs/queries/realtime.py writes it."""
    return {
        "alert_id": alert_id(sensor_id, OVERHEAT, start), "sensor_id": sensor_id,
        "site": "site-north", "rule": OVERHEAT, "severity": "critical",
        "window_start": iso(start), "window_end": iso(start + timedelta(minutes=1)),
        "observed_value": value, "threshold": 45.0, "readings": 1,
        "detected_at": iso(start + timedelta(seconds=5)),
        "reading_at": iso(start + timedelta(seconds=5)),
    }  # fmt: skip


def test_a_real_time_alert_shows_at_once_and_gives_way_to_the_lake_s_row(
    browser, kafka, new_topic, tmp_path: Path
) -> None:
    """The page shows an alert of ``sensor-alerts`` (pushed by the server as it arrives)
    in the alerts and the incidents tables before the lake has it; once the lake has its
    row, that row shows instead, once. A message that is not an alert changes nothing."""
    topic, lake = new_topic("alerts", 2), tmp_path / "lake"
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    hot = live_message("sensor-0007", start, 51.5)
    args = ("--lake", lake, "--bootstrap-servers", kafka.bootstrap, "--alerts-topic", topic)
    with dashboard(*args, "--refresh-seconds", 1, live=True) as url:
        page, errors = open_page(browser, url)
        page.wait_for_function(
            "t => document.getElementById('live').textContent === 'live: ' + t", arg=topic
        )
        row = page.locator(f'#alerts-table tr.live[data-alert-id="{hot["alert_id"]}"]')

        def sent_and_shown() -> bool:
            # Sent again until shown: the dashboard reads from the topic's end and may
            # take its position after the first send. Every copy has the same alert_id.
            produce(kafka.bootstrap, topic, [("junk", "not an alert")])
            produce(kafka.bootstrap, topic, [(hot["alert_id"], json.dumps(hot))])
            return row.count() == 1

        wait_until(sent_and_shown, 60, "the real-time alert on the page", every=1)

        assert page.locator("#alerts-table tbody tr").count() == 1
        assert "51.5 °C" in row.inner_text() and row.locator(".badge.live").count() == 1
        early = page.locator(f'#incidents-table tr.live[data-live-alert-id="{hot["alert_id"]}"]')
        assert early.locator(".badge.firing").count() == 1
        assert "sensor-0007" in early.inner_text()
        assert page.locator("#open-incidents").inner_text() == "1"
        assert "1 live, not in the lake yet" in page.locator("#alerts-count").inner_text()

        # The job's micro-batch writes the row: the lake's row takes the live one's place.
        append_rows(lake, "alerts", [{
            **hot, "window_start": start, "window_end": start + timedelta(minutes=1),
            "detected_at": start + timedelta(seconds=7),
        }])  # fmt: skip
        page.wait_for_selector(
            f'#alerts-table tr[data-alert-id="{hot["alert_id"]}"]:not(.live)', timeout=30_000
        )
        assert page.locator("#alerts-table tbody tr").count() == 1
        assert page.locator("#alerts-table tr.live").count() == 0
        # From here the lake's incidents table is the truth (the job's same micro-batch
        # writes the incident; this test wrote none).
        assert page.locator("#incidents-table tr.live").count() == 0
        assert errors == []
