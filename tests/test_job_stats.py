"""Window statistics and metrics rows on static inputs: exact values."""

from __future__ import annotations

from datetime import datetime

from jobs.metrics import batch_line, progress_row
from jobs.stats import deduplicate, window_stats


def readings(spark, rows):
    return spark.createDataFrame(
        rows, "event_id string, sensor_id string, event_time timestamp, temperature_c double, "
        "humidity_pct double",
    )  # fmt: skip


def t(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 0, minute, second)


def test_tumbling_windows_after_dedup(spark) -> None:
    df = readings(spark, [
        ("a", "s1", t(0, 10), 20.0, 40.0),
        ("a", "s1", t(0, 10), 20.0, 40.0),  # the same reading, re-sent
        ("b", "s1", t(0, 50), 22.0, 30.0),
        ("c", "s1", t(1, 5), 30.0, 50.0),
        ("d", "s2", t(0, 30), 10.0, 60.0),
    ])  # fmt: skip

    rows = (
        window_stats(deduplicate(df, "2 minutes"), "1 minute")
        .orderBy("sensor_id", "window_start")
        .collect()
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


def test_sliding_windows_cover_each_reading_five_times(spark) -> None:
    df = readings(spark, [("a", "s1", t(10, 30), 25.0, 40.0)])

    rows = window_stats(df, "5 minutes", "1 minute").orderBy("window_start").collect()

    assert [r.window_start for r in rows] == [t(6), t(7), t(8), t(9), t(10)]
    assert all(r.window_end == datetime(2026, 1, 1, 0, r.window_start.minute + 5) for r in rows)
    assert all(r.readings == 1 and r.avg_temperature_c == 25.0 for r in rows)


def test_progress_row_and_line() -> None:
    progress = {
        "id": "5f0c", "name": "sensor_stats_1m", "batchId": 7,
        "timestamp": "2026-01-01T00:10:00.000Z", "numInputRows": 1200,
        "inputRowsPerSecond": 100.0, "processedRowsPerSecond": 400.0,
        "durationMs": {"triggerExecution": 3000},
        "eventTime": {"watermark": "2026-01-01T00:08:00.000Z"},
        "stateOperators": [{"numRowsTotal": 50, "numRowsDroppedByWatermark": 3},
                           {"numRowsTotal": 20, "numRowsDroppedByWatermark": 0}],
        "observedMetrics": {"output": {"rows": 12}},
    }  # fmt: skip

    row = progress_row(progress)

    assert row["watermark"] == t(8) and row["timestamp"] == t(10)
    assert (row["rows_dropped_by_watermark"], row["state_rows"], row["output_rows"]) == (3, 70, 12)
    assert row["batch_duration_ms"] == 3000 and row["quarantined_rows"] == 0
    assert batch_line(row) == (
        "sensor_stats_1m #7: 1,200 rows in, 3 late rows dropped, 12 rows written, 3,000 ms"
    )
