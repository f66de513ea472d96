"""The alerts a run must raise, computed in plain Python from the manifest and registry."""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import pairwise

from tests.support.expected_stats import epoch, expected_windows


def valid_readings(manifest: list[dict]) -> list[dict]:
    """Delivered readings that are valid, each event_id once."""
    seen, out = set(), []
    for line in manifest:
        if line["kind"] != "malformed" and line["event_id"] not in seen:
            seen.add(line["event_id"])
            out.append(line)
    return out


def critical_threshold(registry: dict[str, dict], sensor_id: str, default: float = 45.0) -> float:
    limit = (registry.get(sensor_id) or {}).get("max_temp_c")
    return default if limit is None else limit


def overheat(manifest: list[dict], registry: dict[str, dict]) -> set[tuple[str, float]]:
    """(sensor, minute bucket start) of every reading at or above its critical threshold."""
    return {
        (r["sensor_id"], math.floor(epoch(r["event_time"]) / 60) * 60.0)
        for r in valid_readings(manifest)
        if r["temperature_c"] >= critical_threshold(registry, r["sensor_id"])
    }


def sustained(manifest: list[dict], watermark: float, warning: float = 35.0, minimum: int = 3):
    """(sensor, window start) of closed 5-minute windows averaging >= warning."""
    windows, _ = expected_windows(manifest, 300, 60)
    return {
        key
        for key, w in windows.items()
        if key[1] + 300 <= watermark and w.avg >= warning and w.readings >= minimum
    }


def battery_low(manifest: list[dict], threshold: float = 15.0) -> set[tuple[str, float]]:
    """(sensor, minute bucket start) of every reading with the battery at or below
    ``threshold`` (battery_low of conf/rules.toml)."""
    return {
        (r["sensor_id"], math.floor(epoch(r["event_time"]) / 60) * 60.0)
        for r in valid_readings(manifest)
        if r["battery_pct"] <= threshold
    }


def humidity_high(
    manifest: list[dict], watermark: float, threshold: float = 80.0, minimum: int = 2
) -> set[tuple[str, float]]:
    """(sensor, minute) of closed 1-minute windows averaging at least ``threshold`` %
    humidity over at least ``minimum`` readings (humidity_high of conf/rules.toml)."""
    windows, _ = expected_windows(manifest, 60, 60, field="humidity_pct")
    return {
        key
        for key, w in windows.items()
        if key[1] + 60 <= watermark and w.avg >= threshold and w.readings >= minimum
    }


def pane_end(t: float) -> float:
    """End of the one-minute pane holding event time ``t``."""
    return math.floor(t / 60) * 60 + 60.0


def silences(manifest: list[dict], watermark: float, timeout: float = 300.0):
    """(sensor, start) of every gap longer than ``timeout`` between a sensor's readings, and
    of every sensor whose last reading is more than ``timeout`` before the watermark, once
    the watermark has closed the minute in which the timeout ran out (only then is it
    certain that no reading came within it)."""
    times: dict[str, set[float]] = defaultdict(set)
    for r in valid_readings(manifest):
        times[r["sensor_id"]].add(round(epoch(r["event_time"]), 3))
    found = set()
    for sensor, stamps in times.items():
        ordered = sorted(stamps)
        decided = {a for a in ordered if pane_end(a + timeout) <= watermark}
        found |= {(sensor, a) for a, b in pairwise(ordered) if b - a > timeout and a in decided}
        if ordered[-1] in decided:
            found.add((sensor, ordered[-1]))
    return found
