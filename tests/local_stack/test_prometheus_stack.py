"""The whole monitoring path, for real (issue 36): the producer sends, a real job serves
its /metrics, a real Prometheus scrapes it with the shipped rules (each ``for:`` cut to
a second, the exprs as shipped) and sends to a real Alertmanager; the dashboard draws
its pipeline view from that Prometheus in Chromium. Then the job is stalled on purpose
(SIGSTOP: it answers nothing) and SensorWatchJobDown must reach Alertmanager's receiver.
"""

from __future__ import annotations

import json
import re
import signal
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lake.reader import LakeReader
from local_stack.prometheus import Targets
from tests.support.alertmanager import Webhook, alertmanager, require_alertmanager
from tests.support.browser import CHROMIUM, open_page
from tests.support.drills import start_job, start_producer
from tests.support.ops_lake import dashboard
from tests.support.polling import STUCK, wait_until
from tests.support.prometheus import fast_rules, local_prometheus, require_prometheus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium: run scripts/setup"),
]


def instant(prometheus: str, promql: str) -> float | None:
    """The value of a PromQL expression with one series, now; None without one."""
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query?{query}", timeout=10) as answer:
        result = json.loads(answer.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()


def test_a_scraped_job_is_charted_and_a_stalled_one_pages(
    browser, kafka, new_topic, tmp_path: Path
) -> None:
    require_prometheus()
    require_alertmanager()
    topic, lake = new_topic("promstack"), tmp_path / "lake"
    producer = start_producer(kafka.bootstrap, topic, tmp_path)
    webhook, job = Webhook(), None
    try:
        producer.wait_for_line(lambda line: " delivered (" in line, 180)
        job = start_job(kafka, topic, lake, tmp_path / "fleet.jsonl")
        said = job.wait_for_line(lambda line: "metrics at http://" in line, STUCK, "its /metrics")
        target = re.search(r"http://([^/]+)/metrics", said)[1]
        with (
            alertmanager(tmp_path / "am", webhook) as am,
            local_prometheus(
                tmp_path / "prometheus",
                targets=Targets(job=(target,), notifier=(), producer=(), dashboard=()),
                alertmanager_url=am.url,
                rules=[fast_rules(tmp_path / "alerts.yml")],
            ) as prometheus,
        ):
            # Scraped while readings flow: what Prometheus holds is what the lake holds.
            ingest = 'sum(sensorwatch_input_rows_total{query="ingest"})'
            wait_until(lambda: (instant(prometheus.url, ingest) or 0) > 0, STUCK,
                       "Prometheus' first scrape of ingest's rows")  # fmt: skip
            seen = instant(prometheus.url, ingest)
            landed = sum(LakeReader(str(lake)).read(t).num_rows for t in ("readings", "quarantine"))
            assert 0 < seen <= landed  # a batch commits before it reports its progress

            with dashboard("--lake", lake, "--prometheus-url", prometheus.url) as base:
                page, errors = open_page(browser, base)
                page.wait_for_function(
                    "Number(document.getElementById('prom-rows_per_second').dataset.points) > 0",
                    timeout=120_000,
                )
                assert page.locator("#prometheus-empty").is_hidden()
                assert page.locator("#prom-backlog").get_attribute("data-points") != "0"
                page.close()
                assert errors == []

            # Stalled on purpose: the whole job (Python and JVM) stops answering.
            job.interrupt_group(signal.SIGSTOP)
            webhook.wait_for("firing", timeout=120, alertname="SensorWatchJobDown")
            _, down = webhook.notified(alertname="SensorWatchJobDown")[0]
            assert down["labels"]["instance"] == target
            assert down["labels"]["severity"] == "critical"
            assert down["annotations"]["runbook_url"].endswith("runbooks.md#job-down")
            job.interrupt_group(signal.SIGCONT)
    finally:
        webhook.close()
        for running in (producer, job):
            if running is not None:
                running.kill()
