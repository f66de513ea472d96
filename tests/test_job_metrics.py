"""pipeline_metrics rows from query progress: exact values."""

from __future__ import annotations

from datetime import datetime

from jobs.metrics import batch_line, progress_row


def t(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 0, minute, second)


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
