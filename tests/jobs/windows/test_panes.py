"""Panes and what is assembled from them, on static DataFrames: exact values, and the
same windows as a direct aggregation over every reading."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from jobs.windows.panes import deduplicate, measures_5m, panes, silences, stats_1m, stats_5m
from jobs.writer.delta_io import collect_rows

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline


def readings(spark, rows):
    """Readings from (event_id, sensor, time, temperature, humidity[, battery]) tuples; a
    battery at 80 % where none is given."""
    return spark.createDataFrame(
        [(*r, 80.0) if len(r) == 5 else r for r in rows],
        "event_id string, sensor_id string, event_time timestamp, temperature_c double, "
        "humidity_pct double, battery_pct double",
    )  # fmt: skip


def t(minute: int, second: float = 0) -> datetime:
    """An instant (aware UTC), as the job's clocks are: a naive one would be read as the
    process's local time."""
    return datetime(2026, 1, 1, 0, 0, tzinfo=UTC) + timedelta(minutes=minute, seconds=second)


def test_tumbling_windows_after_dedup(spark) -> None:
    df = readings(spark, [
        ("a", "s1", t(0, 10), 20.0, 40.0),
        ("a", "s1", t(0, 10), 20.0, 40.0),  # the same reading, re-sent
        ("b", "s1", t(0, 50), 22.0, 30.0),
        ("c", "s1", t(1, 5), 30.0, 50.0),
        ("d", "s2", t(0, 30), 10.0, 60.0),
    ])  # fmt: skip

    rows = collect_rows(
        stats_1m(panes(deduplicate(df, "2 minutes"))).orderBy("sensor_id", "window_start")
    )

    assert [(r.sensor_id, r.window_start, r.window_end, r.readings) for r in rows] == [
        ("s1", t(0), t(1), 2),
        ("s1", t(1), t(2), 1),
        ("s2", t(0), t(1), 1),
    ]
    first = rows[0]
    assert (first.avg_temperature_c, first.min_temperature_c, first.max_temperature_c) == (
        21.0, 20.0, 22.0,
    )  # fmt: skip
    assert first.avg_humidity_pct == 35.0


def test_a_reading_lands_in_five_sliding_windows(spark) -> None:
    df = panes(readings(spark, [("a", "s1", t(10, 30), 25.0, 40.0)]))

    rows = collect_rows(stats_5m(df, None, t(60)).orderBy("window_start"))

    assert [r.window_start for r in rows] == [t(6), t(7), t(8), t(9), t(10)]
    assert all(r.window_end == r.window_start + timedelta(minutes=5) for r in rows)
    assert all(r.readings == 1 and r.avg_temperature_c == 25.0 for r in rows)


def test_five_minute_windows_equal_a_direct_aggregation(spark) -> None:
    rng = random.Random(3)
    rows = [
        (f"e{i}", f"s{rng.randrange(4)}", t(0, rng.uniform(0, 1200)),
         round(rng.uniform(-10, 60), 2), round(rng.uniform(0, 100), 1),
         round(rng.uniform(0, 100), 1))
        for i in range(600)
    ]  # fmt: skip
    df = readings(spark, rows)
    fields = ["temperature_c", "humidity_pct", "battery_pct"]
    direct = collect_rows(
        df.groupBy("sensor_id", F.window("event_time", "5 minutes", "1 minute").alias("w"))
        .agg(
            F.count(F.lit(1)).alias("n"),
            *(getattr(F, a)(f).alias(f"{a}_{f}") for f in fields for a in ("avg", "min", "max")),
        )
        .filter(F.col("w.end") <= F.lit(t(15)))
        .select("*", F.col("w.start").alias("start"))
    )
    want = {(r.sensor_id, r.start): r for r in direct}

    # The same windows, closed over three watermark ranges as three batches would.
    got, stats = {}, {}
    for after, until in [(None, t(4, 30)), (t(4, 30), t(9)), (t(9), t(15))]:
        for r in collect_rows(measures_5m(panes(df), after, until)):
            assert (r.sensor_id, r.window_start) not in got, "a window closed twice"
            got[(r.sensor_id, r.window_start)] = r
        for r in collect_rows(stats_5m(panes(df), after, until)):
            stats[(r.sensor_id, r.window_start)] = r

    assert got.keys() == want.keys() == stats.keys()
    for key, w in want.items():
        g = got[key]
        assert g.readings == w.n
        for f in fields:
            assert (g[f"min_{f}"], g[f"max_{f}"]) == (w[f"min_{f}"], w[f"max_{f}"])
            assert g[f"avg_{f}"] == pytest.approx(w[f"avg_{f}"], abs=1e-9)
        # sensor_stats_5m: the contract's columns of the same windows.
        assert stats[key].asDict() == {
            k: v for k, v in g.asDict().items() if k in stats[key].asDict()
        }
        assert list(stats[key].asDict()) == [
            "sensor_id", "window_start", "window_end", "readings", "avg_temperature_c",
            "min_temperature_c", "max_temperature_c", "avg_humidity_pct",
        ]  # fmt: skip


def silence_rows(spark, times: list[datetime], after, until, sensor: str = "s"):
    df = panes(readings(spark, [(f"e{i}", sensor, x, 20.0, 50.0) for i, x in enumerate(times)]))
    found = collect_rows(silences(df, 300, after, until).orderBy("window_start"))
    return [(r.window_start, r.window_end, r.observed_value) for r in found]


def test_gaps_longer_than_the_timeout_are_silences(spark) -> None:
    times = [t(0), t(0, 5), t(0, 10), t(6, 40), t(6, 45), t(15)]

    assert silence_rows(spark, times, None, t(16)) == [
        (t(0, 10), t(6, 40), 390.0),
        (t(6, 45), t(15), 495.0),
    ]


def test_a_gap_of_exactly_the_timeout_is_not_a_silence(spark) -> None:
    assert silence_rows(spark, [t(0, 10), t(5, 10)], None, t(6)) == []


def test_a_sensor_still_silent_is_decided_when_the_pane_of_its_timeout_closes(spark) -> None:
    # Last reading 00:02:30; the timeout runs out at 00:07:30, in the pane ending 00:08.
    times = [t(2), t(2, 30)]

    assert silence_rows(spark, times, None, t(7, 59)) == []  # not yet decided
    assert silence_rows(spark, times, None, t(8)) == [(t(2, 30), t(8), 330.0)]
    # Decided in exactly one range of watermarks: not again later.
    assert silence_rows(spark, times, t(8), t(20)) == []


def test_each_silence_is_decided_in_one_batch_only(spark) -> None:
    times = [t(0), t(10), t(10, 30), t(30)]
    ranges = [(None, t(3)), (t(3), t(6)), (t(6), t(16, 10)), (t(16, 10), t(40))]

    found = [row for after, until in ranges for row in silence_rows(spark, times, after, until)]

    assert [row[0] for row in found] == [t(0), t(10, 30), t(30)]
    assert found[0][1] == t(10) and found[1][1] == t(30) and found[2][1] == t(40)
