"""Alerting against the real broker: the producer's scripted incidents, and nothing else."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from conf.settings.job import JobSettings
from jobs.stream import run
from producer.reading import IsoClock, Reading, encode
from tests.support import expected_alerts as expect
from tests.support.expected_stats import epoch
from tests.support.job_settings import available_now
from tests.support.kafka_io import produce
from tests.support.producer_run import read_jsonl, run_producer

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

START = "2026-01-01T00:00:00Z"


def stamp(ts: datetime) -> float:
    # collect() gives naive local time (the process's zone); astimezone reads it so.
    return round(ts.astimezone(UTC).timestamp(), 3)


def job_settings(kafka, topic, lake, registry) -> JobSettings:
    return available_now(kafka, topic, lake, registry=registry)


@pytest.fixture(scope="module")
def incidents(spark, kafka, tmp_path_factory):
    """40 sensors, many incidents, 2 % of every fault, through the job twice."""
    from tests.support.kafka_io import make_topic

    tmp = tmp_path_factory.mktemp("alerts")
    topic, lake = make_topic(kafka, "alerts"), tmp / "lake"
    manifest, registry = tmp / "manifest.jsonl", tmp / "fleet.jsonl"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 40_000,
        "--sensors", 40, "--seed", 9, "--start-time", START, "--manifest", manifest,
        "--registry-out", registry, "--spike-rate", 1, "--sustained-rate", 0.5,
        "--silence-rate", 0.5, "--battery-rate", 0.3, "--humidity-rate", 0.3,
        "--late-fraction", 0.02, "--out-of-order-fraction", 0.02,
        "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    settings = job_settings(kafka, topic, lake, registry)
    run(settings, spark)
    alerts = spark.read.format("delta").load(str(lake / "alerts"))
    first = sorted(r.alert_id for r in alerts.select("alert_id").collect())
    run(settings, spark)
    metrics = spark.read.format("delta").load(str(lake / "pipeline_metrics"))
    watermark = metrics.filter(F.col("query") == "windows").agg(F.max("watermark"))
    return {
        "alerts": alerts.collect(),
        "ids_after_first_run": first,
        "manifest": read_jsonl(manifest),
        "registry": {s["sensor_id"]: s for s in map(json.loads, registry.read_text().splitlines())},
        "watermark": stamp(watermark.first()[0]),
    }


def by_rule(alerts, rule: str):
    return [a for a in alerts if a.rule == rule]


def test_every_spike_gives_one_critical_alert_and_nothing_else_does(incidents) -> None:
    manifest, registry = incidents["manifest"], incidents["registry"]
    critical = by_rule(incidents["alerts"], "overheat_reading")
    spikes = {
        (
            line["sensor_id"],
            (int(datetime.fromisoformat(line["event_time"]).timestamp()) // 60) * 60.0,
        )
        for line in manifest
        if line.get("incident") == "spike"
    }

    assert spikes, "the run must contain spikes"
    assert {(a.sensor_id, stamp(a.window_start)) for a in critical} == spikes
    assert expect.overheat(manifest, registry) == spikes, "only spikes reach the threshold"
    assert all(a.severity == "critical" and a.observed_value >= a.threshold for a in critical)
    assert Counter((a.sensor_id, a.window_start) for a in critical).most_common(1)[0][1] == 1


def test_per_sensor_thresholds_come_from_the_registry(incidents) -> None:
    registry = incidents["registry"]
    critical = by_rule(incidents["alerts"], "overheat_reading")

    for alert in critical:
        assert alert.threshold == expect.critical_threshold(registry, alert.sensor_id)
        assert alert.site == registry[alert.sensor_id]["site"]
    below_default = [a for a in critical if a.observed_value < 45.0]
    assert below_default, "some alerts exist only because of a sensor's own max_temp_c"


def test_sustained_overheating_gives_the_expected_warning_windows(incidents) -> None:
    warnings = by_rule(incidents["alerts"], "sustained_high")
    expected = expect.sustained(incidents["manifest"], incidents["watermark"])

    assert expected, "the run must contain sustained overheating"
    assert {(a.sensor_id, stamp(a.window_start)) for a in warnings} == expected
    assert all(a.readings >= 3 and a.observed_value >= 35.0 for a in warnings)


def test_failing_batteries_give_battery_low_and_nothing_else_does(incidents) -> None:
    manifest = incidents["manifest"]
    found = by_rule(incidents["alerts"], "battery_low")
    scripted = {
        (line["sensor_id"], (int(epoch(line["event_time"])) // 60) * 60.0)
        for line in manifest
        if line.get("incident") == "battery"
    }

    assert scripted, "the run must contain failing batteries"
    assert {(a.sensor_id, stamp(a.window_start)) for a in found} == scripted
    assert expect.battery_low(manifest) == scripted, "only failing batteries run that low"
    assert all(a.severity == "warning" and a.observed_value <= a.threshold == 15.0 for a in found)


def test_humid_stretches_give_the_expected_humidity_high_minutes(incidents) -> None:
    found = by_rule(incidents["alerts"], "humidity_high")
    expected = expect.humidity_high(incidents["manifest"], incidents["watermark"])
    humid = {
        line["sensor_id"] for line in incidents["manifest"] if line.get("incident") == "humidity"
    }

    assert expected, "the run must contain humid stretches"
    assert {(a.sensor_id, stamp(a.window_start)) for a in found} == expected
    assert {a.sensor_id for a in found} <= humid
    assert all(a.readings >= 2 and a.observed_value >= 80.0 for a in found)


def test_each_silence_gives_exactly_one_sensor_silent(incidents) -> None:
    silent = by_rule(incidents["alerts"], "sensor_silent")
    expected = expect.silences(incidents["manifest"], incidents["watermark"])
    scripted = [line for line in incidents["manifest"] if line.get("incident") == "silence_end"]

    assert scripted, "the run must contain silences"
    assert {(a.sensor_id, stamp(a.window_start)) for a in silent} == expected
    assert len(silent) == len(expected)
    # Every scripted silence that ended is among them.
    for line in scripted:
        assert any(
            a.sensor_id == line["sensor_id"]
            and abs(
                stamp(a.window_start) - datetime.fromisoformat(line["silent_since"]).timestamp()
            )
            < 6
            for a in silent
        ), line


def test_duplicates_and_reruns_leave_the_alerts_unchanged(incidents) -> None:
    ids = [a.alert_id for a in incidents["alerts"]]

    assert len(ids) == len(set(ids))
    assert sorted(ids) == incidents["ids_after_first_run"]
    assert any(line["kind"] == "duplicate" for line in incidents["manifest"])


def test_thresholds_decide_and_unregistered_sensors_are_kept(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake, registry = new_topic("thresholds"), tmp_path / "lake", tmp_path / "fleet.jsonl"
    registry.write_text(
        json.dumps({"sensor_id": "office-1", "site": "HQ", "max_temp_c": None}) + "\n"
        + json.dumps({"sensor_id": "cold-1", "site": "HQ", "max_temp_c": 10.0}) + "\n"
    )  # fmt: skip
    clock, at = IsoClock(), datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC).timestamp()
    readings = [
        Reading("r1", "office-1", at, 40.0, 40.0, 90.0, 1),  # warm office: below 45
        Reading("r2", "cold-1", at, 12.0, 60.0, 90.0, 1),  # warm fridge: above its 10
        Reading("r3", "ghost-7", at, 50.0, 40.0, 90.0, 1),  # not in the registry
    ]
    produce(
        kafka.bootstrap,
        topic,
        [(r.sensor_id, encode(r, clock.format(r.event_time))) for r in readings],
    )

    run(job_settings(kafka, topic, lake, registry), spark)

    alerts = spark.read.format("delta").load(str(lake / "alerts")).collect()
    assert sorted((a.sensor_id, a.site, a.threshold) for a in alerts) == [
        ("cold-1", "HQ", 10.0),
        ("ghost-7", "unregistered", 45.0),
    ]
    kept = spark.read.format("delta").load(str(lake / "readings"))
    assert sorted(r.sensor_id for r in kept.collect()) == ["cold-1", "ghost-7", "office-1"]
