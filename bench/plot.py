"""figures.png: throughput side by side, the scaling curves, the latency distribution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt


def plot(figures: dict[str, Any], path: Path) -> None:
    """Write a 2x2 PNG of the figures; missing parts leave their panel empty."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    machine = figures.get("machine", {})
    fig.suptitle(
        f"SensorWatch benchmarks ({figures.get('mode')} run, {machine.get('cpu_count')} cores)"
    )

    ax = axes[0][0]
    throughput = figures.get("throughput", {})
    labels = {
        "producer": "producer",
        "consumer": "plain\nconsumer",
        "minimal_query": "minimal\nSpark query",
        "job_all_tables": "job,\nall tables",
        "job_readings_only": "job,\nreadings only",
    }
    names = [k for k in labels if throughput.get(k)]
    values = [throughput[k].get("msgs_per_s", throughput[k].get("rows_per_s")) for k in names]
    bars = ax.bar([labels[k] for k in names], values, color="#4c72b0")
    ax.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=8)
    if values:  # a log axis needs positive data
        ax.set_yscale("log")
    ax.set_ylabel("records per second (log)")
    ax.set_title("throughput on one topic")

    scaling = figures.get("scaling", {})
    for ax, key, label in (
        (axes[0][1], "partitions", "topic partitions"),
        (axes[1][0], "sensors", "sensors (state size)"),
    ):
        points = scaling.get(key, [])
        if points:
            ax.plot([p[key] for p in points], [p["rows_per_s"] for p in points], marker="o")
            if key == "sensors":
                ax.set_xscale("log")
            ax.set_ylim(bottom=0)
        ax.set_xlabel(label)
        ax.set_ylabel("job rows/s, all tables")
        ax.set_title(f"scaling with {label} ({scaling.get('backlog', 0):,} readings)")

    ax = axes[1][1]
    latency = figures.get("latency") or {}
    values = latency.get("latencies_s") or []
    if values:
        ax.hist(values, bins=30, color="#dd8452")
        for q in ("p50", "p95", "p99"):
            ax.axvline(latency["latency_s"][q], linestyle="--", color="black", linewidth=0.8)
            ax.text(latency["latency_s"][q], ax.get_ylim()[1] * 0.9, q, fontsize=8)
    ax.set_xlabel("seconds from the reading's Kafka timestamp to the alert")
    ax.set_ylabel("alerts")
    ax.set_title(
        f"overheat_reading latency at {latency.get('target_rate', 0):,} readings/s, "
        f"trigger {latency.get('trigger', '-')}"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_soak(figures: dict[str, Any], path: Path) -> None:
    """soak.png: each figure of the soak against the ingest batches run so far (3x3)."""
    samples = figures.get("samples", [])
    x = [s["batches"] for s in samples]
    fig, axes = plt.subplots(3, 3, figsize=(17, 12))
    plan = figures.get("plan", {})
    fig.suptitle(
        f"SensorWatch soak: trigger {plan.get('trigger', '-')}, {plan.get('rate', 0):,} "
        f"readings/s, event clock x{plan.get('speedup', 0):g} "
        f"({figures.get('machine', {}).get('cpu_count')} cores)"
    )

    def lines(ax: Any, named: dict[str, list[Any]], title: str, ylabel: str) -> None:
        for label, values in named.items():
            ax.plot(x, values, marker=".", label=label)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        if named:
            ax.legend(fontsize=7)

    def get(sample: dict[str, Any], *keys: str) -> Any:
        for key in keys:
            sample = sample.get(key) if isinstance(sample, dict) else None
        return sample

    def across(*keys: str) -> list[Any]:
        return [get(s, *keys) for s in samples]

    tables = sorted({name for s in samples for name in s.get("tables", {})})
    queries = sorted({name for s in samples for name in s.get("checkpoints", {})})
    endpoints = sorted({e for s in samples for e in get(s, "dashboard", "endpoints_s") or {}})
    lines(
        axes[0][0],
        {q: across("ingest", f"{q}_s") for q in ("p50", "p95", "max")},
        f"ingest batch duration (per {plan.get('every', 0)} batches)",
        "seconds",
    )
    lines(
        axes[0][1],
        {t: across("tables", t, "live_files") for t in tables},
        "live data files per table",
        "files",
    )
    lines(
        axes[0][2],
        {t: across("tables", t, "log_files") for t in tables},
        "_delta_log files per table",
        "files",
    )
    lines(
        axes[1][0],
        {t: across("tables", t, "mb") for t in tables},
        "data on disk per table (live + not yet vacuumed)",
        "MiB",
    )
    lines(
        axes[1][1],
        {
            "scripts/alerts --since 1h": across("alerts_cli_s"),
            "dashboard, slowest endpoint": across("dashboard_slowest", "seconds"),
        },
        "reader times (median of 3)",
        "seconds",
    )
    lines(
        axes[1][2],
        {e: across("dashboard", "endpoints_s", e) for e in endpoints},
        "dashboard API endpoints (median of 3)",
        "seconds",
    )
    lines(
        axes[2][0],
        {q: across("checkpoints", q, "mb") for q in queries},
        "checkpoint folder per query",
        "MiB",
    )
    lines(
        axes[2][1],
        {
            "now": across("job_memory", "pss_mb"),
            "peak since the last sample": across("job_memory_peak", "pss_mb"),
        },
        "job memory, PSS (driver, JVM, Python workers)",
        "MiB",
    )
    lines(
        axes[2][2],
        {"backlog (readings in Kafka not ingested)": across("backlog")},
        "ingest backlog at each sample",
        "readings",
    )
    for ax in axes.flat:
        ax.set_xlabel("ingest micro-batches")
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
