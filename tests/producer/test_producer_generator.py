"""The producer's message sequence, without Kafka: reproducible, faithful to its settings."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest

from conf.settings.base import load_settings
from conf.settings.producer import ProducerSettings
from producer.fleet import build_fleet
from producer.generator import Message, MessageGenerator
from tests.support.spec_event import violations

START = "2026-01-01T00:00:00Z"


def generate(count: int, seed: int = 3, sensors: int = 200, **overrides) -> list[Message]:
    settings = load_settings(
        ProducerSettings, {"sensors": sensors, "start_time": START, "seed": seed, **overrides}
    )
    fleet = build_fleet(settings.sensors, seed)
    return list(MessageGenerator(settings, fleet, seed).messages(count))


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


@pytest.fixture(scope="module")
def run() -> list[Message]:
    """100 000 messages with every injection at 5 %."""
    return generate(
        100_000,
        late_fraction=0.05,
        out_of_order_fraction=0.05,
        duplicate_fraction=0.05,
        malformed_fraction=0.05,
        late_delay="60:240",
    )


def test_same_seed_same_messages_other_seed_other_messages() -> None:
    first, again, other = generate(5000, seed=9), generate(5000, seed=9), generate(5000, seed=10)

    assert [(m.key, m.value, m.kind) for m in first] == [(m.key, m.value, m.kind) for m in again]
    assert [m.value for m in first] != [m.value for m in other]


def test_exact_count(run: list[Message]) -> None:
    assert len(run) == 100_000
    assert len(generate(7, sensors=3)) == 7


@pytest.mark.parametrize("seed", range(20))
def test_count_is_exact_with_the_held_back_messages_drained(seed: int) -> None:
    # The sender drains held-back messages at the end; with --count they must not add any
    # (a duplicate held after the last counted message once made 801 of 800).
    settings = load_settings(
        ProducerSettings,
        {"sensors": 5, "start_time": START, "seed": seed, "duplicate_fraction": 0.3,
         "out_of_order_fraction": 0.2},
    )  # fmt: skip
    generator = MessageGenerator(settings, build_fleet(5, seed), seed)
    sent = list(generator.messages(50)) + list(generator.drain())

    assert len(sent) == 50


def test_fractions_land_within_tolerance(run: list[Message]) -> None:
    kinds = Counter(m.kind for m in run)
    readings = len(run) - kinds["duplicate"]

    for kind in ("late", "out_of_order", "malformed", "duplicate"):
        assert kinds[kind] / readings == pytest.approx(0.05, abs=0.005), kind


def test_malformed_messages_are_invalid_and_all_others_valid(run: list[Message]) -> None:
    malformed = [m for m in run if m.kind == "malformed"]
    others = [m for m in run if m.kind != "malformed"]

    assert all(violations(m.value) for m in malformed)
    assert not [m.value for m in others if violations(m.value)]
    variants = Counter(str(m.detail["malformation"]).split(":")[0] for m in malformed)
    assert set(variants) == {
        "invalid_json", "not_an_object", "missing_field", "wrong_type", "out_of_range",
        "invalid_event_time",
    }  # fmt: skip


def test_duplicates_repeat_an_earlier_message_exactly(run: list[Message]) -> None:
    first_seen: dict[str, int] = {}
    for position, message in enumerate(run):
        if message.kind == "duplicate":
            original = first_seen.get(message.event_id)
            assert original is not None and original < position
            assert run[original].value == message.value and run[original].key == message.key
        else:
            first_seen.setdefault(message.event_id, position)
    readings = [m.event_id for m in run if m.kind != "duplicate"]
    assert len(set(readings)) == len(readings), "event_ids are unique apart from duplicates"


def test_late_events_are_older_than_their_neighbours_by_the_asked_delay(
    run: list[Message],
) -> None:
    interval = 5.0  # default: neighbours are at most one interval apart in event time
    late = [i for i, m in enumerate(run) if m.kind == "late"]
    for i in late:
        neighbours = [
            epoch(m.event_time)
            for m in run[max(0, i - 3) : i + 4]
            if m.kind in ("normal", "incident")
        ]
        lag = min(neighbours) - epoch(run[i].event_time)
        assert 60 - interval <= lag <= 240 + interval, (i, lag)
        assert 60 <= run[i].detail["late_by_s"] <= 240


def test_out_of_order_events_arrive_after_newer_ones(run: list[Message]) -> None:
    newest = float("-inf")
    strictly_older = held_back = 0
    for message in run:
        if message.kind == "malformed":
            continue
        t = epoch(message.event_time)
        if message.kind == "out_of_order":
            held_back += 1
            assert t <= newest  # equal only when two sensors read in the same millisecond
            strictly_older += t < newest
        if message.kind in ("normal", "incident"):
            assert t >= newest, "the undisturbed stream is in event-time order"
            newest = t
    assert strictly_older >= 0.95 * held_back


def test_seq_counts_up_per_sensor(run: list[Message]) -> None:
    seqs: dict[str, list[int]] = {}
    for message in run:
        if message.kind in ("normal", "incident", "late"):
            seqs.setdefault(message.key, []).append(json.loads(message.value)["seq"])
    for sensor_seqs in seqs.values():
        assert sensor_seqs == sorted(sensor_seqs)
        assert len(set(sensor_seqs)) == len(sensor_seqs)


def test_incidents_and_thresholds() -> None:
    messages = generate(
        60_000, seed=5, sensors=50, spike_rate=2.0, sustained_rate=1.0, silence_rate=1.0,
        late_fraction=0, out_of_order_fraction=0, duplicate_fraction=0, malformed_fraction=0,
    )  # fmt: skip
    fleet = {s.sensor_id: s for s in build_fleet(50, 5)}
    critical = {sid: s.max_temp_c or 45.0 for sid, s in fleet.items()}
    incidents = Counter(m.detail["incident"] for m in messages if m.kind == "incident")

    assert incidents["spike"] > 0 and incidents["sustained"] > 0 and incidents["silence_end"] > 0
    for m in messages:
        t = m.temperature_c
        name = (m.detail or {}).get("incident")
        if name == "spike":
            assert t >= critical[m.key] + 2.9
        elif name == "sustained":
            assert 35.0 <= t < critical[m.key]
        else:  # nothing else may ever reach a threshold
            assert t < min(35.0, critical[m.key]), m
    # A silence is a gap in the sensor's readings of at least the silence duration.
    for m in messages:
        if (m.detail or {}).get("incident") == "silence_end":
            gap = epoch(m.event_time) - epoch(m.detail["silent_since"])
            assert gap >= 600.0 - 5.0


def test_first_spike_after_scripts_one_early_spike() -> None:
    quiet = {"spike_rate": 0, "sustained_rate": 0, "silence_rate": 0}
    messages = generate(3_000, seed=8, sensors=20, interval=2, first_spike_after=30, **quiet)
    again = generate(3_000, seed=8, sensors=20, interval=2, first_spike_after=30, **quiet)
    without = generate(3_000, seed=8, sensors=20, interval=2, **quiet)

    spikes = [m for m in messages if m.kind == "incident"]
    assert [m.detail for m in spikes] == [{"incident": "spike"}]
    (spike,) = spikes
    critical = {s.sensor_id: s.max_temp_c or 45.0 for s in build_fleet(20, 8)}
    assert spike.temperature_c >= critical[spike.key] + 2.9
    # The first sensor to read at or after start + 30 s, whatever its phase.
    assert 30 <= epoch(spike.event_time) - epoch(START) < 32
    assert not [
        m for m in messages if epoch(m.event_time) == epoch(spike.event_time) and m != spike
    ]
    assert [(m.key, m.value) for m in again] == [(m.key, m.value) for m in messages]
    assert not [m for m in without if m.kind == "incident"]


def test_first_spike_after_counts_from_the_real_clock_start() -> None:
    settings = load_settings(
        ProducerSettings,
        {"sensors": 5, "interval": 1, "seed": 2, "first_spike_after": 10, "spike_rate": 0},
    )
    now = [1_800_000_000.0]

    def clock() -> float:  # a wall clock that moves 0.2 s per reading
        now[0] += 0.2
        return now[0]

    generator = MessageGenerator(settings, build_fleet(5, 2), 2, wall_clock=clock)
    start = now[0]
    messages = list(generator.messages(200))
    spikes = [m for m in messages if m.kind == "incident" and m.detail == {"incident": "spike"}]

    assert len(spikes) == 1
    assert 10 <= epoch(spikes[0].event_time) - start <= 10.6


def test_failing_batteries_and_humid_stretches_pass_their_rules_thresholds(tmp_path) -> None:
    """battery_low (<= 15 %) and humidity_high (>= 80 %) of the default rules file: only
    the scripted incidents pass them; a failing battery is replaced at the end. With a
    rules file that has neither rule, neither incident is scripted."""
    messages = generate(40_000, seed=5, sensors=50, battery_rate=1.0, humidity_rate=1.0,
                        malformed_fraction=0)  # fmt: skip
    incidents = Counter((m.detail or {}).get("incident") for m in messages)

    assert incidents["battery"] > 0 and incidents["humidity"] > 0
    for m in messages:
        name = (m.detail or {}).get("incident")
        assert (m.battery_pct <= 15.0) == (name == "battery"), m
        assert (m.humidity_pct >= 80.0) == (name == "humidity"), m
        assert m.battery_pct == json.loads(m.value)["battery_pct"]
    last = {}
    for m in messages:
        if last.get(m.key) == "battery" and (m.detail or {}).get("incident") != "battery":
            assert m.battery_pct > 99.0  # a new battery
        last[m.key] = (m.detail or {}).get("incident")

    only_heat = tmp_path / "rules.toml"
    only_heat.write_text('[[rule]]\nname = "hot"\nkind = "reading"\nfield = "temperature_c"\n'
                         'op = ">="\nthreshold = 45.0\nseverity = "critical"\n')  # fmt: skip
    quiet = generate(5_000, seed=5, sensors=50, battery_rate=5.0, humidity_rate=5.0,
                     rules=str(only_heat))  # fmt: skip
    assert not {"battery", "humidity"} & {(m.detail or {}).get("incident") for m in quiet}
