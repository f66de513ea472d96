"""scripts/bench --learned-state (issue 69): the state it measures is the pruned
_baselines of the sensors asked for, and the panes it judges are the windows query's."""

from __future__ import annotations

from pyspark.sql import functions as F

from bench.learned_state import baseline_rows, pane_frame, state_bytes
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import BASELINES_SCHEMA, PANES_SCHEMA


def test_the_state_is_two_rows_a_sensor_measured_three_ways(tmp_path) -> None:
    rows = baseline_rows(50)
    assert rows.schema == arrow_schema(BASELINES_SCHEMA) and rows.num_rows == 100
    assert len(set(rows.column("sensor_id").to_pylist())) == 50
    figures = state_bytes(50, tmp_path)
    assert figures["rows"] == 100
    assert 0 < figures["disk_bytes_per_sensor"] < figures["arrow_bytes_per_sensor"]
    assert figures["arrow_bytes_per_sensor"] < figures["pandas_bytes_per_sensor"]


def test_the_panes_judged_are_rows_of_the_panes_table(spark) -> None:
    frame = pane_frame(spark, 3, range(4, 6))
    assert [(f.name, f.dataType) for f in frame.schema] == [
        (f.name, f.dataType) for f in PANES_SCHEMA
    ]
    rows = frame.select(
        "sensor_id", F.date_format("window_start", "HH:mm").alias("at"), "readings",
        (F.col("sum_temperature_c") / F.col("readings")).alias("avg"),
    ).collect()  # fmt: skip
    assert sorted((r.sensor_id, r.at) for r in rows) == [
        (f"sensor-{n:06d}", m) for n in range(3) for m in ("00:04", "00:05")
    ]
    assert {r.readings for r in rows} == {2}
    assert sorted({r.avg for r in rows}) == [20.0, 20.1, 20.2]
