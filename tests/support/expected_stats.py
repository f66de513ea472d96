"""Window statistics computed in plain Python from a producer manifest (a test oracle)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime


@dataclass
class Window:
    """Expected statistics of one (sensor, window)."""

    readings: int
    avg: float
    low: float
    high: float


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def windows_of(t: float, size: int, slide: int) -> list[float]:
    """Starts of the windows (size, slide in seconds) that contain event time t."""
    last = math.floor(t / slide) * slide
    return [
        start
        for start in range(int(last - size + slide), int(last) + 1, slide)
        if start <= t < start + size
    ]


def expected_windows(
    manifest: list[dict], size: int, slide: int, field: str = "temperature_c"
) -> tuple[dict[tuple[str, float], Window], set[tuple[str, float]]]:
    """(sensor, window start) -> Window of ``field`` over deduplicated valid readings, and
    the set of windows a late reading touched (their contents depend on batch timing)."""
    seen: set[str] = set()
    values: dict[tuple[str, float], list[float]] = defaultdict(list)
    touched_by_late: set[tuple[str, float]] = set()
    for line in manifest:
        if line["kind"] == "malformed" or line["event_id"] in seen:
            continue
        seen.add(line["event_id"])
        t = epoch(line["event_time"])
        for start in windows_of(t, size, slide):
            key = (line["sensor_id"], float(start))
            values[key].append(line[field])
            if line["kind"] == "late":
                touched_by_late.add(key)
    stats = {key: Window(len(v), sum(v) / len(v), min(v), max(v)) for key, v in values.items()}
    return stats, touched_by_late
