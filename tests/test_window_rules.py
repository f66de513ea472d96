"""The window, stuck and absence rules as data joined to closed windows
(jobs/window_rules.py), on small static DataFrames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from conf.paths import RULES_FILE
from contract.alerts import UNREGISTERED, alert_id
from contract.registry import Entry
from contract.rules import RuleSet, parse_rules, read_rules
from jobs.registry import REGISTRY
from jobs.tables import PANES, SENSOR_STATS
from jobs.window_rules import RuleFrames, absence_alerts, window_alerts

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
DETECTED = datetime(2026, 3, 1, 8, 10, tzinfo=UTC)
SENSORS = {
    "dc-1": Entry("dc-1", "DC", 30.0, "CX"),
    "dc-2": Entry("dc-2", "DC", None, "T1"),
    "cold-1": Entry("cold-1", "Cold store", 10.0, "CX"),
}


def stats(rows: list[tuple], minutes: int) -> list[tuple]:
    """sensor_stats rows: (sensor, readings, avg, min, max, humidity) -> full rows."""
    return [
        (s, T0, T0 + timedelta(minutes=minutes), n, avg, low, high, humidity)
        for s, n, avg, low, high, humidity in rows
    ]


def found(spark, rules: RuleSet, window: str, rows: list[tuple]) -> dict[tuple, tuple]:
    frames = RuleFrames.of(spark, rules, SENSORS)
    registry = spark.createDataFrame(
        [(e.sensor_id, e.site, e.max_temp_c) for e in SENSORS.values()], REGISTRY
    )
    minutes = 1 if window == "1m" else 5
    frame = spark.createDataFrame(stats(rows, minutes), SENSOR_STATS)
    # Through Arrow: aware UTC timestamps (collect() would give naive local ones).
    alerts = window_alerts(frame, window, frames, registry, F.lit(DETECTED)).toArrow().to_pylist()
    frames.unpersist()
    for a in alerts:
        assert a["alert_id"] == alert_id(a["sensor_id"], a["rule"], T0)
        assert a["detected_at"] == DETECTED
        assert a["window_end"] - a["window_start"] == timedelta(minutes=minutes)
    return {
        (a["sensor_id"], a["rule"]): (
            a["severity"],
            a["site"],
            a["observed_value"],
            a["threshold"],
            a["readings"],
        )
        for a in alerts
    }


def rules(*given: dict) -> RuleSet:
    return parse_rules({"rule": [{"severity": "warning", **g} for g in given]})


def test_the_default_window_rules_on_their_windows(spark) -> None:
    defaults = read_rules(RULES_FILE)
    five = found(spark, defaults, "5m", [
        ("dc-1", 3, 35.0, 33.0, 37.0, 40.0),  # sustained: avg 35 >= 35, 3 readings
        ("dc-2", 2, 40.0, 39.0, 41.0, 40.0),  # too few readings
        ("ghost", 60, 36.5, 36.0, 37.0, 40.0),  # unregistered: the rule's own threshold
    ])  # fmt: skip
    one = found(spark, defaults, "1m", [
        ("cold-1", 12, 4.0, 3.5, 4.5, 81.0),  # humidity_high: 81 >= 80
        ("dc-1", 1, 20.0, 20.0, 20.0, 95.0),  # only 1 reading: it needs 2
    ])  # fmt: skip

    assert five == {
        ("dc-1", "sustained_high"): ("warning", "DC", 35.0, 35.0, 3),
        ("ghost", "sustained_high"): ("warning", UNREGISTERED, 36.5, 35.0, 60),
    }
    assert one == {("cold-1", "humidity_high"): ("warning", "Cold store", 81.0, 80.0, 12)}


def test_aggregates_comparisons_scopes_overrides_and_the_registry(spark) -> None:
    given = rules(
        {"name": "hot_peak", "kind": "window", "window": "1m", "aggregate": "max",
         "field": "temperature_c", "op": ">", "threshold": 25, "registry_threshold": "max_temp_c",
         "scope": {"sites": ["DC"]}},
        {"name": "too_few", "kind": "window", "window": "1m", "aggregate": "count", "op": "<",
         "threshold": 3},
        {"name": "swing", "kind": "window", "window": "1m", "aggregate": "range",
         "field": "temperature_c", "op": ">=", "threshold": 5,
         "override": [{"models": ["CX"], "threshold": 2}, {"sensors": ["cold-1"], "threshold": 9}]},
        {"name": "frozen", "kind": "stuck", "window": "1m", "field": "temperature_c",
         "min_readings": 4},
    )  # fmt: skip
    got = found(spark, given, "1m", [
        ("dc-1", 12, 28.0, 26.0, 31.0, 40.0),  # max 31 > own 30; range 5 >= CX's 2
        ("dc-2", 2, 27.0, 26.0, 28.0, 40.0),  # max 28 > 25 (no registry value); 2 < 3
        ("cold-1", 12, 4.0, 0.0, 8.0, 70.0),  # not in DC; range 8 < its own 9
        ("ghost", 5, 21.0, 21.0, 21.0, 40.0),  # stuck at 21 over 5 readings
    ])  # fmt: skip

    assert got == {
        ("dc-1", "hot_peak"): ("warning", "DC", 31.0, 30.0, 12),
        ("dc-1", "swing"): ("warning", "DC", 5.0, 2.0, 12),
        ("dc-2", "hot_peak"): ("warning", "DC", 28.0, 25.0, 2),
        ("dc-2", "too_few"): ("warning", "DC", 2.0, 3.0, 2),
        ("ghost", "frozen"): ("warning", UNREGISTERED, 0.0, 0.0, 5),
    }


def test_absence_rules_each_with_their_timeout_and_scope(spark) -> None:
    """Two absence rules: 5 minutes for every registered sensor, 2 minutes for the cold
    store's; one sensor silent for 4 minutes, one for 6."""
    given = rules(
        {"name": "silent", "kind": "absence", "after": "5 minutes"},
        {"name": "cold_silent", "kind": "absence", "after": "2 minutes", "severity": "critical",
         "scope": {"sites": ["Cold store"]}},
    )  # fmt: skip
    frames = RuleFrames.of(spark, given, SENSORS)
    registry = spark.createDataFrame(
        [(e.sensor_id, e.site, e.max_temp_c) for e in SENSORS.values()], REGISTRY
    )

    def pane(sensor: str, minute: int) -> tuple:
        start = T0 + timedelta(minutes=minute)
        at = start + timedelta(seconds=30)
        return (sensor, start, start + timedelta(minutes=1), 1, 20.0, 20.0, 20.0, 40.0, at, at)

    panes = spark.createDataFrame(
        [pane("cold-1", 0), pane("cold-1", 4), pane("dc-1", 0), pane("dc-1", 6),
         pane("ghost", 0), pane("ghost", 9)],
        PANES,
    )  # fmt: skip
    alerts = absence_alerts(panes, frames, registry, True, None, T0 + timedelta(minutes=9),
                            F.lit(DETECTED))  # fmt: skip
    assert alerts is not None
    got = {(a["sensor_id"], a["rule"], (a["window_start"] - T0).total_seconds()):
           (a["severity"], a["observed_value"], a["threshold"])
           for a in alerts.toArrow().to_pylist()}  # fmt: skip
    frames.unpersist()

    # ghost: not registered; dc-1 is not in the cold store. cold-1's last reading (4:30)
    # is 270 s before the clock (9:00): a silence still going on.
    assert got == {
        ("cold-1", "cold_silent", 30.0): ("critical", 240.0, 120.0),
        ("cold-1", "cold_silent", 270.0): ("critical", 270.0, 120.0),
        ("dc-1", "silent", 30.0): ("warning", 360.0, 300.0),
    }
