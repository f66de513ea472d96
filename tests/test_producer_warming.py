"""The producer's slow failures and freezers, without Kafka: the warmings climb below
every threshold and change nothing else."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from conf.settings import ProducerSettings, load_settings
from producer.fleet import FREEZER_EVERY, build_fleet
from producer.generator import Message, MessageGenerator, lowest_temperature_limit
from producer.model import WARMING_MARGIN_C, WARMING_MIN_PEAK_C, WARMING_SLOPE_C_PER_MIN

START = datetime(2026, 1, 1, tzinfo=UTC)
QUIET = {"spike_rate": 0, "sustained_rate": 0, "silence_rate": 0}


def settings(sensors: int, seed: int, **overrides: object) -> ProducerSettings:
    given = {"sensors": sensors, "seed": seed, "start_time": START.isoformat(), **overrides}
    return load_settings(ProducerSettings, given)


def generate(count: int, sensors: int, seed: int, **overrides: object) -> list[Message]:
    chosen = settings(sensors, seed, **overrides)
    return list(MessageGenerator(chosen, build_fleet(sensors, seed), seed).messages(count))


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def test_warmings_are_the_only_change_and_every_other_draw_stays() -> None:
    """A run with warmings is the run without them but for the warming readings'
    temperature (by exactly the recorded offset), their kind (normal -> incident) and
    their manifest detail: the warmings draw from a generator of their own."""
    without = generate(60_000, 50, 3, warming_rate=0)
    warmed = generate(60_000, 50, 3, warming_rate=2)

    changed = 0
    for before, after in zip(without, warmed, strict=True):
        assert (after.key, after.event_id, after.event_time, after.humidity_pct,
                after.battery_pct) == (before.key, before.event_id, before.event_time,
                                       before.humidity_pct, before.battery_pct)  # fmt: skip
        detail = after.detail or {}
        if detail.get("incident") != "warming":
            assert (after.value, after.kind, after.detail) == (
                before.value, before.kind, before.detail
            )  # fmt: skip
            continue
        changed += after.temperature_c != before.temperature_c
        # Rounded to 0.01 each: the sum of two roundings.
        assert after.temperature_c - before.temperature_c == pytest.approx(
            detail["warming_c"], abs=0.011
        )
        assert (before.kind, after.kind) in {("normal", "incident"), *(
            (k, k) for k in ("late", "out_of_order", "malformed", "duplicate"))}  # fmt: skip
        assert {k: v for k, v in detail.items() if k.startswith("warming") or k == "incident"}
    assert changed > 10_000


def test_a_warming_climbs_below_every_threshold_then_recovers() -> None:
    """Each warming: an hour from its start; climbing 0.25 to 0.4 °C a minute to at least
    WARMING_MIN_PEAK_C up; every reading WARMING_MARGIN_C or more below the sensor's
    lowest temperature threshold; back near 0 by its end. Not on cold storage (too close
    to its own 10 °C to climb that far); freezers warm like any room."""
    chosen = settings(100, 5, warming_rate=1, **QUIET)
    fleet = {s.sensor_id: s for s in build_fleet(100, 5)}
    messages = list(MessageGenerator(chosen, list(fleet.values()), 5).messages(400_000))
    ends = START + timedelta(seconds=400_000 / 100 * chosen.interval)
    limits = {sid: lowest_temperature_limit(chosen.alert_rules, s) for sid, s in fleet.items()}
    # (minutes since the warming's start, its offset) of each warming's readings.
    runs: dict[tuple[str, datetime], list[tuple[float, float]]] = defaultdict(list)
    for m in messages:
        detail = m.detail or {}
        if detail.get("incident") != "warming":
            continue
        since = at(str(detail["warming_since"]))
        assert at(str(detail["warming_until"])) - since == timedelta(hours=1)
        limit = limits[m.key]
        assert limit is not None and m.temperature_c is not None
        assert m.temperature_c <= limit - WARMING_MARGIN_C, m
        if m.kind != "late":  # a late reading's event time is not when it was warmed
            minutes = (at(str(m.event_time)) - since).total_seconds() / 60
            runs[m.key, since].append((minutes, float(str(detail["warming_c"]))))

    assert len(runs) > 50
    assert {fleet[sid].room_kind for sid, _ in runs} == {
        "office", "warehouse", "lab", "server_room", "freezer"
    }  # fmt: skip
    low, high = WARMING_SLOPE_C_PER_MIN
    for (sid, since), readings in runs.items():
        # Offsets are rounded to 0.01 °C: 0.02 °C/min from half a minute on.
        slopes = [offset / t for t, offset in readings if 0.5 <= t <= 10]
        assert low - 0.02 <= min(slopes) and max(slopes) <= high + 0.02, (sid, slopes)
        if since + timedelta(hours=1) <= ends:
            assert max(offset for _, offset in readings) >= WARMING_MIN_PEAK_C - 0.01
            # The last quarter falls back from the peak (at most 18 °C) to 0.
            assert all(offset < 0.7 for t, offset in readings if t >= 59.5), sid


def test_one_sensor_in_25_is_a_freezer_with_no_threshold_of_its_own() -> None:
    """Far from the fleet's normal (about -20 °C against 15 to 25) with only the fleet's
    45 °C over it: no fixed threshold could see one fail. Placed after the fleet is
    drawn, so every other sensor is the same as before freezers came."""
    for count, seed in ((24, 1), (50, 42), (200, 3)):
        fleet = build_fleet(count, seed)
        freezers = [s for s in fleet if s.room_kind == "freezer"]
        assert len(freezers) == count // FREEZER_EVERY
        assert all(s.max_temp_c is None and s.room.startswith("freezer ") for s in freezers)
        assert build_fleet(count, seed) == fleet
    messages = generate(20_000, 50, 42, warming_rate=0, **QUIET)
    cold = {s.sensor_id for s in build_fleet(50, 42) if s.room_kind == "freezer"}
    values = [m.temperature_c for m in messages if m.key in cold and m.kind != "malformed"]
    assert cold and values and min(values) >= -23.8 and max(values) <= -16.2
