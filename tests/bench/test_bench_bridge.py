"""scripts/bench --bridge (issue 70): a small plan through a real Mosquitto, bridge and
Kafka counts every reading it published and times each one (no figure asserted:
benchmarks report, they never pass or fail)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.bridge import BridgePlan, RunningJob, caught_up, measure_on

pytestmark = pytest.mark.mqtt


def test_a_small_plan_counts_and_times_every_reading(kafka, tmp_path) -> None:
    figures: dict = {}
    plan = BridgePlan(messages=600, publishers=2, rate=400.0, seconds=1.0)
    measure_on(kafka.bootstrap, plan, tmp_path, figures, lambda _: None)
    put, latency = figures["throughput"], figures["latency"]
    assert (put["published"], put["arrived"]) == (600, 600)
    assert put["readings_per_s"] > 0 and len(put["publishers"]) == 2
    assert set(put["cpu_us_per_reading"]) == {
        "bridge",
        "bridge engine",
        "mosquitto",
        "bench devices",
    }
    assert [
        (p["device"], p["published"], p["acknowledged"], p["error"]) for p in put["publishers"]
    ] == [("bench-site-0", 300, 300, ""), ("bench-site-1", 300, 300, "")]
    assert (latency["published"], latency["arrived"]) == (400, 400)
    ms = latency["ms"]
    assert 0 < ms["p50"] <= ms["p95"] <= ms["p99"] <= ms["max"]


def test_each_hot_reading_is_timed_from_its_publish_to_its_first_alert(tmp_path) -> None:
    job = RunningJob("127.0.0.1:9", "readings", tmp_path, spark=None)
    hot = tmp_path / "hot"
    hot.with_suffix(".site-a.log").write_text("s-1 1000000000000\ns-2 1000500000000\n")
    hot.with_suffix(".site-b.log").write_text("s-3 1001000000000\n")
    job.first_alert = {"s-1": 1000.020, "s-2": 1000.540, "other": 999.0}
    to = job.to_alerts(hot)
    assert (to["hot_readings"], to["alerts"], to["missing"]) == (3, 2, 1)
    assert to["ms"]["p50"] == pytest.approx(30.0) and to["ms"]["max"] == pytest.approx(40.0)
    assert RunningJob("127.0.0.1:9", "t", tmp_path, None).to_alerts(hot)["ms"]["p50"] is None


def test_the_lake_path_caught_up_once_ingest_then_windows_had_nothing_new() -> None:
    since = datetime(2026, 12, 8, 0, 0, 10, tzinfo=UTC)

    def at(second: int) -> str:
        return f"2026-12-08T00:00:{second:02d}.000Z"

    progress = [
        {"id": "i", "name": "ingest", "timestamp": at(5), "numInputRows": 0},  # before
        {"id": "w", "name": "windows", "timestamp": at(12), "numInputRows": 0},
        {"id": "i", "name": "ingest", "timestamp": at(14), "numInputRows": 900},
        {"id": "w", "name": "windows", "timestamp": at(16), "numInputRows": 900},
    ]
    assert not caught_up(progress, [], since)  # windows' quiet batch came before ingest's
    ingest_idle = [{"id": "i", "timestamp": at(18)}]  # Spark's idle event, no progress
    assert not caught_up(progress, ingest_idle, since)
    windows_done = {"id": "w", "name": "windows", "timestamp": at(20), "numInputRows": 0}
    assert caught_up([*progress, windows_done], ingest_idle, since)
    assert caught_up(progress, [*ingest_idle, {"id": "w", "timestamp": at(19)}], since)
