"""The producer's slow failures and freezers, and the default rules file's learned rules on
the synthetic fleet, without Kafka or Spark: the warmings climb below every threshold and
change nothing else; temperature_rising and temperature_off_normal fire on them and never
on the fleet's normal readings (the pure rules of jobs/alerting on the pane averages, as
tests/jobs/test_job_learned_rules.py shows the job computes them)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from conf.paths import RULES_FILE
from conf.settings.base import load_settings
from conf.settings.producer import ProducerSettings
from contract.rules.parsing import read_rules
from jobs.alerting.baseline import step
from jobs.alerting.learned_rules import Learned, learned_rules
from jobs.alerting.rate import hits
from producer.fleet import FREEZER_EVERY, build_fleet
from producer.generator import Message, MessageGenerator, lowest_temperature_limit
from producer.physics import WARMING_MARGIN_C, WARMING_MIN_PEAK_C, WARMING_SLOPE_C_PER_MIN

START = datetime(2026, 1, 1, tzinfo=UTC)
EVER = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
QUIET = {"spike_rate": 0, "sustained_rate": 0, "silence_rate": 0}
# The two demos' incident rates per sensor per hour (scripts/run-local, .env's DEMO_*).
RUN_LOCAL = {"interval": 2, "spike_rate": 0.8, "sustained_rate": 0.12, "silence_rate": 0.1,
             "battery_rate": 0.05, "humidity_rate": 0.05}  # fmt: skip
COMPOSE = {"interval": 5, "spike_rate": 2, "sustained_rate": 0.5, "silence_rate": 0.5,
           "battery_rate": 0.1, "humidity_rate": 0.1}  # fmt: skip


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
        # The manifest's detail: the reading's own, plus what says it is a warming.
        marks = {"incident", "warming_since", "warming_until", "warming_c"}
        assert marks <= set(detail), detail
        assert {k: v for k, v in detail.items() if k not in marks} == (before.detail or {})
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


def panes_of(messages: list[Message]) -> dict[str, list[tuple[datetime, float]]]:
    """Each sensor's pane averages of temperature over its valid readings, each event_id
    once (what the job's windows query closes, tests/jobs/test_job_learned_rules.py)."""
    sums: dict[tuple[str, float], list[float]] = defaultdict(list)
    seen: set[str] = set()
    for m in messages:
        if m.kind == "malformed" or m.event_id in seen:
            continue
        assert m.event_id is not None and m.event_time is not None
        assert m.temperature_c is not None
        seen.add(m.event_id)
        minute = math.floor(at(m.event_time).timestamp() / 60) * 60.0
        sums[m.key, minute].append(m.temperature_c)
    panes: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
    for (sensor, minute), values in sorted(sums.items()):
        panes[sensor].append((datetime.fromtimestamp(minute, UTC), sum(values) / len(values)))
    return panes


@dataclass
class Fired:
    """One learned alert, and the pane where the run it belongs to began: a rate rule's
    window before it, a deviation rule's first out pane of its breach."""

    sensor: str
    rule: str
    pane: datetime
    began: datetime


def learned_alerts(panes: dict[str, list[tuple[datetime, float]]]) -> list[Fired]:
    """The alerts the default rules file's rate and deviation rules raise on ``panes``."""
    rules: tuple[Learned, ...] = learned_rules(read_rules(RULES_FILE), {})
    assert {r.name for r in rules} == {"temperature_rising", "temperature_off_normal"}
    found = []
    for sensor, series in panes.items():
        for rule in rules:
            if rule.rate is not None:
                reach = rule.rate.reach
                found += [Fired(sensor, rule.name, h.pane, h.pane - reach)
                          for h in hits(series, EVER, rule.rate)]  # fmt: skip
                continue
            assert rule.baseline is not None
            state = None
            for pane, value in series:
                state, breach = step(state, pane, value, rule.baseline)
                if breach is not None:
                    assert state.breach_since is not None
                    found.append(Fired(sensor, rule.name, pane, state.breach_since))
    return found


@dataclass
class Incidents:
    """The scripted incidents of a run per sensor: each warming's span, the event times
    of every other incident reading (and a silence's start), and of those that move the
    temperature's pane averages for minutes (sustained overheating, silences)."""

    warmings: dict[str, list[tuple[datetime, datetime]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    others: dict[str, list[datetime]] = field(default_factory=lambda: defaultdict(list))
    long: dict[str, list[datetime]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, messages: list[Message]) -> Incidents:
        found = cls()
        for m in messages:
            detail = m.detail or {}
            name = detail.get("incident")
            if name == "warming":
                span = (at(str(detail["warming_since"])), at(str(detail["warming_until"])))
                if span not in found.warmings[m.key]:
                    found.warmings[m.key].append(span)
            elif name is not None:
                times = [at(str(m.event_time))]
                if "silent_since" in detail:
                    times.append(at(str(detail["silent_since"])))
                found.others[m.key] += times
                if name in ("sustained", "silence_end"):
                    found.long[m.key] += times
        return found

    def explain(self, fired: Fired) -> bool:
        """Whether a scripted incident of the sensor lies where the alert's run began or
        within it: every alert must trace back to one."""
        low, high = fired.began - timedelta(minutes=1), fired.pane + timedelta(minutes=1)
        spans = self.warmings.get(fired.sensor, [])
        return any(a <= high and low <= b for a, b in spans) or any(
            low <= t <= high for t in self.others.get(fired.sensor, [])
        )

    def clean(self, sensor: str, span: tuple[datetime, datetime]) -> bool:
        """A warming no sustained overheating or silence of its sensor came near (from 20
        minutes before): those hide a climb for minutes (a spike, a pane's bump, or a
        battery or humidity incident, the temperature untouched, do not)."""
        since, until = span
        return not any(
            since - timedelta(minutes=20) <= t <= until for t in self.long.get(sensor, [])
        )


def test_the_normal_fleet_sets_off_no_learned_rule() -> None:
    """Without incidents (faults on: late, out of order, duplicated, malformed), over 150
    sensor-hours at the run-local demo's 2 s interval: no rate or deviation alert."""
    messages = generate(270_000, 50, 21, interval=2, warming_rate=0, **QUIET)

    assert learned_alerts(panes_of(messages)) == []


@pytest.mark.parametrize(
    ("demo", "sensors", "seed"), [(RUN_LOCAL, 50, 1), (COMPOSE, 100, 2)], ids=["local", "compose"]
)
def test_the_demo_rules_fire_on_warmings_and_every_alert_traces_to_an_incident(
    demo: dict, sensors: int, seed: int
) -> None:
    """A demo's fleet (its incident rates, warmings at the default rate; compose's with
    more sensors, as its frequent incidents leave fewer warmings alone) for 6 hours: each
    learned alert traces back to a scripted incident of its sensor (a
    warming, or back-to-back short incidents); temperature_rising fires on every warming
    no other incident came near that started once the rules had 35 minutes of panes, and
    temperature_off_normal on most (a sensor whose own normal swings widely, a warehouse's
    4 °C a day, learns part of a slow climb before the climb leaves the band)."""
    chosen = settings(sensors, seed, **demo)
    assert chosen.warming_rate == 0.1
    count = int(sensors * 6 * 3600 / chosen.interval)
    fleet = build_fleet(sensors, seed)
    messages = list(MessageGenerator(chosen, fleet, seed).messages(count))
    incidents = Incidents.of(messages)
    fired = learned_alerts(panes_of(messages))

    assert [f for f in fired if not incidents.explain(f)] == []
    end = START + timedelta(hours=6)
    clean = [
        (sensor, span)
        for sensor, spans in incidents.warmings.items()
        for span in spans
        if incidents.clean(sensor, span) and span[0] >= START + timedelta(minutes=35)
        and span[1] <= end
    ]  # fmt: skip
    caught: dict[str, int] = defaultdict(int)
    for sensor, (since, until) in clean:
        for rule in ("temperature_rising", "temperature_off_normal"):
            caught[rule] += any(
                f.sensor == sensor and f.rule == rule and since <= f.pane <= until for f in fired
            )
    assert len(clean) >= 5
    assert caught["temperature_rising"] == len(clean)
    assert caught["temperature_off_normal"] >= 0.75 * len(clean), (caught, len(clean))
