"""scripts/bench stays runnable: its pure parts, the JSON and plot writing, the CLI.

No benchmark runs here (SPEC section 8: benchmarks report, they never pass or fail).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conf.paths import PROJECT_ROOT
from scripts.benchmarks.env import parse_summary
from scripts.benchmarks.measure import profile
from scripts.benchmarks.plan import full_plan, quick_plan
from scripts.benchmarks.plot import plot
from scripts.benchmarks.report import table, write_json
from scripts.benchmarks.stats import percentile, rate, summarize

FIGURES = {
    "mode": "quick",
    "machine": {"cpu_count": 2, "memory_gb": 8.0},
    "spark_session_start_s": 8.5,
    "throughput": {
        "producer": {"messages": 1000, "seconds": 0.1, "msgs_per_s": 10_000},
        "consumer": {"messages": 1000, "seconds": 0.05, "msgs_per_s": 20_000},
        "job_all_tables": {"messages": 1000, "seconds": 2.0, "rows_per_s": 500},
        "job_readings_only": {"messages": 1000, "seconds": 1.0, "rows_per_s": 1000},
    },
    "latency": {
        "target_rate": 5000,
        "trigger": "2 seconds",
        "latency_s": {"count": 3, "min": 1.0, "p50": 2.0, "p95": 2.9, "p99": 2.98, "max": 3.0},
        "latencies_s": [1.0, 2.0, 3.0],
        "caught_up": True,
        "ingest_rows_per_s": 5000,
        "backlog_max": 10,
    },
    "memory": {"job_peak_rss_mb": 1500.0},
    "scaling": {
        "backlog": 1000,
        "partitions": [{"partitions": 1, "rows_per_s": 400}, {"partitions": 6, "rows_per_s": 500}],
        "sensors": [{"sensors": 100, "rows_per_s": 600}, {"sensors": 10_000, "rows_per_s": 300}],
    },
}


def test_percentiles_interpolate_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0, 5.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 95) == pytest.approx(4.8)
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_and_rate() -> None:
    assert summarize([])["p50"] is None
    summary = summarize([1.0, 2.0, 3.0])
    assert (summary["count"], summary["p50"], summary["max"]) == (3, 2.0, 3.0)
    assert rate(10, 2.0) == 5.0 and rate(10, 0) == 0.0


def test_producer_summary_is_parsed() -> None:
    stderr = (
        "producer: 1000 sensors -> t ...\n"
        "producer: done: 200,001 delivered, 0 failed in 3.4s (58,017 msg/s), seed 9\n"
    )
    assert parse_summary(stderr) == (200_001, 0, 3.4, 58_017.0)
    with pytest.raises(ValueError):
        parse_summary("producer: invalid settings")


def test_profile_sums_duration_parts_per_query() -> None:
    events = [
        {"name": "ingest", "numInputRows": 10, "durationMs": {"addBatch": 1500, "walCommit": 20}},
        {"name": "ingest", "numInputRows": 5, "durationMs": {"addBatch": 500, "other": 9}},
    ]
    result = profile(events)["ingest"]
    assert (result["batches"], result["input_rows"], result["addBatch"]) == (2, 15, 2.0)


def test_plans_cover_the_issue_sizes() -> None:
    full, quick = full_plan(), quick_plan()
    assert full.backlog >= 1_000_000 and full.latency_rate == 5_000
    assert full.scaling_partitions == (1, 3, 6)
    assert full.scaling_sensors == (100, 1_000, 10_000)
    assert quick.backlog < full.backlog and quick.notes, "quick mode says what it leaves out"


def test_json_table_and_plot_from_synthetic_figures(tmp_path) -> None:
    write_json(FIGURES, tmp_path / "figures.json")
    plot(FIGURES, tmp_path / "figures.png")
    plot({"mode": "quick"}, tmp_path / "empty.png")  # an interrupted run still plots

    assert json.loads((tmp_path / "figures.json").read_text()) == FIGURES
    assert (tmp_path / "figures.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = table(FIGURES)
    assert "20,000" in text and "p95 2.90 s" in text and "10,000 sensors" in text


def test_cli_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scripts.benchmarks", "--help"],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert done.returncode == 0
    assert "--quick" in done.stdout and "--out" in done.stdout
