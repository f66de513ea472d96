"""The dashboard's pipeline view from Prometheus (ops/dashboard/prometheus_view.py):
range results as chart lines, and the line the page shows when no Prometheus answers;
the MQTT bridge, from a real Prometheus scraping the bridge's own metrics, in the API
and in Chromium, and no trace of one where Prometheus scrapes none. The job's charts
against a real Prometheus, in Chromium: tests/local_stack/test_prometheus_stack.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge

from bridge.metrics import (
    ERROR_KINDS,
    KAFKA_UNREACHABLE,
    MQTT_CONNECTION,
    Tally,
    bridge_registry,
)
from local_stack.prometheus import Targets
from ops.dashboard.prometheus_view import PrometheusView, bridge_instances, counted, lines
from tests.support.browser import CHROMIUM, open_page
from tests.support.ops_lake import dashboard, get_json
from tests.support.polling import wait_until
from tests.support.prometheus import StandIn, api, local_prometheus, require_prometheus


def test_a_range_result_becomes_one_time_axis_and_a_line_per_label() -> None:
    found = [
        {"metric": {"query": "ingest"}, "values": [[10, "1"], [25, "2"], [40, "NaN"]]},
        {"metric": {"query": "windows"}, "values": [[25, "0.5"]]},
    ]
    assert lines(found, "query") == {
        "t": [10.0, 25.0, 40.0],
        "lines": {"ingest": [1.0, 2.0, None], "windows": [None, 0.5, None]},
    }


def test_a_counter_s_samples_count_each_rise_and_all_after_a_restart() -> None:
    values = [[t, v] for t, v in enumerate(["0", "0", "2", "3", "3", "1", "4", "NaN"])]
    assert counted(values) == 3 + 1 + 3  # 0 -> 3, a restart counting 1, then 1 -> 4
    assert counted([[0, "5"]]) == 0  # one scrape: what came before it is not the window's
    assert counted([]) == 0


def test_a_bridge_whose_last_scrape_failed_has_no_gauges_though_a_query_still_sees_them() -> None:
    # The instant query is asked at the page's time; a scrape failing just after it shows
    # in the targets, not in the query's samples.
    targets = [
        {"labels": {"instance": "a:1"}, "health": "down", "lastError": "connection refused"},
        {"labels": {"instance": "b:1"}, "health": "up", "lastError": ""},
    ]
    found = [
        {"metric": {"instance": name, "field": "mqtt_connected"}, "value": [0, "1"]}
        for name in ("a:1", "b:1")
    ]
    errors = [
        {"metric": {"instance": "a:1", "kind": "mqtt_connection"}, "values": [[0, "0"], [1, "2"]]}
    ]
    down, up = bridge_instances(targets, found, errors)
    assert down["up"] is False and down["scrape_error"] == "connection refused"
    assert down["mqtt_connected"] is None
    assert down["errors"] == {"mqtt_connection": 2}  # the window's, still
    assert up["up"] is True and up["mqtt_connected"] is True


def test_no_prometheus_is_one_line_naming_where_it_was_looked_for() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    got = PrometheusView(url).charts(datetime(2026, 11, 26, tzinfo=UTC))
    assert got["charts"] == {} and got["bridge"] is None
    assert got["error"].startswith(f"no Prometheus answers at {url}")


# --- the MQTT bridge in the view, from a real Prometheus ---------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium: run scripts/setup")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()


class FakeBridge:
    """The bridge's own metrics (bridge/metrics.py's collector, the text its /metrics
    serves) over a tally this test drives: 20 messages received and 15 forwarded every
    0.1 s, until stopped."""

    def __init__(self) -> None:
        self.tally = Tally(mqtt_connected=True, in_flight=7, oldest_age=2.5)
        registry = bridge_registry(lambda: self.tally)
        self.metrics = StandIn(registry)
        self._stop = threading.Event()
        self._feeder = threading.Thread(target=self._feed, daemon=True)
        self._feeder.start()

    def _feed(self) -> None:
        while not self._stop.wait(0.1):
            self.tally.received += 20
            self.tally.forwarded += 15

    def stop(self) -> None:
        self._stop.set()
        self._feeder.join(timeout=5)
        self.metrics.stop()


def bridge_view(base: str) -> dict:
    status, body = get_json(base + "/api/pipeline/prometheus")
    assert status == 200 and body["error"] is None, body
    return body


def test_the_view_shows_the_bridge_prometheus_scrapes(browser, tmp_path: Path) -> None:
    require_prometheus()
    bridge = FakeBridge()
    try:
        with (
            local_prometheus(
                tmp_path / "prometheus",
                targets=Targets(job=(), notifier=(), producer=(), dashboard=(),
                                bridge=(bridge.metrics.address,)),
            ) as prometheus,
            dashboard("--lake", tmp_path / "lake", "--prometheus-url", prometheus.url,
                      "--refresh-seconds", 1) as base,
        ):  # fmt: skip

            def scraped() -> dict | None:
                found = bridge_view(base)["bridge"]
                return found if found and found["instances"][0]["up"] else None

            wait_until(scraped, 30, "the bridge's first scrape, in the view")
            # After its first scrape (a counter's increase before it is not Prometheus').
            bridge.tally.errors.update({MQTT_CONNECTION: 2, KAFKA_UNREACHABLE: 1})
            bridge.tally.kafka_reachable = False

            def settled() -> dict | None:
                (now,) = bridge_view(base)["bridge"]["instances"]
                return (
                    now
                    if now["errors"].get(MQTT_CONNECTION) == 2 and now["kafka_reachable"] is False
                    else None
                )

            now = wait_until(settled, 60, "the bridge's errors and Kafka unreachable, in the view",
                             detail=lambda: str(bridge_view(base)["bridge"]))  # fmt: skip
            assert now["instance"] == bridge.metrics.address
            assert now["up"] is True and now["scrape_error"] is None
            assert now["mqtt_connected"] is True
            assert now["in_flight"] == 7
            assert now["oldest_unacknowledged_age_seconds"] == 2.5
            # Every kind of error is shown, those that did not happen as 0.
            assert now["errors"] == dict.fromkeys(ERROR_KINDS, 0) | {
                KAFKA_UNREACHABLE: 1,
                MQTT_CONNECTION: 2,
            }
            # 200 received and 150 forwarded a second, as far as the feeder's sleeps keep pace
            # (between two scrapes; one may fall between its two additions).
            assert 100 < now["received_per_second"] < 300
            assert now["forwarded_per_second"] / now["received_per_second"] == pytest.approx(
                0.75, abs=0.1
            )
            chart = bridge_view(base)["bridge"]["messages"]
            assert set(chart["lines"]) == {"received", "forwarded"}
            assert any(v for v in chart["lines"]["received"])

            page, errors = open_page(browser, base)
            row = page.locator(f'#bridge-table tr[data-instance="{bridge.metrics.address}"]')
            row.wait_for(timeout=30_000)
            cells = row.locator("td").all_inner_texts()
            assert cells[:4] == [bridge.metrics.address, "UP", "CONNECTED", "UNREACHABLE"]
            assert float(cells[4]) > 100 and float(cells[5]) > 75
            assert cells[6:] == ["7", "2.5 s", "kafka_unreachable 1, mqtt_connection 2"]
            assert int(page.locator("#bridge-messages").get_attribute("data-points")) > 0
            assert page.locator("#prometheus-empty").is_hidden()
            page.locator("#bridge").screenshot(path=str(tmp_path / "bridge.png"))

            # The bridge stops: Prometheus' scrape fails, and the page says it is down.
            bridge.stop()
            page.wait_for_function(
                "a => document.querySelector("
                "`#bridge-table tr[data-instance='${a}'] td:nth-child(2)`).innerText === 'DOWN'",
                arg=bridge.metrics.address, timeout=30_000,
            )  # fmt: skip
            (gone,) = bridge_view(base)["bridge"]["instances"]
            assert gone["up"] is False and gone["scrape_error"]
            assert gone["mqtt_connected"] is None and gone["in_flight"] is None
            assert gone["errors"][MQTT_CONNECTION] == 2  # still the last hour's
            assert row.locator("td").nth(2).inner_text() == "\u2013"  # not known
            page.close()
            assert errors == []
    finally:
        bridge.stop()


def test_without_a_bridge_the_view_shows_none(browser, tmp_path: Path) -> None:
    """The default demo: Prometheus scrapes the job and no bridge, and the page shows no
    box for one."""
    require_prometheus()
    job_metrics = CollectorRegistry()
    Gauge("sensorwatch_seconds_since_progress", "stand-in", ["query"],
          registry=job_metrics).labels("ingest").set(1)  # fmt: skip
    with (
        StandIn(job_metrics) as job,
        local_prometheus(
            tmp_path / "prometheus",
            targets=Targets(job=(job.address,), notifier=(), producer=(), dashboard=()),
        ) as prometheus,
        dashboard("--lake", tmp_path / "lake", "--prometheus-url", prometheus.url) as base,
    ):
        # Once Prometheus scrapes its targets (before, it has none to show of any kind).
        wait_until(lambda: api(prometheus.url, "/api/v1/query", query="up == 1")["result"],
                   30, "the job's stand-in scraped")  # fmt: skip
        view = bridge_view(base)
        assert view["bridge"] is None
        assert set(view["charts"]) == {
            "backlog", "rows_per_second", "batch_duration", "alert_latency",
        }  # fmt: skip

        page, errors = open_page(browser, base)
        assert page.locator("#bridge").is_hidden()
        assert page.locator("#prometheus-empty").is_hidden()
        assert page.locator("#bridge-table tbody tr").count() == 0
        page.close()
        assert errors == []
