"""overheat_reading, the default rules file's reading rule on temperature, on an ingest
batch held as Arrow (jobs/alerting/reading_rules.py), on small static inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from conf.paths import RULES_FILE
from contract.alerts import OVERHEAT, UNREGISTERED
from contract.registry import Entry
from contract.rules.parsing import read_rules
from jobs.alerting.alert_columns import alert_id
from jobs.alerting.reading_rules import compile_rules, reading_alerts, reading_hits
from jobs.ingest.parse import split_ingested
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALERTS_SCHEMA, QUARANTINE_SCHEMA, READINGS_SCHEMA

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
NOW = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)


def reading(event_id: str, sensor: str, temp: float, at: datetime) -> tuple:
    values = {
        "event_id": event_id,
        "sensor_id": sensor,
        "event_time": at,
        "temperature_c": temp,
        "humidity_pct": 40.0,
        "battery_pct": 90.0,
        "seq": 1,
        "kafka_partition": 0,
        "kafka_offset": 0,
        "kafka_timestamp": at,
        "ingested_at": at,
    }
    return tuple(values[name] for name in READINGS_SCHEMA.fieldNames())


READINGS_ROWS = [
    reading("e1", "hot", 46.0, T0 + timedelta(seconds=5)),
    reading("e1", "hot", 46.0, T0 + timedelta(seconds=5)),  # re-sent: counts once
    reading("e2", "hot", 48.5, T0 + timedelta(seconds=35)),
    reading("e3", "hot", 47.0, T0 + timedelta(minutes=1, seconds=1)),  # the next minute
    reading("e4", "cold", 11.0, T0 + timedelta(seconds=10)),  # over its own 10 °C
    reading("e5", "cold", 9.0, T0 + timedelta(seconds=20)),
    reading("e6", "normal", 44.9, T0 + timedelta(seconds=20)),  # under the default 45
    reading("e7", "stranger", 60.0, T0 + timedelta(seconds=20)),  # not in the registry
]
SENSORS = {
    "hot": Entry("hot", "DC-1", None),
    "cold": Entry("cold", "Cold store", 10.0),
    "normal": Entry("normal", "Office", None),
}


def overheat_hits(readings: pa.Table, sensors: dict[str, Entry]) -> pa.Table:
    """The default overheat_reading rule's merged buckets of ``readings``."""
    return reading_hits(readings, compile_rules([OVERHEAT_RULE], sensors))


def overheat_alerts(hits: pa.Table, sensors: dict[str, Entry], now: datetime) -> list:
    return reading_alerts(hits, compile_rules([OVERHEAT_RULE], sensors), sensors, now)


OVERHEAT_RULE = read_rules(RULES_FILE).by_name()[OVERHEAT]


def batch(rows: list[tuple]) -> pa.Table:
    """Readings as ingest's Arrow batch holds them (timestamps in UTC)."""
    records = [dict(zip(READINGS_SCHEMA.fieldNames(), r, strict=True)) for r in rows]
    return pa.Table.from_pylist(records, arrow_schema(READINGS_SCHEMA))


def test_alerts_per_sensor_and_minute_with_registry_thresholds() -> None:
    alerts = overheat_alerts(overheat_hits(batch(READINGS_ROWS), SENSORS), SENSORS, NOW)
    got = {(a.sensor_id, a.window_start, a.observed_value, a.readings, a.threshold, a.site)
           for a in alerts}  # fmt: skip
    start, later = T0, T0 + timedelta(minutes=1)
    assert got == {
        ("hot", start, 48.5, 2, 45.0, "DC-1"),
        ("hot", later, 47.0, 1, 45.0, "DC-1"),
        ("cold", start, 11.0, 1, 10.0, "Cold store"),
        ("stranger", start, 60.0, 1, 45.0, UNREGISTERED),
    }
    assert all(a.rule == OVERHEAT and a.severity == "critical" for a in alerts)
    assert all(a.detected_at == NOW and a.window_end - a.window_start == timedelta(minutes=1)
               for a in alerts)  # fmt: skip
    assert all(list(a.asDict()) == ALERTS_SCHEMA.fieldNames() for a in alerts)


def test_alert_ids_are_the_ones_spark_gives(spark) -> None:
    """The same alert found by an earlier version of the job (in Spark) has the same id."""
    alerts = overheat_alerts(overheat_hits(batch(READINGS_ROWS), SENSORS), SENSORS, NOW)
    frame = spark.createDataFrame(alerts, ALERTS_SCHEMA)
    spark_ids = frame.select(
        "alert_id", alert_id(F.col("sensor_id"), OVERHEAT, F.col("window_start")).alias("spark")
    ).collect()
    assert len(spark_ids) == 4 and all(r.alert_id == r.spark for r in spark_ids)


def test_many_distinct_thresholds() -> None:
    sensors = {f"s{i}": Entry(f"s{i}", "site", 10.0 + i / 10) for i in range(500)}
    rows = [reading(f"e{i}", f"s{i}", 10.0 + i / 10 + (0.05 if i % 2 else -0.05), T0)
            for i in range(500)]  # fmt: skip
    hits = overheat_hits(batch(rows), sensors)
    assert sorted(hits["sensor_id"].to_pylist()) == sorted(f"s{i}" for i in range(500) if i % 2)


def test_a_batch_without_readings_raises_nothing() -> None:
    assert overheat_alerts(overheat_hits(batch([]), SENSORS), SENSORS, NOW) == []


def test_the_batch_splits_into_readings_and_quarantine() -> None:
    columns = list(dict.fromkeys([*READINGS_SCHEMA.fieldNames(), *QUARANTINE_SCHEMA.fieldNames()]))
    good = dict(zip(READINGS_SCHEMA.fieldNames(), reading("e1", "a", 20.0, T0), strict=True))
    rows = [
        {**dict.fromkeys(columns), **good},
        {**dict.fromkeys(columns), "raw_value": "{", "error": "invalid_json", "kafka_offset": 7},
    ]
    readings, quarantine = split_ingested(pa.Table.from_pylist(rows))
    assert readings.column_names == READINGS_SCHEMA.fieldNames()
    assert quarantine.column_names == QUARANTINE_SCHEMA.fieldNames()
    assert readings["event_id"].to_pylist() == ["e1"]
    assert quarantine.select(["raw_value", "error", "kafka_offset"]).to_pylist() == [
        {"raw_value": "{", "error": "invalid_json", "kafka_offset": 7}
    ]
