"""Comparing the tables of two runs of the job on the same input (local mode against a
cluster, one time zone against another)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.support.producer_run import run_producer

# Columns stamped with the wall clock at write time differ between any two runs.
WALL_CLOCK = {"ingested_at", "detected_at", "created_at", "updated_at"}
TABLES = ["readings", "quarantine", "sensor_stats_1m", "sensor_stats_5m", "alerts", "incidents"]

# A sum of doubles depends on the order of its terms, and the order in which executors
# add partial sums is not fixed: two runs may differ in the last bits of an average.
SIGNIFICANT_DIGITS = 12


def comparable_value(value: Any) -> Any:
    """A value as two runs must agree on it (a double to SIGNIFICANT_DIGITS digits)."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return value


def comparable(rows: Iterable[Mapping[str, Any]]) -> list[tuple]:
    """Rows without their wall-clock columns, values comparable, in a fixed order."""
    return sorted(
        tuple((k, comparable_value(v)) for k, v in sorted(row.items()) if k not in WALL_CLOCK)
        for row in rows
    )


def produce_comparable(
    bootstrap: str, topic: str, registry: Path, *, count: int, sensors: int, seed: int, start: str
) -> None:
    """Fill ``topic`` with readings that two runs of the job must turn into the same rows:
    every rule's incidents (warmings for the rules that learn a sensor's normal),
    duplicates and malformed records, but no late or out-of-order readings (which window
    a late reading still reaches depends on micro-batch boundaries, which may differ
    between two runs)."""
    done = run_producer(
        "--bootstrap-servers", bootstrap, "--topic", topic, "--count", count,
        "--sensors", sensors, "--interval", 5, "--seed", seed, "--start-time", start,
        "--registry-out", registry, "--spike-rate", 3, "--sustained-rate", 2,
        "--silence-rate", 2, "--silence-duration", 600, "--warming-rate", 2,
        "--late-fraction", 0, "--out-of-order-fraction", 0,
        "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
