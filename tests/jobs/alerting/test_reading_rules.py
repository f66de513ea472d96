"""The rules file's reading rules on an ingest batch held as Arrow (jobs/alerting/reading_rules.py):
the same buckets as the overheat rule it generalises, and any field, comparison, scope
and threshold. No JVM."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pyarrow as pa

from conf.paths import PROJECT_ROOT
from contract.registry import Entry
from contract.rules.model import ReadingRule
from contract.rules.parsing import parse_rules, read_rules
from jobs.alerting.reading_rules import compile_rules, rule_buckets
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import READINGS_SCHEMA

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SENSORS = {
    "hot": Entry("hot", "DC-1", None, "TX-9"),
    "cold": Entry("cold", "Cold Store", 10.0, "TX-1"),
    "office": Entry("office", "Office", None, "TX-1"),
}


def batch(rows: list[dict]) -> pa.Table:
    """Readings as ingest's Arrow batch holds them."""
    full = [
        {"humidity_pct": 40.0, "battery_pct": 90.0, "seq": 1, "kafka_partition": 0,
         "kafka_offset": i, "kafka_timestamp": r["event_time"] + timedelta(seconds=1),
         "ingested_at": T0, **r}
        for i, r in enumerate(rows)
    ]  # fmt: skip
    return pa.Table.from_pylist(full, arrow_schema(READINGS_SCHEMA))


def reading(event_id: str, sensor: str, seconds: float, **values: float) -> dict:
    return {"event_id": event_id, "sensor_id": sensor, "temperature_c": 20.0,
            "event_time": T0 + timedelta(seconds=seconds), **values}  # fmt: skip


def rules(*given: dict) -> list[ReadingRule]:
    base = {"kind": "reading", "severity": "warning"}
    found = parse_rules({"rule": [{**base, **g} for g in given]}).rules
    assert all(isinstance(r, ReadingRule) for r in found)
    return list(found)  # type: ignore[arg-type]


def test_the_default_overheat_rule_finds_each_hot_minute_of_each_sensor() -> None:
    """Against a plain computation: a registered max_temp_c wins, else 45 °C; one row per
    sensor and minute with the hottest value and the distinct readings."""
    rng = random.Random(3)
    sensors = {**SENSORS, "stranger": None}
    rows = [
        reading(
            f"e{i % 170}",
            rng.choice(list(sensors)),
            rng.uniform(0, 600),
            temperature_c=rng.choice([9.0, 10.0, 30.0, 44.9, 45.0, 52.5]),
        )
        for i in range(200)
    ]  # fmt: skip (e0..e169: some re-sent copies)
    readings = batch(rows)
    overheat = read_rules(PROJECT_ROOT / "conf" / "rules.toml").by_name()["overheat_reading"]
    assert isinstance(overheat, ReadingRule)

    got = rule_buckets(readings, compile_rules([overheat], SENSORS))

    want: dict[tuple, tuple[float, set[str], float]] = {}
    for r in readings.to_pylist():
        own = SENSORS.get(r["sensor_id"])
        limit = own.max_temp_c if own is not None and own.max_temp_c is not None else 45.0
        if r["temperature_c"] >= limit:
            key = (r["sensor_id"], r["event_time"].replace(second=0, microsecond=0))
            value, ids, _ = want.get(key, (r["temperature_c"], set(), limit))
            want[key] = (max(value, r["temperature_c"]), ids | {r["event_id"]}, limit)
    assert got.num_rows > 5 and set(got["rule"].to_pylist()) == {"overheat_reading"}
    assert {
        (g["sensor_id"], g["window_start"]): (g["observed_value"], g["readings"], g["threshold"])
        for g in got.to_pylist()
    } == {key: (value, len(ids), limit) for key, (value, ids, limit) in want.items()}


def test_a_low_rule_keeps_the_lowest_value_and_counts_distinct_readings() -> None:
    battery = rules({"name": "battery_low", "field": "battery_pct", "op": "<=", "threshold": 15})
    readings = batch([
        reading("a", "hot", 1, battery_pct=14.0), reading("a", "hot", 1, battery_pct=14.0),
        reading("b", "hot", 30, battery_pct=12.5), reading("c", "hot", 61, battery_pct=15.0),
        reading("d", "hot", 62, battery_pct=15.1), reading("e", "stranger", 5, battery_pct=3.0),
    ])  # fmt: skip

    got = rule_buckets(readings, compile_rules(battery, SENSORS)).sort_by(
        [("sensor_id", "ascending"), ("window_start", "ascending")]
    )

    assert [(r["sensor_id"], r["window_start"], r["observed_value"], r["readings"])
            for r in got.to_pylist()] == [
        ("hot", T0, 12.5, 2), ("hot", T0 + timedelta(minutes=1), 15.0, 1),
        ("stranger", T0, 3.0, 1),
    ]  # fmt: skip
    assert set(got["threshold"].to_pylist()) == {15.0}


def test_scopes_and_overrides_pick_the_sensors_and_their_thresholds() -> None:
    warm = rules(
        {"name": "cold_store_warm", "field": "temperature_c", "op": ">", "threshold": 8.0,
         "scope": {"sites": ["Cold Store"], "sensors": ["loose"]}},
        {"name": "too_warm", "field": "temperature_c", "op": ">", "threshold": 30.0,
         "override": [{"models": ["TX-1"], "threshold": 25.0},
                      {"sensors": ["office"], "threshold": 21.0}]},
    )  # fmt: skip
    readings = batch([
        reading("1", "cold", 1, temperature_c=9.0),  # > 8 at the cold store
        reading("2", "hot", 1, temperature_c=26.0),  # DC-1 is not in the first's scope
        reading("3", "loose", 1, temperature_c=9.0),  # unregistered, named by the scope
        reading("4", "stranger", 1, temperature_c=26.0),  # unregistered: the rule's 30
        reading("5", "office", 1, temperature_c=22.0),  # its own 21 beats TX-1's 25
    ])  # fmt: skip

    got = {(r["rule"], r["sensor_id"]): r["threshold"]
           for r in rule_buckets(readings, compile_rules(warm, SENSORS)).to_pylist()}  # fmt: skip

    assert got == {
        ("cold_store_warm", "cold"): 8.0,
        ("cold_store_warm", "loose"): 8.0,
        ("too_warm", "office"): 21.0,
    }


def test_nothing_breached_is_an_empty_table_of_the_bucket_schema() -> None:
    hot = rules({"name": "hot", "field": "temperature_c", "op": ">=", "threshold": 99})

    got = rule_buckets(batch([reading("a", "hot", 1)]), compile_rules(hot, SENSORS))

    assert got.num_rows == 0 and "rule" in got.column_names
