"""scripts/bench stays runnable: its pure parts, the JSON and plot writing, the CLI.

No benchmark runs here (docs/architecture.md#performance-targets: benchmarks report, they
never pass or fail).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.env import parse_summary
from bench.measure import batch_boundaries, profile
from bench.plan import full_plan, quick_plan
from bench.plot import plot, plot_soak
from bench.report import measured_run, soak_table, table, write_json
from bench.scale_out import _BATCH
from bench.soak import (
    MEMORY_PARTS,
    SoakPlan,
    TreeMemory,
    batch_window,
    committed_batches,
    compressed_interval,
    compressed_start,
    flatness,
    ingested_offsets,
    log_findings,
    verdicts,
)
from bench.stats import percentile, rate, summarize, tail_by_phase
from common.waiting import poll_until
from conf.paths import PROJECT_ROOT
from jobs.spark.scratch import LOCK_NAME

FIGURES = {
    "mode": "quick",
    "machine": {"cpu_count": 2, "memory_gb": 8.0},
    "spark_session_start_s": 8.5,
    "throughput": {
        "producer": {"messages": 1000, "seconds": 0.1, "msgs_per_s": 10_000},
        "consumer": {"messages": 1000, "seconds": 0.05, "msgs_per_s": 20_000},
        "job_all_tables": {"messages": 1000, "seconds": 2.0, "rows_per_s": 500},
        "job_readings_only": {"messages": 1000, "seconds": 1.0, "rows_per_s": 1000},
        "metrics_cost": {
            "rows_per_s_off": [500, 520],
            "rows_per_s_on": [505, 511],
            "median_off": 510,
            "median_on": 508,
            "on_vs_off_pct": -0.4,
            "spread_pct": 4.0,
            "cpu_ms_per_1k_rows_off": [80.0, 84.0],
            "cpu_ms_per_1k_rows_on": [81.0, 83.0],
            "cpu_on_vs_off_pct": 0.0,
        },
    },
    "latency": {
        "target_rate": 5000,
        "trigger": "2 seconds",
        "latency_s": {"count": 3, "min": 1.0, "p50": 2.0, "p95": 2.9, "p99": 2.98, "max": 3.0},
        "latencies_s": [1.0, 2.0, 3.0],
        "caught_up": True,
        "ingest_rows_per_s": 5000,
        "backlog_max": 10,
        "realtime_latency_ms": {"count": 40, "p50": 12.5, "p95": 80.0, "p99": 210.0},
        "realtime_alert_ids": 12,
        "realtime_missing": 0,
        "realtime_unknown": 0,
        "dashboard_latency_ms": {"count": 11, "p50": 20.0, "p95": 95.0, "p99": 240.0},
        "realtime_slowest": [{"at_s": 0.4, "ms": 791}, {"at_s": 31.0, "ms": 420}],
        "realtime_batches_at_s": [-6.2, 30.8],
        "job_cpu_cores": 1.61,
    },
    "steady": {
        "realtime": True,
        "seconds": 30.0,
        "highest_kept_up": 10_000,
        "runs": [
            {
                "target_rate": 10_000,
                "kept_up": True,
                "ingest_rows_per_s": 9_900,
                "backlog_max": 20_000,
                "latency_s": {"p95": 2.5},
                "job_cpu_cores": 1.8,
                "realtime_latency_ms": {"p50": 15.0, "p95": 60.0, "p99": 150.0},
                "realtime_missing": 0,
                "realtime_unknown": 0,
            },
            {
                "target_rate": 20_000,
                "kept_up": False,
                "ingest_rows_per_s": 15_000,
                "backlog_max": 200_000,
                "latency_s": {"p95": 9.5},
                "job_cpu_cores": 1.9,
                "realtime_latency_ms": {"p50": 30.0, "p95": 180.0, "p99": 400.0},
                "incident_latency_s": {"count": 9, "p50": 0.2, "p95": 0.3, "p99": 0.4},
                "realtime_missing": 0,
                "realtime_unknown": 0,
            },
        ],
    },
    "steady_lake_only": {
        "realtime": False,
        "seconds": 30.0,
        "highest_kept_up": 20_000,
        "runs": [
            {
                "target_rate": 20_000,
                "kept_up": True,
                "ingest_rows_per_s": 19_800,
                "backlog_max": 30_000,
                "latency_s": {"p95": 3.0},
                "job_cpu_cores": 1.7,
            },
        ],
    },
    "burst": {
        "idle_s": 60.0,
        "realtime_missing": 0,
        "realtime_tail_by_phase_ms": {
            "boundaries_at_s": [41.5, 101.5],
            "first_10s": {
                "count": 80,
                "min": 4.0,
                "p50": 9.0,
                "p95": 300.0,
                "p99": 610.0,
                "max": 880.0,
            },
            "boundaries": {
                "count": 12,
                "min": 5.0,
                "p50": 20.0,
                "p95": 150.0,
                "p99": 190.0,
                "max": 200.0,
            },
            "steady": {"count": 900, "min": 3.0, "p50": 8.0, "p95": 30.0, "p99": 60.0, "max": 90.0},
        },
    },
    "latency_lake_behind": {
        "target_rate": 5000,
        "lake_limit": 5000,
        "latency_s": {"count": 1, "p50": 30.0, "p95": 30.0, "p99": 30.0},
        "realtime_latency_ms": {"count": 40, "p50": 14.0, "p95": 45.0, "p99": 120.0},
        "realtime_alert_ids": 12,
        "ingest_rows_per_s": 2500,
        "backlog_max": 80_000,
        "backlog_when_sending_ended": 75_000,
    },
    "latency_lake_only": {
        "target_rate": 5000,
        "latency_s": {"count": 3, "min": 1.0, "p50": 1.5, "p95": 2.5, "p99": 2.7, "max": 2.8},
        "caught_up": True,
        "ingest_rows_per_s": 5100,
        "backlog_max": 9,
    },
    "memory": {"job_peak_rss_mb": 1500.0},
    "scaling": {
        "backlog": 1000,
        "partitions": [{"partitions": 1, "rows_per_s": 400}, {"partitions": 6, "rows_per_s": 500}],
        "sensors": [{"sensors": 100, "rows_per_s": 600}, {"sensors": 10_000, "rows_per_s": 300}],
    },
    "driver_results": {
        "messages": 30_000,
        "points": [
            {
                "query": "ingest",
                "max_offsets_per_trigger": 1_000,
                "batches": 30,
                "rows_per_batch": 1_000,
                "result_kb_per_batch": 14.2,
                "result_kb_max": 15.0,
            },
            {
                "query": "ingest",
                "max_offsets_per_trigger": 30_000,
                "batches": 1,
                "rows_per_batch": 30_000,
                "result_kb_per_batch": 14.9,
                "result_kb_max": 14.9,
            },
        ],
    },
    "cores": {
        "messages": 1000,
        "runs": [
            {
                "setup": "local[1]",
                "cores": 1,
                "wall_s": 20.0,
                "seconds": 10.0,
                "rows_per_s": 100,
                "complete": True,
            },
            {
                "setup": "local[2]",
                "cores": 2,
                "wall_s": 15.0,
                "seconds": 6.0,
                "rows_per_s": 167,
                "complete": True,
            },
        ],
        "two_over_one": {"local": 1.67},
    },
    "s3": {
        "lakes": "s3a://bench/lakes",
        "job_all_tables": {"messages": 1000, "seconds": 4.0, "rows_per_s": 250},
        "latency": {
            "target_rate": 5000,
            "latency_s": {"count": 2, "p50": 3.1, "p95": 4.2, "p99": 4.3},
            "incident_latency_s": {"count": 2, "p50": 3.5, "p95": 4.8, "p99": 4.9},
        },
        "small_batches": {
            "target_rate": 200,
            "ingest_batch_s": {"p50": 0.9, "p95": 1.4},
            "ingest_batch_rows_median": 400,
        },
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


def test_a_burst_s_tail_is_told_by_phase() -> None:
    # Load from t=100; a real-time batch boundary at t=160.
    latencies = [0.9, 0.4, 0.02, 0.03, 0.3, 0.2, 0.01]
    read_at = [100.1, 109.9, 110.0, 130.0, 159.6, 161.9, 162.1]
    phases = tail_by_phase(latencies, read_at, 100.0, [160.0])
    assert phases["first_10s"]["count"] == 2 and phases["first_10s"]["max"] == 0.9
    assert phases["boundaries"]["count"] == 2 and phases["boundaries"]["max"] == 0.3
    assert phases["steady"]["count"] == 3 and phases["steady"]["max"] == 0.03
    # A boundary within the first seconds: those readings are the first seconds'.
    early = tail_by_phase([0.5], [101.0], 100.0, [101.0])
    assert early["first_10s"]["count"] == 1 and early["boundaries"]["count"] == 0


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
    lines = {line.split("  ")[0]: line for line in text.splitlines()}
    assert "14.90 KiB per batch of 30,000 rows" in text
    assert lines["cores: local two over one"].endswith("  1.67x")
    assert "250  (1,000 in 4.00 s)" in lines["s3: job rows/s, all tables"]
    assert "p95 4.20 s" in lines["s3: overheat latency @5,000/s"]
    assert lines["real-time path: hot reading -> sensor-alerts"].endswith(
        "p50 12.50 ms, p95 80.00 ms, p99 210.00 ms (40 messages, 12 alert ids; missing 0, "
        "unknown 0)"
    )
    assert "p95 2.50 s" in lines["without real-time path: overheat latency @5,000/s"]
    assert "p95 45.00 ms" in lines["lake path behind: real-time path: hot reading -> sensor-alerts"]
    assert lines["lake path behind: ingest held back"].endswith(
        "2,500 rows/s, at most 5,000 per micro-batch (backlog max 80,000, at the end 75,000)"
    )
    assert any(
        line.strip().startswith("slowest to sensor-alerts")
        and line.endswith("791 ms at 0.4 s, 420 ms at 31.0 s (real-time batches started at "
                          "-6.2 s, 30.8 s)")
        for line in text.splitlines()
    )  # fmt: skip
    assert lines["burst after 60 s idle: real-time, first_10s"].endswith(
        "p50 9.00 ms, p95 300.00 ms, p99 610.00 ms, max 880.00 ms (80 alerts)"
    )
    assert "p95 30.00 ms" in lines["burst after 60 s idle: real-time, steady"]
    assert lines["burst: missing on the topic"].endswith("0 (boundaries at [41.5, 101.5] s)")
    assert lines["real-time path: hot reading -> dashboard page"].endswith(
        "p50 20.00 ms, p95 95.00 ms, p99 240.00 ms (11 alerts)"
    )
    assert "fell behind (ingest 15,000 rows/s" in lines["steady 20,000/s, every query on"]
    assert "job CPU 1.70 cores" in lines["steady 20,000/s, lake path alone"]
    realtime_rows = [line for line in text.splitlines() if "  real-time path:" in line]
    assert realtime_rows[1].endswith(
        "p50 30.00 ms, p95 180.00 ms, p99 400.00 ms (missing 0, unknown 0)"
    )
    assert any(
        line.startswith("  incident active in Alertmanager")
        and line.endswith("p50 0.20 s, p95 0.30 s, p99 0.40 s (9 incidents)")
        for line in text.splitlines()
    )
    assert lines["highest steady rate kept up, every query on"].endswith(
        "10,000 readings/s (over 30 s each)"
    )
    assert lines["highest steady rate kept up, lake path alone"].endswith(
        " 20,000 readings/s (over 30 s each)"
    )
    assert "p50 0.90 s, p95 1.40 s (400 rows per batch)" in lines["s3: ingest batch @200/s"]
    assert lines["job rows/s, Prometheus metrics off / on"].endswith(
        "510 / 508 (-0.4 %, medians of 2; runs of one kind 4.0 % apart)"
    )
    assert any(
        line.strip().startswith("job CPU per 1,000 rows, metrics on vs off")
        and line.endswith("+0.0 % (medians of 2)")
        for line in text.splitlines()
    )


def test_batch_descriptions_name_the_query_and_the_batch() -> None:
    for described in (
        "ingest\nid = 5d1c\nrunId = 9a2b\nbatch = 12",
        "ingest<br/>id = 5d1c<br/>runId = 9a2b<br/>batch = 12",
    ):
        match = _BATCH.match(described)
        assert match and (match["query"], match["run"], match["batch"]) == ("ingest", "9a2b", "12")
    assert _BATCH.match("delta log: load snapshot") is None


def _soak_sample(batches: int, p50: float, live: int, log: int) -> dict:
    return {
        "batches": batches,
        "ingest": {"p50_s": p50, "p95_s": p50 * 2, "max_s": p50 * 3, "rows_median": 2000},
        "tables": {"readings": {"live_files": live, "log_files": log, "mb": 1.0}},
        "alerts_cli_s": 0.8,
        "dashboard_slowest": {"endpoint": "/api/sensors", "seconds": 0.3},
        "job_memory": {"pss_mb": 2000.0},
        "backlog": 10,
    }


def test_soak_clock_is_compressed_by_the_interval() -> None:
    # 1,000 sensors every 5 event-seconds is 200 readings per event-second: paced at
    # 2,000/s, ten event-seconds pass per wall-second.
    assert compressed_interval(2000, 1000, 10) == 5.0
    assert SoakPlan(rate=1000, speedup=20).interval_s == 20.0
    with pytest.raises(ValueError):
        compressed_interval(0, 1000, 10)
    now = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
    assert compressed_start(now, 10, 3000, 1.0) == datetime(2026, 5, 1, 3, 40, tzinfo=UTC)


def test_soak_batch_window_percentiles_and_reruns() -> None:
    rows = [
        {"batch_id": b, "batch_duration_ms": 1000 * (b + 1), "input_rows": 100} for b in range(10)
    ]
    rows.append({"batch_id": 3, "batch_duration_ms": 9000, "input_rows": 100})  # a re-run
    window = batch_window(rows, 0, 5)  # 1, 2, 3, 4 -> 9 (batch 3 re-run), 5 seconds
    assert window["count"] == 5
    assert window["p50_s"] == 3.0 and window["p95_s"] == pytest.approx(8.2)
    assert window["max_s"] == 9.0 and window["rows_median"] == 100
    assert batch_window(rows, 20, 30)["p50_s"] is None


def test_soak_flatness_compares_the_last_third_with_the_first() -> None:
    assert flatness([1.0, 1.1, 0.9, 1.0, 1.05, 1.0])["verdict"] == "flat"
    growing = flatness([10, 20, 30, 40, 50, 60])
    assert growing["verdict"] == "grows" and growing["ratio"] == pytest.approx(5.5 / 1.5, 0.01)
    assert flatness([4.0, 2.0, 2.0], skip=1)["verdict"] == "flat"  # warm-up left out
    assert flatness([2.0, 1.0, 1.0])["verdict"] == "shrinks"
    assert flatness([0, 0, 0])["verdict"] == "flat"
    assert flatness([0, 0, 5])["verdict"] == "grows"
    assert flatness([1.0])["verdict"] == "too few samples"
    assert flatness([None, 1.0, None])["verdict"] == "too few samples"


def test_soak_checkpoint_reading(tmp_path) -> None:
    commits = tmp_path / "commits"
    assert committed_batches(commits) == 0
    commits.mkdir()
    for name in ("117", "118", ".118.crc", "119.tmp"):  # Spark deleted 0..116
        (commits / name).write_text("v1\n")
    assert committed_batches(commits) == 119
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "118").write_text(
        'v1\n{"batchWatermarkMs":0}\n{"t":{"0":10,"1":32}}\n', encoding="utf-8"
    )
    assert ingested_offsets(tmp_path, 118) == 42
    assert ingested_offsets(tmp_path, 5) is None


def test_soak_job_log_findings(tmp_path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "jobs.stream: ALERT WARNING  sustained_high   sensor-0473 ...\n"
        "25/11/23 06:45:01 WARN HDFSBackedStateStoreProvider: slow\n"
        "jobs.stream: maintenance of readings failed, retried later: boom\n"
        "jobs.stream: stopped\n"
        "jobs.stream:   readings 1,192,627, quarantine 12,096\n",
        encoding="utf-8",
    )
    found = log_findings(log)
    assert (found["error_lines"], found["warning_lines"]) == (1, 1)
    assert found["summary"][0] == "jobs.stream: stopped" and len(found["summary"]) == 2
    assert log_findings(tmp_path / "missing.log") == {}


def test_soak_json_table_and_plot(tmp_path) -> None:
    samples = [_soak_sample(250 * k, 1.0, 40 + k, 100 * k) for k in range(1, 7)]
    figures = {
        "mode": "soak",
        "machine": {"cpu_count": 2},
        "plan": SoakPlan().as_json(),
        "clock": {"start_time": "2026-01-01T00:00:00Z"},
        "samples": samples,
        "verdicts": verdicts(samples),
        "notes": [],
    }
    assert figures["verdicts"]["ingest_batch_p50_s"]["verdict"] == "flat"
    assert figures["verdicts"]["readings.log_files"]["verdict"] == "grows"
    write_json(figures, tmp_path / "soak.json")
    plot_soak(figures, tmp_path / "soak.png")
    plot_soak({"samples": []}, tmp_path / "empty.png")  # a soak that failed at start
    assert (tmp_path / "soak.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = soak_table(figures)
    assert "1,500" in text and "readings.log_files" in text and "grows" in text


def test_cli_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert done.returncode == 0
    assert "--quick" in done.stdout and "--out" in done.stdout
    assert "--soak" in done.stdout and "--soak-batches" in done.stdout


def test_steady_rates_are_rising_whole_numbers() -> None:
    from bench.__main__ import read_options
    from conf.settings.base import SettingsError

    assert read_options(["--steady-rates", "40000, 60000"]).steady_rates == (40_000, 60_000)
    for bad in ("60000,40000", "0", "fast"):
        with pytest.raises(SettingsError, match="--steady-rates"):
            read_options(["--steady-rates", bad])


def test_soak_commit_times_come_from_the_job_metrics_per_window() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from bench.soak import commit_means, commit_totals
    from jobs.metrics import JobMetrics

    metrics = JobMetrics(CollectorRegistry())
    for seconds in (0.010, 0.030):
        metrics.committed("incidents", seconds)
    first = commit_totals(generate_latest(metrics.registry).decode())
    metrics.committed("incidents", 0.050)
    metrics.committed("readings", 0.004)
    second = commit_totals(generate_latest(metrics.registry).decode())

    assert commit_means(first, {}) == {"incidents": 20.0}
    assert commit_means(second, first) == {"incidents": 50.0, "readings": 4.0}
    assert commit_means(second, second) == {"incidents": None, "readings": None}


def test_the_rules_part_s_files_hold_every_kind_and_the_default_rules_first(tmp_path) -> None:
    from bench.rule_sets import write_rules
    from contract.rules.parsing import read_rules

    small, large = (read_rules(write_rules(n, tmp_path / f"r{n}.toml")) for n in (3, 100))

    assert [r.name for r in small.rules] == ["overheat_reading", "sustained_high", "sensor_silent"]
    # The default file's rate and deviation rules come first like its others.
    assert len(large.rules) == 100 and {r.kind for r in large.rules} == {
        "reading", "window", "stuck", "absence", "rate", "deviation",
    }  # fmt: skip
    assert any(not r.scope.everyone for r in large.rules)


def test_the_real_time_boundaries_include_the_one_known_only_from_the_batch_before() -> None:
    """A real-time batch reports once it ended: a run that ends inside a batch has that
    batch's start only from the end of the batch before it (start + triggerExecution),
    and a start within a second of the end before it is one boundary, the earlier."""

    def event(name: str, start: str, took_ms: int) -> dict:
        return {"name": name, "timestamp": start, "durationMs": {"triggerExecution": took_ms}}

    events = [
        event("realtime", "2026-12-07T07:00:00.000Z", 60_000),  # before the load
        event("realtime", "2026-12-07T07:01:00.400Z", 61_100),  # ends 07:02:01.5
        event("ingest", "2026-12-07T07:01:30.000Z", 700),
    ]
    load_start = datetime(2026, 12, 7, 7, 0, 30, tzinfo=UTC).timestamp()

    found = batch_boundaries(events, "realtime", load_start)

    assert [round(t - load_start, 1) for t in found] == [30.0, 91.5]  # one end, one start


def test_scripts_bench_keeps_its_scratch_in_a_run_folder_it_removes(tmp_path) -> None:
    """scripts/bench's scratch (TMPDIR: the broker's and the lakes' folders; Spark's
    scratch) lives in a folder of its own under var/bench-run, not the system temp
    directory, as its --help says; once a run ends, neither its folder nor a killed run's
    is left, and a running run's folder is left alone (a second run, even --help, once
    removed a running soak's lake). Other runs may come and go meanwhile (the suite runs
    --help elsewhere too): only these three folders are looked at."""
    runs = PROJECT_ROOT / "var" / "bench-run"
    killed = runs / f"killed-{os.getpid()}"
    (killed / "tmp" / "sensorwatch-bench-x").mkdir(parents=True)  # as a run killed with -9
    running = runs / f"running-{os.getpid()}"
    (running / "tmp" / "lake").mkdir(parents=True)
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    try:
        # The running run holds its folder's lock as bench/run_dir.py's claim does.
        with open(running / LOCK_NAME, "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            done = subprocess.run(
                ["scripts/bench", "--help"],
                capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT,
                env={**os.environ, "TMPDIR": str(system_tmp)},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            told = "".join(done.stdout.split())  # the help text is wrapped
            own = re.search(rf"{re.escape(str(runs))}/([0-9]+-[0-9a-f]{{8}})/tmp", told)
            assert own, told
            assert not (runs / own.group(1)).exists()
            assert not killed.exists()
            assert (running / "tmp" / "lake").is_dir()
    finally:
        shutil.rmtree(running, ignore_errors=True)
        shutil.rmtree(killed, ignore_errors=True)
        with contextlib.suppress(OSError):
            runs.rmdir()  # empty now, unless another run is under way
    assert list(system_tmp.iterdir()) == []


def test_the_soak_tells_the_job_s_memory_by_part() -> None:
    """TreeMemory, on a process with a child: the root counts as the job's Python, a
    child that is not Java as a worker, none as the JVM; the totals are the parts' sums."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        memory = TreeMemory(os.getpid())
        now = poll_until(memory.sample, 30, 0.1, done=lambda m: m["workers_rss_mb"] > 0)
    finally:
        child.kill()
        child.wait()

    assert now["python_rss_mb"] > 0 and now["workers_rss_mb"] > 0
    assert now["jvm_rss_mb"] == 0 and now["jvm_pss_mb"] == 0
    for kind in ("rss", "pss"):
        parts = sum(now[f"{part}_{kind}_mb"] for part in MEMORY_PARTS)
        assert abs(now[f"{kind}_mb"] - parts) <= 0.2  # each rounded to 0.1 MiB


