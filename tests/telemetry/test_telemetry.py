"""/metrics endpoints and the metrics they serve, without a JVM (telemetry/, the job's,
notifier's, producer's and dashboard's metrics). The job's values against its tables:
tests/jobs/test_metrics.py."""

from __future__ import annotations

import base64
import socket
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry, Counter
from pyspark.sql import Row

from conf.settings.base import SettingsError, load_settings
from conf.settings.job import JobSettings
from conf.settings.notifier import NotifierSettings
from jobs.metrics import JobMetrics, records_behind
from ops.notifier.metrics import NotifierMetrics
from producer.metrics import producer_registry
from producer.sender import Summary
from telemetry.endpoint import EndpointError, serve_metrics
from tests.support.metrics import samples


def scrape(url: str, authorization: str | None = None) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from a /metrics URL."""
    request = urllib.request.Request(url)
    if authorization:
        request.add_header("Authorization", authorization)
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode("utf-8")
    return samples(text)


def job_settings(**values: object) -> JobSettings:
    return load_settings(JobSettings, {"metrics_port": 0, **values})


def registry_with_one_counter() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("sensorwatch_test_things", "things", registry=registry).inc(3)
    return registry


def test_an_endpoint_serves_its_registry_on_a_free_port_and_frees_it() -> None:
    endpoint = serve_metrics(job_settings(), registry_with_one_counter())
    assert endpoint is not None and endpoint.port > 0
    assert scrape(endpoint.url)[("sensorwatch_test_things_total", ())] == 3.0
    endpoint.close()
    with pytest.raises(ConnectionRefusedError), socket.socket() as probe:
        probe.connect(("127.0.0.1", endpoint.port))  # nothing listens any more


def test_metrics_off_serve_nothing() -> None:
    assert serve_metrics(job_settings(metrics=False), registry_with_one_counter()) is None


def test_a_port_in_use_is_one_error_naming_the_setting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EndpointError, match=r"127\.0\.0\.1:\d+ .*--metrics-port"):
            serve_metrics(job_settings(metrics_port=port), registry_with_one_counter())


def test_credentials_are_asked_for_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SENSORWATCH_DASHBOARD_TOKEN", "s3cret-token")
    endpoint = serve_metrics(job_settings(), registry_with_one_counter())
    assert endpoint is not None
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            scrape(endpoint.url)
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"] == "Bearer"
        with pytest.raises(urllib.error.HTTPError):
            scrape(endpoint.url, "Bearer wrong")
        assert scrape(endpoint.url, "Bearer s3cret-token")[("sensorwatch_test_things_total", ())]
    finally:
        endpoint.close()


def test_basic_auth_works_for_metrics_as_for_the_dashboard(monkeypatch) -> None:
    monkeypatch.setenv("SENSORWATCH_DASHBOARD_PASSWORD", "pw")
    endpoint = serve_metrics(job_settings(dashboard_user="ops"), registry_with_one_counter())
    assert endpoint is not None
    try:
        basic = "Basic " + base64.b64encode(b"ops:pw").decode()
        assert scrape(endpoint.url, basic)[("sensorwatch_test_things_total", ())] == 3.0
        with pytest.raises(urllib.error.HTTPError):
            scrape(endpoint.url, "Basic " + base64.b64encode(b"ops:nope").decode())
    finally:
        endpoint.close()


def test_beyond_loopback_needs_credentials_or_a_private_network(monkeypatch) -> None:
    monkeypatch.delenv("SENSORWATCH_METRICS_PORT", raising=False)  # tests/conftest.py's 0
    with pytest.raises(SettingsError, match=r"metrics.*beyond loopback.*DASHBOARD_TOKEN"):
        load_settings(NotifierSettings, {"metrics_host": "0.0.0.0"})
    private = load_settings(
        NotifierSettings, {"metrics_host": "0.0.0.0", "metrics_private_network": True}
    )
    assert private.metrics_port == 9109  # the notifier's own default
    assert load_settings(JobSettings, {}).metrics_port == 9108


PROGRESS = {
    "id": "q1", "name": "ingest", "batchId": 4, "timestamp": "2026-01-01T00:10:00.000Z",
    "numInputRows": 900, "processedRowsPerSecond": 450.0,
    "durationMs": {"triggerExecution": 2000},
    "eventTime": {"watermark": "2026-01-01T00:08:30.000Z"},
    "stateOperators": [{"numRowsTotal": 40, "numRowsDroppedByWatermark": 0}],
    "sources": [{
        "description": "KafkaV2[Subscribe[sensor-readings]]",
        "startOffset": {"sensor-readings": {"0": 100, "1": 50}},
        "endOffset": {"sensor-readings": {"0": 400, "1": 650}},
        "latestOffset": {"sensor-readings": {"0": 1400, "1": 650}},
    }],
    "observedMetrics": {"output": {"rows": 880, "quarantined": 20}},
}  # fmt: skip


def test_a_progress_event_becomes_the_query_metrics() -> None:
    from jobs.writer.pipeline_metrics import progress_row

    clock = [1_000.0]
    metrics = JobMetrics(clock=lambda: clock[0])
    metrics.triggers({"ingest": 2.0})
    metrics.progress(PROGRESS, progress_row(PROGRESS))
    metrics.progress(PROGRESS, progress_row(PROGRESS))  # a second batch like it
    clock[0] = 1_042.5

    got = samples(_text(metrics.registry))
    q = (("query", "ingest"),)
    assert got[("sensorwatch_input_rows_total", q)] == 1800
    assert got[("sensorwatch_output_rows_total", q)] == 1760
    assert got[("sensorwatch_batch_duration_seconds_count", q)] == 2
    assert got[("sensorwatch_batch_duration_seconds_sum", q)] == 4.0
    assert got[("sensorwatch_processed_rows_per_second", q)] == 450.0
    assert got[("sensorwatch_watermark_delay_seconds", q)] == 90.0
    assert got[("sensorwatch_state_rows", q)] == 40
    assert got[("sensorwatch_trigger_interval_seconds", q)] == 2.0
    assert got[("sensorwatch_seconds_since_progress", q)] == 42.5
    behind = {
        labels: value
        for (name, labels), value in got.items()
        if name == "sensorwatch_kafka_records_behind"
    }
    assert behind == {
        (("partition", "0"), ("query", "ingest"), ("topic", "sensor-readings")): 1000,
        (("partition", "1"), ("query", "ingest"), ("topic", "sensor-readings")): 0,
    }


def test_quarantined_records_add_up_by_reason() -> None:
    metrics = JobMetrics()
    metrics.quarantined_by(["invalid_json", "missing_field:event_time"], [15, 5])
    metrics.quarantined_by(["invalid_json"], [15])
    got = samples(_text(metrics.registry))
    reasons = {
        dict(labels)["reason"]: value
        for (name, labels), value in got.items()
        if name == "sensorwatch_quarantined_records_total"
    }
    assert reasons == {"invalid_json": 30, "missing_field:event_time": 5}


def test_an_idle_query_keeps_reporting_and_a_delta_source_has_no_lag() -> None:
    clock = [10.0]
    metrics = JobMetrics(clock=lambda: clock[0])
    metrics.reported("windows")
    clock[0] = 13.0
    assert (
        samples(_text(metrics.registry))[
            ("sensorwatch_seconds_since_progress", (("query", "windows"),))
        ]
        == 3.0
    )
    delta = {"sources": [{"endOffset": {"reservoirVersion": 7, "index": -1}}]}
    assert records_behind(delta) == {}


def test_alerts_are_counted_by_rule_and_the_lake_path_latency_observed() -> None:
    metrics = JobMetrics()
    start = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    hot = Row(sensor_id="s1", window_start=start, rule="overheat_reading", severity="critical")
    long = Row(sensor_id="s2", window_start=start, rule="sustained_high", severity="warning")
    metrics.raised([hot, long], {(hot.rule, "s1", start): start + timedelta(seconds=5)},
                   now=start + timedelta(seconds=7))  # fmt: skip
    got = samples(_text(metrics.registry))
    assert got[("sensorwatch_alerts_total", (("rule", "overheat_reading"),
                                             ("severity", "critical")))] == 1  # fmt: skip
    assert got[("sensorwatch_alerts_total", (("rule", "sustained_high"),
                                             ("severity", "warning")))] == 1  # fmt: skip
    lake = (("path", "lake"),)
    assert got[("sensorwatch_alert_latency_seconds_count", lake)] == 1
    assert got[("sensorwatch_alert_latency_seconds_sum", lake)] == 2.0


def test_the_notifier_counts_posts_failures_and_firing_incidents() -> None:
    metrics = NotifierMetrics()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    firing = {"status": "firing", "rule": "overheat_reading", "severity": "critical"}
    metrics.synced(now, [firing, firing, {**firing, "status": "resolved"}])
    metrics.posted("incidents")
    metrics.failed("realtime", reachable=False)
    metrics.sync_failed(reachable=False)
    metrics.received({"reading_at": "2025-12-31T23:59:59.950Z"}, now)
    got = samples(_text(metrics.registry))
    key = (("rule", "overheat_reading"), ("severity", "critical"))
    assert got[("sensorwatch_incidents_firing", key)] == 2
    assert got[("sensorwatch_notifier_posts_total", (("lane", "incidents"),))] == 1
    assert got[("sensorwatch_notifier_post_failures_total", (("lane", "realtime"),))] == 1
    assert got[("sensorwatch_notifier_sync_failures_total", ())] == 1
    assert got[("sensorwatch_alertmanager_up", ())] == 0
    assert got[("sensorwatch_notifier_last_sync_timestamp_seconds", ())] == now.timestamp()
    realtime = (("path", "realtime"),)
    assert got[("sensorwatch_alert_latency_seconds_sum", realtime)] == pytest.approx(0.05)

    metrics.synced(now, [])  # the episode ended: the pair drops to 0, it does not vanish
    assert samples(_text(metrics.registry))[("sensorwatch_incidents_firing", key)] == 0


def test_the_producer_tally_is_read_when_scraped() -> None:
    summary = Summary()
    registry = producer_registry(lambda: summary)
    summary.delivered, summary.failed = 1234, 2
    got = samples(_text(registry))
    assert got[("sensorwatch_producer_messages_sent_total", ())] == 1234
    assert got[("sensorwatch_producer_messages_failed_total", ())] == 2


def _text(registry: CollectorRegistry) -> str:
    from prometheus_client import generate_latest

    return generate_latest(registry).decode("utf-8")


def test_a_query_that_started_and_never_reported_shows_as_stuck() -> None:
    from types import SimpleNamespace

    from jobs.writer.pipeline_metrics import MetricsListener

    clock = [100.0]
    metrics = JobMetrics(clock=lambda: clock[0])
    listener = MetricsListener(None, metrics)
    listener.onQueryStarted(SimpleNamespace(id="q-1", name="windows"))
    clock[0] = 700.0  # ten minutes in its first batch
    listener.onQueryIdle(SimpleNamespace(id="q-2"))  # another query, by id only
    got = samples(_text(metrics.registry))
    assert got[("sensorwatch_seconds_since_progress", (("query", "windows"),))] == 600.0
    assert got[("sensorwatch_seconds_since_progress", (("query", "q-2"),))] == 0.0


def test_each_query_reports_its_trigger_the_real_time_one_its_checkpoint_interval() -> None:
    from jobs.driver.job import trigger_seconds

    on = job_settings(trigger="5 seconds", readers_trigger="1 minute", realtime=True,
                      realtime_checkpoint_interval="2 minutes")  # fmt: skip
    assert trigger_seconds(on) == {"ingest": 5.0, "windows": 60.0, "realtime": 120.0}
    assert "realtime" not in trigger_seconds(job_settings(realtime=False))
    assert trigger_seconds(job_settings(trigger="availableNow")) == {}
