"""Incidents from alerts (jobs/alerting/incidents.py): episodes, the hold, the clock, silences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conf.paths import RULES_FILE
from contract.alerts import FIRING, OVERHEAT, RESOLVED, SILENT, SUSTAINED, incident_id
from contract.rules.parsing import read_rules
from jobs.alerting.incidents import (
    FALLBACK,
    Evidence,
    Incident,
    RuleTraits,
    horizon,
    reconcile,
    rule_traits,
)

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
HOLD = timedelta(minutes=5)
# The default rules file's three original rules, each with a 5-minute hold.
TRAITS = rule_traits(read_rules(RULES_FILE))
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def minute(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


def alert(at: float, value: float = 47.0, rule: str = OVERHEAT, sensor: str = "s-1") -> Evidence:
    start = minute(at)
    return Evidence(
        alert_id=f"{sensor}|{rule}|{start.isoformat()}",
        sensor_id=sensor,
        site="lab",
        rule=rule,
        severity="critical" if rule == OVERHEAT else "warning",
        window_start=start,
        observed_value=value,
        threshold=45.0,
    )


class Table:
    """The incidents table as the job keeps it: reconcile's rows upserted by id."""

    def __init__(self) -> None:
        self.rows: dict[str, Incident] = {}
        self.alerts: list[Evidence] = []

    def run(
        self,
        new: Sequence[Evidence] = (),
        watermark: datetime | None = None,
        readings: dict[str, list[datetime]] | None = None,
    ) -> list[Incident]:
        self.alerts.extend(new)
        changed = reconcile(self.rows.values(), self.alerts, TRAITS, watermark, readings, now=NOW)
        self.rows.update({i.incident_id: i for i in changed})
        return changed

    def ordered(self) -> list[Incident]:
        return sorted(self.rows.values(), key=lambda i: (i.sensor_id, i.rule, i.started_at))


def test_a_sensor_hot_for_twenty_minutes_is_one_firing_incident() -> None:
    table = Table()
    table.run([alert(m, 46.0 + m / 10) for m in range(20)])
    [incident] = table.ordered()
    assert incident.status == FIRING and incident.resolved_at is None
    assert incident.started_at == minute(0) and incident.last_seen_at == minute(19)
    assert incident.alert_count == 20 and incident.peak_value == 46.0 + 1.9
    assert incident.incident_id == incident_id("s-1", OVERHEAT, minute(0))
    assert (incident.site, incident.severity, incident.threshold) == ("lab", "critical", 45.0)


def test_it_resolves_once_the_clock_shows_the_hold_passed_without_an_alert() -> None:
    table = Table()
    table.run([alert(m) for m in range(20)])
    # The newest alert is the minute 19: no new one may start before 19 + 5 = 24.
    assert table.run(watermark=minute(23.9)) == []
    [resolved] = table.run(watermark=minute(24.5))
    assert resolved.status == RESOLVED and resolved.resolved_at == minute(24)
    assert resolved.alert_count == 20


def test_hot_again_after_the_hold_opens_a_second_incident() -> None:
    table = Table()
    table.run([alert(m) for m in range(20)])
    table.run([alert(30), alert(31)])  # 11 minutes later: the first is over, without a clock
    first, second = table.ordered()
    assert (first.status, first.resolved_at, first.alert_count) == (RESOLVED, minute(24), 20)
    assert (second.status, second.started_at, second.alert_count) == (FIRING, minute(30), 2)
    assert first.incident_id != second.incident_id


def test_a_gap_shorter_than_the_hold_stays_one_incident() -> None:
    table = Table()
    table.run([alert(0), alert(4)])
    table.run(watermark=minute(8.5))
    [incident] = table.ordered()
    assert incident.status == FIRING and incident.alert_count == 2


def test_sustained_high_waits_for_its_windows_to_close() -> None:
    # A sustained_high alert is raised when the watermark passes its window's end: with
    # the watermark at 10:09 a window starting 10:04..10:05 can still come.
    table = Table()
    table.run([alert(0, 36.0, SUSTAINED)], watermark=minute(5))
    assert table.run(watermark=minute(9.5)) == []
    [resolved] = table.run(watermark=minute(10))
    assert resolved.status == RESOLVED and resolved.resolved_at == minute(5)


def test_a_rerun_and_a_replay_change_nothing() -> None:
    table = Table()
    table.run([alert(m) for m in range(3)], watermark=minute(2))
    before = table.ordered()
    assert table.run(watermark=minute(2)) == []
    assert table.run([alert(1)], watermark=minute(2)) == []  # an alert written already
    assert table.ordered() == before


