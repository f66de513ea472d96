"""The window, stuck and absence rules as data joined to closed windows
(jobs/alerting/window_rules.py), on small static DataFrames."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from conf.paths import RULES_FILE
from contract.alerts import UNREGISTERED, alert_id
from contract.registry import Entry
from contract.rules.model import RuleSet
from contract.rules.parsing import parse_rules, read_rules
from jobs.alerting.window_rules import RuleFrames, absence_alerts, window_alerts
from jobs.queries.registry_cache import REGISTRY
from jobs.spark.sql_text import sql_text
from jobs.windows.panes import MEASURES
from jobs.writer.tables import PANES_SCHEMA

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
DETECTED = datetime(2026, 3, 1, 8, 10, tzinfo=UTC)
SENSORS = {
    "dc-1": Entry("dc-1", "DC", 30.0, "CX"),
    "dc-2": Entry("dc-2", "DC", None, "T1"),
    "cold-1": Entry("cold-1", "Cold store", 10.0, "CX"),
}


def stats(rows: list[tuple], minutes: int) -> list[dict]:
    """Window measures: (sensor, readings, avg, min, max temperature, avg humidity[, more
    measures by name]) -> full rows; the other measures at a calm 50 % and 80 %."""
    full = []
    for s, n, avg, low, high, humidity, *more in rows:
        end = T0 + timedelta(minutes=minutes)
        row = {
            "sensor_id": s, "window_start": T0, "window_end": end, "readings": n,
            "avg_temperature_c": avg, "min_temperature_c": low, "max_temperature_c": high,
            "avg_humidity_pct": humidity, "min_humidity_pct": humidity,
            "max_humidity_pct": humidity, "avg_battery_pct": 80.0, "min_battery_pct": 80.0,
            "max_battery_pct": 80.0,
        }  # fmt: skip
        full.append({**row, **(more[0] if more else {})})
    return [tuple(r[f.name] for f in MEASURES.fields) for r in full]


def found(spark, rules: RuleSet, window: str, rows: list[tuple]) -> dict[tuple, tuple]:
    frames = RuleFrames.of(spark, rules, SENSORS)
    registry = spark.createDataFrame(
        [(e.sensor_id, e.site, e.max_temp_c) for e in SENSORS.values()], REGISTRY
    )
    minutes = 1 if window == "1m" else 5
    frame = spark.createDataFrame(stats(rows, minutes), MEASURES)
    # Through Arrow: aware UTC timestamps (collect() would give naive local ones).
    alerts = window_alerts(frame, window, frames, registry, F.lit(DETECTED)).toArrow().to_pylist()
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


def test_humidity_and_battery_aggregates_and_a_stuck_humidity(spark) -> None:
    """Every aggregate of every measured field: the cold store's humidity out of range
    (min and max), a battery running low (avg, min), a humidity stuck at one value."""
    given = rules(
        {"name": "cold_dry", "kind": "window", "window": "5m", "aggregate": "min",
         "field": "humidity_pct", "op": "<", "threshold": 30,
         "scope": {"sites": ["Cold store"]}},
        {"name": "cold_wet", "kind": "window", "window": "5m", "aggregate": "max",
         "field": "humidity_pct", "op": ">", "threshold": 90},
        {"name": "battery_draining", "kind": "window", "window": "5m", "aggregate": "avg",
         "field": "battery_pct", "op": "<", "threshold": 20, "min_readings": 2},
        {"name": "battery_empty", "kind": "window", "window": "5m", "aggregate": "min",
         "field": "battery_pct", "op": "<=", "threshold": 5,
         "override": [{"models": ["T1"], "threshold": 10}]},
        {"name": "battery_swing", "kind": "window", "window": "5m", "aggregate": "range",
         "field": "battery_pct", "op": ">", "threshold": 30},
        {"name": "humidity_stuck", "kind": "stuck", "window": "5m", "field": "humidity_pct"},
    )  # fmt: skip
    got = found(spark, given, "5m", [
        ("cold-1", 6, 4.0, 3.0, 5.0, 50.0,
         {"min_humidity_pct": 25.0, "max_humidity_pct": 95.0}),  # dry and wet, not stuck
        ("dc-1", 6, 20.0, 20.0, 20.0, 50.0,
         {"min_humidity_pct": 10.0, "max_humidity_pct": 50.0,  # dry, but not in the cold store
          "avg_battery_pct": 15.0, "min_battery_pct": 4.0, "max_battery_pct": 40.0}),
        ("dc-2", 1, 20.0, 20.0, 20.0, 50.0,
         {"avg_battery_pct": 9.0, "min_battery_pct": 9.0, "max_battery_pct": 9.0}),
        ("ghost", 4, 20.0, 20.0, 20.0, 61.5, {"avg_battery_pct": 60.0}),  # humidity stuck
    ])  # fmt: skip

    assert got == {
        ("cold-1", "cold_dry"): ("warning", "Cold store", 25.0, 30.0, 6),
        ("cold-1", "cold_wet"): ("warning", "Cold store", 95.0, 90.0, 6),
        ("dc-1", "battery_draining"): ("warning", "DC", 15.0, 20.0, 6),
        ("dc-1", "battery_empty"): ("warning", "DC", 4.0, 5.0, 6),
        ("dc-1", "battery_swing"): ("warning", "DC", 36.0, 30.0, 6),
        # one reading: below battery_draining's 2; T1's own threshold 10 for battery_empty
        ("dc-2", "battery_empty"): ("warning", "DC", 9.0, 10.0, 1),
        ("ghost", "humidity_stuck"): ("warning", UNREGISTERED, 0.0, 0.0, 4),
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
        return (sensor, start, start + timedelta(minutes=1), 1, 20.0, 20.0, 20.0, 40.0, at, at,
                40.0, 40.0, 80.0, 80.0, 80.0)  # fmt: skip

    panes = spark.createDataFrame(
        [pane("cold-1", 0), pane("cold-1", 4), pane("dc-1", 0), pane("dc-1", 6),
         pane("ghost", 0), pane("ghost", 9)],
        PANES_SCHEMA,
    )  # fmt: skip
    alerts = absence_alerts(panes, frames, registry, True, None, T0 + timedelta(minutes=9),
                            F.lit(DETECTED))  # fmt: skip
    assert alerts is not None
    got = {(a["sensor_id"], a["rule"], (a["window_start"] - T0).total_seconds()):
           (a["severity"], a["observed_value"], a["threshold"])
           for a in alerts.toArrow().to_pylist()}  # fmt: skip

    # ghost: not registered; dc-1 is not in the cold store. cold-1's last reading (4:30)
    # is 270 s before the clock (9:00): a silence still going on.
    assert got == {
        ("cold-1", "cold_silent", 30.0): ("critical", 240.0, 120.0),
        ("cold-1", "cold_silent", 270.0): ("critical", 270.0, 120.0),
        ("dc-1", "silent", 30.0): ("warning", 360.0, 300.0),
    }


@pytest.mark.parametrize("text", ["yyyy-MM-dd'T'HH:mm", "back\\slash", "it's", ""])
def test_sql_text_reads_back_as_the_same_string(spark, text: str) -> None:
    # The alert id's time format has quotes: SQL text must carry them unchanged.
    assert spark.sql(f"SELECT {sql_text(text)} AS t").first().t == text
