"""The overheat rule: candidates in Spark, alerts in Python, on small static inputs."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobs.alerts import (
    OVERHEAT,
    UNREGISTERED,
    overheat_alerts,
    overheat_candidates,
    overheat_groups,
    overheat_threshold,
)
from jobs.registry import Sensor
from jobs.tables import ALERTS, READINGS

T0 = datetime(2026, 1, 1, 12, 0)
NOW = datetime(2026, 1, 1, 12, 5)


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
    return tuple(values[name] for name in READINGS.fieldNames())


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
    "hot": Sensor("DC-1", None),
    "cold": Sensor("Cold store", 10.0),
    "normal": Sensor("Office", None),
}


def test_alerts_per_sensor_and_minute_with_registry_thresholds(spark) -> None:
    readings = spark.createDataFrame(READINGS_ROWS, READINGS)
    candidates = overheat_candidates(readings, overheat_threshold(SENSORS, 45.0)).collect()
    alerts = overheat_alerts(candidates, SENSORS, NOW)
    got = {(a.sensor_id, a.window_start, a.observed_value, a.readings, a.threshold, a.site)
           for a in alerts}  # fmt: skip
    assert got == {
        ("hot", T0, 48.5, 2, 45.0, "DC-1"),
        ("hot", T0 + timedelta(minutes=1), 47.0, 1, 45.0, "DC-1"),
        ("cold", T0, 11.0, 1, 10.0, "Cold store"),
        ("stranger", T0, 60.0, 1, 45.0, UNREGISTERED),
    }
    assert all(a.rule == OVERHEAT and a.detected_at == NOW for a in alerts)
    assert all(list(a.asDict()) == ALERTS.fieldNames() for a in alerts)
    # The ids are Spark's: the same alert found again has the same id.
    assert len({a.alert_id for a in alerts}) == 4
    again = overheat_alerts(
        overheat_candidates(readings, overheat_threshold(SENSORS, 45.0)).collect(), {}, NOW
    )
    assert {a.alert_id for a in again} >= {a.alert_id for a in alerts if a.sensor_id == "hot"}


def test_grouped_in_spark_gives_the_same_alerts(spark) -> None:
    candidates = overheat_candidates(
        spark.createDataFrame(READINGS_ROWS, READINGS), overheat_threshold(SENSORS, 45.0)
    )
    one_by_one = overheat_alerts(candidates.collect(), SENSORS, NOW)
    grouped = overheat_alerts(overheat_groups(candidates).collect(), SENSORS, NOW)
    assert sorted(one_by_one) == sorted(grouped)


def test_many_distinct_thresholds_stay_one_flat_expression(spark) -> None:
    sensors = {f"s{i}": Sensor("site", 10.0 + i / 10) for i in range(500)}
    rows = [reading(f"e{i}", f"s{i}", 10.0 + i / 10 + (0.05 if i % 2 else -0.05), T0)
            for i in range(500)]  # fmt: skip
    hot = overheat_candidates(
        spark.createDataFrame(rows, READINGS), overheat_threshold(sensors, 45.0)
    )
    assert sorted(r.sensor_id for r in hot.select("sensor_id").collect()) == sorted(
        f"s{i}" for i in range(500) if i % 2
    )