def test_a_silent_sensor_is_one_incident_resolved_when_data_resumes() -> None:
    table = Table()
    silence = alert(0, 360.0, SILENT)
    [opened] = table.run([silence], watermark=minute(7))
    assert (opened.status, opened.peak_value, opened.alert_count) == (FIRING, 360.0, 1)
    # Readings before the silence do not end it; the first after it does.
    assert table.run(watermark=minute(8), readings={"s-1": [minute(-1)]}) == []
    [resolved] = table.run(watermark=minute(14), readings={"s-1": [minute(13), minute(12.5)]})
    assert resolved.status == RESOLVED and resolved.resolved_at == minute(12.5)
    assert resolved.incident_id == opened.incident_id


def test_a_late_alert_inside_a_resolved_incident_counts_into_it() -> None:
    table = Table()
    table.run([alert(0), alert(2)], watermark=minute(8))
    [resolved] = table.ordered()
    assert resolved.resolved_at == minute(7)
    [changed] = table.run([alert(1, 50.0)], watermark=minute(9))
    assert changed.incident_id == resolved.incident_id
    assert (changed.status, changed.resolved_at) == (RESOLVED, minute(7))
    assert (changed.alert_count, changed.peak_value) == (3, 50.0)


def test_a_late_alert_before_a_firing_incident_within_the_hold_joins_it() -> None:
    """Out of order: the episode opened (and the real-time lane paged it) at minute 10;
    the first reading of the episode, at minute 8, arrives after. One incident, its id
    and start unchanged."""
    table = Table()
    table.run([alert(10), alert(11)])
    [firing] = table.ordered()
    [changed] = table.run([alert(8, 51.0)])
    assert (changed.incident_id, changed.started_at, changed.status) == (
        firing.incident_id, minute(10), FIRING,
    )  # fmt: skip
    assert (changed.alert_count, changed.peak_value, changed.last_seen_at) == (3, 51.0, minute(11))
    assert table.ordered() == [changed]


def test_a_late_alert_before_a_resolved_incident_within_the_hold_joins_it() -> None:
    table = Table()
    table.run([alert(10), alert(11)], watermark=minute(20))
    [resolved] = table.ordered()
    [changed] = table.run([alert(6)], watermark=minute(21))
    assert (changed.incident_id, changed.status, changed.started_at) == (
        resolved.incident_id, RESOLVED, minute(10),
    )  # fmt: skip
    assert changed.alert_count == 3


def test_a_late_alert_a_whole_hold_before_an_incident_opens_its_own() -> None:
    table = Table()
    table.run([alert(10), alert(11)])
    [firing] = table.ordered()
    table.run([alert(5)])  # exactly the hold before: not the same episode
    early, later = table.ordered()
    assert later == firing
    assert (early.status, early.started_at, early.resolved_at) == (RESOLVED, minute(5), minute(10))


def test_an_alert_exactly_the_hold_after_the_last_opens_a_new_episode() -> None:
    """The boundary of contract.alerts.same_episode, which the notifier's lane uses too."""
    first, second = at_once([0, 5], minute(30))
    assert (first.started_at, first.resolved_at, second.started_at) == (
        minute(0), minute(5), minute(5),
    )  # fmt: skip
    [one] = at_once([0, 4], minute(30))
    assert one.alert_count == 2


def test_keys_are_independent() -> None:
    table = Table()
    table.run([alert(0, sensor="a"), alert(0, sensor="b"), alert(1, 36.0, SUSTAINED, "a")])
    assert [(i.sensor_id, i.rule) for i in table.ordered()] == [
        ("a", OVERHEAT),
        ("a", SUSTAINED),
        ("b", OVERHEAT),
    ]


def at_once(minutes: list[int], watermark: datetime) -> list[Incident]:
    table = Table()
    table.run([alert(m) for m in minutes], watermark=watermark)
    return table.ordered()


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=25),
    cuts=st.lists(st.integers(min_value=0, max_value=25), max_size=6),
)
def test_many_batches_give_what_one_batch_gives(gaps: list[int], cuts: list[int]) -> None:
    """An episode split over micro-batches (each with the watermark its data allows)
    ends up exactly as when one availableNow batch brings it all."""
    minutes = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    end = minute(minutes[-1] + 20)
    table = Table()
    bounds = sorted({c for c in cuts if c < len(minutes)} | {0, len(minutes)})
    for low, high in pairwise(bounds):
        batch = [alert(m) for m in minutes[low:high]]
        # The watermark trails the batch's newest reading: never past an alert to come.
        table.run(batch, watermark=minute(minutes[high - 1]))
    table.run(watermark=end)
    expected = at_once(minutes, end)
    assert table.ordered() == expected
    for incident in expected:  # and the episodes are what the hold says
        assert incident.status == RESOLVED
    assert sum(i.alert_count for i in expected) == len(set(minutes))


