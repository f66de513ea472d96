"""AlertWriter: each alert_id once in the alerts table, across batches and runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import Row

from contract.alerts import OVERHEAT
from jobs.alerting.alert_sink import AlertWriter
from jobs.writer.delta_io import BatchWriter
from jobs.writer.tables import ALERTS_SCHEMA
from lake.layout import Lake
from tests.support.query_checkpoint import lake_with_checkpoint

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def new_lake(root: Path) -> Lake:
    return lake_with_checkpoint(root, "q", "c1")


def alert(sensor: str, start: datetime, rule: str = OVERHEAT) -> Row:
    values = {
        "alert_id": f"{sensor}|{rule}|{start.isoformat()}",
        "sensor_id": sensor,
        "site": "s",
        "rule": rule,
        "severity": "critical",
        "window_start": start,
        "window_end": start + timedelta(minutes=1),
        "observed_value": 50.0,
        "threshold": 45.0,
        "readings": 1,
        "detected_at": start,
    }
    return Row(**{name: values[name] for name in ALERTS_SCHEMA.fieldNames()})


def writer(spark, lake: Lake, span: timedelta = timedelta(hours=6)) -> AlertWriter:
    return AlertWriter(BatchWriter(spark, lake, "q"), (OVERHEAT,), span)


def ids(spark, lake: Lake) -> list[str]:
    table = spark.read.format("delta").load(lake.table("alerts"))
    return sorted(row.alert_id for row in table.select("alert_id").collect())


def test_an_alert_found_again_is_written_once(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    spark.createDataFrame([], ALERTS_SCHEMA).write.format("delta").save(lake.table("alerts"))
    first = writer(spark, lake)
    assert len(first.write([alert("a", T0), alert("b", T0)], 0)) == 2
    # The same minute again in the next batch (readings of one minute split across batches).
    assert [r.sensor_id for r in first.write([alert("a", T0), alert("c", T0)], 1)] == ["c"]
    # A new run (restart) knows the ids from the table.
    again = writer(spark, lake)
    assert (
        again.write([alert("a", T0), alert("b", T0 + timedelta(minutes=1))], 2)[0].sensor_id == "b"
    )
    assert len(ids(spark, lake)) == 4


def test_an_alert_older_than_the_span_is_looked_up_in_the_table(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    spark.createDataFrame([], ALERTS_SCHEMA).write.format("delta").save(lake.table("alerts"))
    short = writer(spark, lake, span=timedelta(minutes=10))
    old = alert("a", T0)
    short.write([old], 0)
    short.write([alert("a", T0 + timedelta(hours=2))], 1)  # moves the span past ``old``
    assert short.write([old], 2) == []  # a very late reading of that minute
    assert ids(spark, lake) == sorted([old.alert_id, alert("a", T0 + timedelta(hours=2)).alert_id])


def test_a_rule_added_while_running_is_read_from_the_table_too(spark, tmp_path) -> None:
    """A writer started with overheat_reading given a rule added to the rules file since
    (battery_low): that rule's ids in the table are read too, so a replay of its alerts
    (another run wrote them) writes nothing twice."""
    lake = new_lake(tmp_path)
    spark.createDataFrame([], ALERTS_SCHEMA).write.format("delta").save(lake.table("alerts"))
    earlier = AlertWriter(BatchWriter(spark, lake, "q"), ("battery_low",))
    assert len(earlier.write([alert("a", T0, "battery_low")], 0)) == 1

    running = writer(spark, lake)
    assert len(running.write([alert("b", T0)], 1)) == 1
    new = running.write([alert("a", T0, "battery_low"), alert("c", T0, "battery_low")], 2)
    assert [r.sensor_id for r in new] == ["c"] and set(running.rules) == {OVERHEAT, "battery_low"}
    assert len(ids(spark, lake)) == 3