@pytest.mark.parametrize(
    ("ending", "status", "note"),
    [(None, 0, None), (KeyboardInterrupt(), 130, "interrupted before the end"),
     (RuntimeError("query windows failed\nat batch 3"), 1, "failed: query windows failed")],
)  # fmt: skip
def test_a_run_keeps_what_it_measured_however_it_ends(
    ending: BaseException | None, status: int, note: str | None
) -> None:
    """Ctrl-C or a failure half-way: the figures measured so far are kept, with a note of
    how the run ended, its length and the load at the end (bench/report.measured_run)."""
    figures: dict = {"machine": {}, "notes": []}
    folders: list[Path] = []
    said: list[str] = []

    def measure(tmp: Path) -> None:
        folders.append(tmp)
        figures["throughput"] = {"rows_per_s": 1000}
        assert tmp.is_dir()
        if ending is not None:
            raise ending

    assert measured_run(figures, "test", measure, said.append) == status
    assert figures["throughput"] == {"rows_per_s": 1000}
    assert figures["notes"] == ([note] if note else [])
    assert figures["total_seconds"] >= 0 and len(figures["machine"]["load_average_at_end"]) == 3
    assert folders[0].name.startswith("sensorwatch-test-") and not folders[0].exists()
    assert len(said) == (0 if ending is None else 1)
