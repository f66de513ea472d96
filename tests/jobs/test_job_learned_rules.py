"""The rate and deviation rules in the job, on real Kafka and Spark: their alerts are
what the rules say of the pane averages recomputed from the producer's manifest."""

from __future__ import annotations

import contextlib
import math
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from contract.rules.parsing import read_rules
from contract.times import parse_instant
from jobs.alerting.baseline import run as baseline_run
from jobs.alerting.learned_rules import learned_rules
from jobs.alerting.rate import hits
from jobs.stream import run
from lake.reader import LakeReader
from tests.support.drills import kill_hard, start_job, wait_for_new_commit
from tests.support.expected_alerts import valid_readings
from tests.support.job_settings import available_now
from tests.support.polling import STUCK
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl, run_producer

RULES = """
[[rule]]
name = "warming_fast"
kind = "rate"
severity = "warning"
field = "temperature_c"
per_minute = 1.5
window = "5 minutes"
for = "1 minute"

[[rule]]
name = "off_normal"
kind = "deviation"
severity = "warning"
field = "temperature_c"
horizon = "30 minutes"
warm_up = "20 minutes"
deviations = 3.0
for = "1 minute"
"""


def oracle(manifest: list[dict], closed: set[tuple[str, datetime]], rules) -> set:
    """(sensor, rule, minute) of every alert the pure rules raise on the pane averages of
    the valid readings, for the panes the job closed."""
    sums: dict[tuple[str, datetime], list[float]] = defaultdict(list)
    for r in valid_readings(manifest):
        at = parse_instant(r["event_time"])
        minute = datetime.fromtimestamp(math.floor(at.timestamp() / 60) * 60, UTC)
        if (r["sensor_id"], minute) in closed:
            sums[(r["sensor_id"], minute)].append(r["temperature_c"])
    by_sensor: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for (sensor, minute), values in sorted(sums.items()):
        by_sensor[sensor].append((minute, sum(values) / len(values)))
    ever = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
    found = set()
    for sensor, panes in by_sensor.items():
        for rule in rules:
            if rule.rate is not None:
                found |= {(sensor, rule.name, h.pane) for h in hits(panes, ever, rule.rate)}
            else:
                _, breaches = baseline_run(None, panes, rule.baseline)
                found |= {(sensor, rule.name, b.pane) for b in breaches}
    return found


def test_rate_and_deviation_alerts_equal_the_rules_on_the_manifest(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake, rules_file = new_topic("learned"), tmp_path / "lake", tmp_path / "rules.toml"
    rules_file.write_text(RULES, encoding="utf-8")
    manifest = tmp_path / "manifest.jsonl"
    sent = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--sensors", 6,
        "--interval", 20, "--count", 6 * 3 * 180, "--rate", 0, "--seed", 11,
        "--start-time", "2026-01-01T00:00:00Z", "--late-fraction", 0,
        "--spike-rate", 4, "--sustained-rate", 1, "--manifest", manifest,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr

    run(available_now(kafka, topic, lake, rules=rules_file), spark)

    reader = LakeReader(str(lake))
    closed = {
        (p["sensor_id"], p["window_start"])
        for p in reader.read("_panes", columns=["sensor_id", "window_start"]).to_pylist()
    }
    alerts = reader.read("alerts").to_pylist()
    got = {(a["sensor_id"], a["rule"], a["window_start"]) for a in alerts if a["rule"] != ""}
    want = oracle(read_jsonl(manifest), closed, learned_rules(read_rules(rules_file), {}))
    assert {r for _, r, _ in want} == {"warming_fast", "off_normal"}, "a rule never fired"
    assert got == want
    # Each alert says what it compared: the pane's value and the limit it passed.
    some = next(a for a in alerts if a["rule"] == "off_normal")
    assert some["observed_value"] > some["threshold"] or some["observed_value"] < some["threshold"]
    # The warm-up holds: no deviation alert within 20 minutes of a sensor's first pane.
    first = {s: min(t for sensor, t in closed if sensor == s) for s, _ in closed}
    assert all(
        a["window_start"] - first[a["sensor_id"]] >= timedelta(minutes=20)
        for a in alerts if a["rule"] == "off_normal"
    )  # fmt: skip
    assert len(closed) > 6 * 150 and all(t.tzinfo is not None for _, t in closed)
    assert timedelta(0) < max(t for _, t in closed) - min(t for _, t in closed)


@pytest.mark.slow
def test_a_kill_9_after_a_baseline_commit_changes_no_alert(
    spark, kafka, new_topic, tmp_path
) -> None:
    """The job killed -9 the instant a windows batch committed its baselines, then caught
    up: the rate and deviation alerts equal an uninterrupted run's over the same topic."""
    topic, rules_file = new_topic("learned-kill"), tmp_path / "rules.toml"
    rules_file.write_text(RULES, encoding="utf-8")
    lake, reference, fleet = tmp_path / "lake", tmp_path / "reference", tmp_path / "fleet.jsonl"
    sending = Running(
        [sys.executable, "-m", "producer", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--sensors", "6", "--interval", "20", "--count", str(6 * 3 * 180),
         "--rate", "60", "--seed", "11", "--start-time", "2026-01-01T00:00:00Z",
         "--late-fraction", "0", "--spike-rate", "4", "--sustained-rate", "1",
         "--manifest", str(tmp_path / "manifest.jsonl"), "--registry-out", str(fleet)],
        cwd=PROJECT_ROOT,
    )  # fmt: skip
    job = start_job(kafka, topic, lake, fleet, env={"SENSORWATCH_RULES": str(rules_file)})
    try:
        log = lake / "_baselines" / "_delta_log"
        wait_for_new_commit(log, set(), STUCK, job)
        # A second batch's baselines, so that the restart continues learned ones; on a
        # slow machine the first batch may have closed every pane: then kill there.
        with contextlib.suppress(AssertionError):
            wait_for_new_commit(log, set(log.glob("*.json")), 60, job)
        kill_hard(job)  # its checkpoint may not hold the batch yet: replayed below
        assert sending.finish(timeout=STUCK) == 0, "\n".join(sending.lines[-20:])
    finally:
        for running in (sending, job):
            running.kill()
    run(available_now(kafka, topic, lake, registry=fleet, rules=rules_file), spark)
    run(available_now(kafka, topic, reference, registry=fleet, rules=rules_file), spark)

    def learned(root: Path) -> dict:
        rows = LakeReader(str(root)).read("alerts").to_pylist()
        return {(a["sensor_id"], a["rule"], a["window_start"]): a["observed_value"]
                for a in rows if a["rule"] in ("warming_fast", "off_normal")}  # fmt: skip

    got, want = learned(lake), learned(reference)
    assert {r for _, r, _ in want} == {"warming_fast", "off_normal"}
    assert got.keys() == want.keys()
    # Pane sums may add up in another order in another run: the last bits may differ.
    assert all(math.isclose(got[k], want[k], rel_tol=1e-9) for k in want)
