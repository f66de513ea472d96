"""pipeline_metrics rows from query progress: exact values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from deltalake import DeltaTable

from jobs.writer.pipeline_metrics import batch_line, executed_batches, progress_row, write_metrics
from jobs.writer.tables import create_tables
from lake.layout import Lake

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline


def t(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 0, minute, second, tzinfo=UTC)


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


def test_rows_written_again_stay_one_per_query_batch(tmp_path) -> None:
    """A batch re-run after a crash reports its progress again: still one row."""
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("pipeline_metrics")

    def row(query_id: str, batch_id: int) -> dict:
        progress = {"id": query_id, "name": "ingest", "batchId": batch_id,
                    "timestamp": f"2026-01-01T00:{batch_id:02d}:00.000Z", "numInputRows": batch_id,
                    "durationMs": {"triggerExecution": 10}}  # fmt: skip
        return progress_row(progress)

    assert write_metrics([row("a", 0), row("a", 1), row("b", 0)], path) == 3
    assert write_metrics([row("a", 1), row("a", 2), row("a", 2)], path) == 2
    stored = DeltaTable(path).to_pyarrow_table().sort_by([("query_id", "ascending"),
                                                          ("batch_id", "ascending")])  # fmt: skip
    assert list(zip(stored["query_id"].to_pylist(), stored["batch_id"].to_pylist(),
                    strict=True)) == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]  # fmt: skip
    # Naive UTC in, the same instant out.
    assert stored["timestamp"][2].as_py() == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)


def test_a_run_that_finds_nothing_new_has_no_batch_to_wait_for(spark, tmp_path) -> None:
    # The second availableNow run over the same checkpoint executes no batch, yet leaves
    # a progress with the next batch id that no listener hears of (jobs.writer.pipeline_metrics).
    source, checkpoint = str(tmp_path / "source"), str(tmp_path / "checkpoint")
    spark.range(5).write.format("delta").save(source)

    def run_once():
        query = (
            spark.readStream.format("delta").load(source).writeStream.format("noop")
            .option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        return query

    first, second = run_once(), run_once()

    assert executed_batches([first]) == {str(first.id): 0}
    assert second.lastProgress is not None and second.lastProgress["batchId"] == 1
    assert executed_batches([first, second]) == {str(first.id): 0}