def test_changed_rows_only() -> None:
    table = Table()
    table.run([alert(0)])
    [incident] = table.ordered()
    same = replace(incident, updated_at=NOW + timedelta(hours=1))
    assert same.same_as(incident) and not replace(incident, alert_count=2).same_as(incident)


def test_each_rule_has_the_traits_its_kind_and_resolve_after_give() -> None:
    assert TRAITS[OVERHEAT] == RuleTraits(HOLD, timedelta(0), "°C")
    assert TRAITS[SUSTAINED] == RuleTraits(HOLD, timedelta(minutes=5), "°C")
    assert TRAITS[SILENT].absence
    assert TRAITS["battery_low"] == RuleTraits(timedelta(minutes=30), timedelta(0), "%", "min")
    assert TRAITS["humidity_high"].lag == timedelta(minutes=1)
    watermark = minute(10.5)
    assert horizon(TRAITS[OVERHEAT], watermark) == minute(10)
    assert horizon(TRAITS["humidity_high"], watermark) == minute(9.5)
    assert horizon(TRAITS[SILENT], watermark) is None


def test_a_rule_s_own_resolve_after_holds_its_episodes_together() -> None:
    """battery_low holds 30 minutes: alerts 20 minutes apart are one episode, which the
    clock resolves 30 minutes after the last."""
    table = Table()
    table.run([alert(0, 12.0, "battery_low"), alert(20, 11.0, "battery_low")])
    [incident] = table.ordered()
    assert incident.status == FIRING and incident.alert_count == 2

    table.run(watermark=minute(49))
    assert table.ordered()[0].status == FIRING
    table.run(watermark=minute(51))
    [incident] = table.ordered()
    assert incident.status == RESOLVED and incident.resolved_at == minute(50)


def test_a_rule_taken_out_of_the_file_still_resolves_its_incidents() -> None:
    table = Table()
    table.run([alert(0, rule="door_open")])
    assert "door_open" not in TRAITS and FALLBACK.hold == HOLD

    table.run(watermark=minute(6))
    [incident] = table.ordered()
    assert incident.status == RESOLVED and incident.resolved_at == minute(5)


def test_the_peak_is_the_worst_alert_whichever_way_the_rule_looks() -> None:
    """A rule looking down peaks at its lowest value, a deviation either side at the value
    farthest beyond its (moving) band edge; the rest at the highest."""
    from contract.rules.parsing import parse_rules

    rules = parse_rules({"rule": [
        {"name": "cold", "kind": "reading", "field": "temperature_c", "op": "<",
         "threshold": 5.0, "severity": "warning"},
        {"name": "dropping", "kind": "rate", "field": "temperature_c", "trend": "falling",
         "per_minute": 1.0, "severity": "warning"},
        {"name": "off", "kind": "deviation", "field": "temperature_c", "severity": "warning"},
        {"name": "hot", "kind": "reading", "field": "temperature_c", "op": ">",
         "threshold": 45.0, "severity": "warning"},
    ]})  # fmt: skip
    traits = rule_traits(rules)
    assert {n: t.peak for n, t in traits.items()} == {
        "cold": "min", "dropping": "min", "off": "farthest", "hot": "max",
    }  # fmt: skip

    def peak(rule: str, values: list[tuple[float, float]]) -> float:
        alerts = [
            replace(alert(i, value, rule), threshold=threshold)
            for i, (value, threshold) in enumerate(values)
        ]
        (incident,) = reconcile([], alerts, traits, None, now=NOW)
        return incident.peak_value

    assert peak("cold", [(4.0, 5.0), (1.5, 5.0), (3.0, 5.0)]) == 1.5
    assert peak("dropping", [(-1.2, -1.0), (-3.5, -1.0), (-2.0, -1.0)]) == -3.5
    # Above its band by 2, then below its band by 6: the drop is the worse.
    assert peak("off", [(92.0, 90.0), (60.0, 66.0), (70.0, 67.0)]) == 60.0
    assert peak("hot", [(46.0, 45.0), (49.0, 45.0)]) == 49.0
