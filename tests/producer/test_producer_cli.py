"""python -m producer against the real broker: delivered = manifest = topic, reproducibly."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from conf.paths import PROJECT_ROOT
from local_stack.server import free_port
from tests.support.kafka_io import consume_messages
from tests.support.producer_run import read_jsonl, run_producer
from tests.support.spec_event import violations

SIMULATED = ("--start-time", "2026-01-01T00:00:00Z")


def read_topic(bootstrap: str, topic: str, expected: int) -> list:
    """The messages of ``topic`` from the start (confluent-kafka Message objects)."""
    return consume_messages(bootstrap, topic, expected)


def test_manifest_matches_the_topic(kafka, new_topic, tmp_path) -> None:
    topic = new_topic("producer")
    manifest = tmp_path / "m.jsonl"

    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 20_000,
        "--sensors", 100, "--seed", 11, "--manifest", manifest, *SIMULATED,
        "--late-fraction", 0.03, "--out-of-order-fraction", 0.03,
        "--duplicate-fraction", 0.03, "--malformed-fraction", 0.03,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "20,000 delivered, 0 failed" in done.stderr
    lines = read_jsonl(manifest)
    messages = read_topic(kafka.bootstrap, topic, expected=20_000)
    assert len(lines) == len(messages) == 20_000
    by_position = {(line["partition"], line["offset"]): line for line in lines}
    assert set(by_position) == {(m.partition(), m.offset()) for m in messages}
    for m in messages:
        line = by_position[(m.partition(), m.offset())]
        assert m.key().decode() == line["sensor_id"]
        problems = violations(m.value())
        if line["kind"] == "malformed":
            assert problems, line
        else:
            assert not problems, (line, problems)
            assert json.loads(m.value())["event_id"] == line["event_id"]
    kinds = Counter(line["kind"] for line in lines)
    for kind in ("late", "out_of_order", "malformed", "duplicate"):
        assert 0.02 <= kinds[kind] / 20_000 <= 0.04, (kind, kinds[kind])


def test_same_seed_same_fleet_same_events(kafka, new_topic, tmp_path) -> None:
    runs = []
    for attempt in ("a", "b"):
        manifest, registry = tmp_path / f"{attempt}.jsonl", tmp_path / f"{attempt}-fleet.jsonl"
        done = run_producer(
            "--bootstrap-servers", kafka.bootstrap, "--topic", new_topic("same-seed"),
            "--count", 5_000, "--sensors", 50, "--seed", 7, "--manifest", manifest,
            "--registry-out", registry, *SIMULATED,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs.append((read_jsonl(manifest), registry.read_text()))

    (first, fleet_a), (second, fleet_b) = runs
    assert [line["event_id"] for line in first] == [line["event_id"] for line in second]
    assert fleet_a == fleet_b
    fleet = [json.loads(line) for line in fleet_a.splitlines()]
    assert [s["sensor_id"] for s in fleet] == [f"sensor-{i:04d}" for i in range(1, 51)]
    assert {"site", "building", "floor", "room", "device_model", "firmware", "install_date",
            "latitude", "longitude", "max_temp_c"} <= set(fleet[0])  # fmt: skip


def test_first_spike_after_sends_one_spike_then_and_records_it(kafka, new_topic, tmp_path) -> None:
    manifest, registry = tmp_path / "m.jsonl", tmp_path / "fleet.jsonl"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", new_topic("first-spike"),
        "--count", 2_000, "--sensors", 20, "--interval", 2, "--seed", 3, *SIMULATED,
        "--spike-rate", 0, "--sustained-rate", 0, "--silence-rate", 0,
        "--first-spike-after", 30, "--manifest", manifest, "--registry-out", registry,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "a scripted spike at +30 s" in done.stderr
    incidents = [line for line in read_jsonl(manifest) if line["kind"] == "incident"]
    assert [line["incident"] for line in incidents] == ["spike"]
    at = datetime.fromisoformat(incidents[0]["event_time"]) - datetime.fromisoformat(SIMULATED[1])
    assert 30 <= at.total_seconds() < 32
    sensor = next(
        s for s in map(json.loads, registry.read_text().splitlines())
        if s["sensor_id"] == incidents[0]["sensor_id"]
    )  # fmt: skip
    assert incidents[0]["temperature_c"] >= (sensor["max_temp_c"] or 45.0) + 2.9


def test_missing_topic_fails_clearly(kafka) -> None:
    done = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", "no-such-topic",
                        "--count", 10)  # fmt: skip

    assert done.returncode == 2
    assert "'no-such-topic' does not exist" in done.stderr
    assert "Traceback" not in done.stderr


def test_unreachable_broker_fails_clearly() -> None:
    done = run_producer("--bootstrap-servers", f"127.0.0.1:{free_port()}", "--count", 10)

    assert done.returncode == 2
    assert "cannot reach Kafka" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--late-fraction", "1.5"], "--late-fraction (SENSORWATCH_LATE_FRACTION)"),
        (["--malformed-fraction", "-0.1"], "--malformed-fraction"),
        (["--late-delay", "300:30"], "(SENSORWATCH_LATE_DELAY): needs 0 <= MIN <= MAX"),
        (["--late-delay", "soon"], "expected MIN:MAX"),
        (["--start-time", "2026-01-01T00:00:00"], "(SENSORWATCH_START_TIME): needs a time zone"),
        (["--sensors", "zero"], "--sensors"),
        (["--first-spike-after", "-5"], "--first-spike-after (SENSORWATCH_FIRST_SPIKE_AFTER)"),
    ],
)  # fmt: skip
def test_bad_settings_fail_before_connecting(flags: list[str], expected: str) -> None:
    done = run_producer(*flags)

    assert done.returncode == 2
    assert "invalid settings" in done.stderr and expected in done.stderr
    assert "Traceback" not in done.stderr


def test_environment_sets_and_flags_override(kafka, new_topic, tmp_path, monkeypatch) -> None:
    topic = new_topic("env")
    monkeypatch.setenv("SENSORWATCH_BOOTSTRAP_SERVERS", kafka.bootstrap)
    monkeypatch.setenv("SENSORWATCH_TOPIC", topic)
    monkeypatch.setenv("SENSORWATCH_COUNT", "500")
    done = run_producer("--count", 300, "--seed", 1, *SIMULATED, "--manifest", tmp_path / "m")

    assert done.returncode == 0, done.stderr
    assert len(read_jsonl(tmp_path / "m")) == 300


def test_sigterm_flushes_and_exits_cleanly(kafka, new_topic, tmp_path) -> None:
    topic, manifest = new_topic("sigterm"), tmp_path / "m.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "producer", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--rate", "2000", "--seed", "4", "--manifest", str(manifest),
         "--progress-interval", "0.2", *SIMULATED],
        stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
    )  # fmt: skip
    try:
        # Wait (with a deadline) until it has delivered something, then ask it to stop.
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            if " delivered (" in line and not line.startswith("producer: 0 "):
                break
            assert time.monotonic() < deadline, "producer never reported progress"
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, rest
    finally:
        proc.kill()

    lines = read_jsonl(manifest)
    assert "done:" in rest and "0 failed" in rest
    assert len(lines) > 0
    assert len(read_topic(kafka.bootstrap, topic, expected=len(lines))) == len(lines)


def test_rate_paces_sending(kafka, new_topic) -> None:
    topic = new_topic("rate")
    done = run_producer("--bootstrap-servers", kafka.bootstrap, "--topic", topic,
                        "--rate", 400, "--count", 800, *SIMULATED)  # fmt: skip

    assert done.returncode == 0, done.stderr
    stamps = sorted(
        m.timestamp()[1]
        for m in read_topic(kafka.bootstrap, topic, expected=800)
        if m.timestamp()[0] == TIMESTAMP_CREATE_TIME
    )
    # Pacing never runs ahead of schedule: 800 messages at 400/s span at least ~2 s.
    assert len(stamps) == 800
    assert (stamps[-1] - stamps[0]) / 1000 >= 799 / 400 * 0.95
