"""pipeline_metrics: one row per query per micro-batch, from a StreamingQueryListener.

The listener only collects rows (its callbacks must return quickly); the job writes them
with :func:`write_metrics` from its main loop. Rows already in the table (by query_id and
batch_id) are not appended again, so a batch that Spark re-runs after a crash still has one
row.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from common.waiting import poll_until
from contract.times import parse_instant
from jobs.metrics import JobMetrics
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.delta_io import committing
from jobs.writer.tables import PIPELINE_METRICS_SCHEMA
from lake.reader import AllOf, AtLeast, OneOf, read_path

# Name of the observe() metrics a query reports its written rows under: "rows", and for
# ingest also "quarantined". (Delta's sink does not report the rows it wrote.)
OUTPUT_METRICS = "output"


def _timestamp(text: str | None) -> datetime | None:
    # Spark's progress writes ISO-8601 instants with a Z.
    return parse_instant(text) if text else None


def progress_row(progress: dict[str, Any]) -> dict[str, Any]:
    """A pipeline_metrics row from a query progress (as its JSON object)."""
    state = progress.get("stateOperators") or []
    observed = (progress.get("observedMetrics") or {}).get(OUTPUT_METRICS) or {}
    return {
        "query": progress.get("name") or str(progress["id"]),
        "query_id": str(progress["id"]),
        "batch_id": int(progress["batchId"]),
        "timestamp": _timestamp(progress["timestamp"]),
        "input_rows": int(progress.get("numInputRows") or 0),
        "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0),
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0),
        "batch_duration_ms": int((progress.get("durationMs") or {}).get("triggerExecution", 0)),
        "watermark": _timestamp((progress.get("eventTime") or {}).get("watermark")),
        "rows_dropped_by_watermark": sum(
            int(op.get("numRowsDroppedByWatermark", 0)) for op in state
        ),
        "state_rows": sum(int(op.get("numRowsTotal", 0)) for op in state),
        "output_rows": int(observed.get("rows", 0)),
        "quarantined_rows": int(observed.get("quarantined", 0)),
    }


def batch_line(row: dict[str, Any]) -> str:
    """One short line per batch for a terminal: rows in, late rows dropped, rows written."""
    parts = [f"{row['query']} #{row['batch_id']}: {row['input_rows']:,} rows in"]
    if row["quarantined_rows"]:
        parts.append(f"{row['quarantined_rows']:,} quarantined")
    if row["rows_dropped_by_watermark"]:
        parts.append(f"{row['rows_dropped_by_watermark']:,} late rows dropped")
    if row["output_rows"]:
        parts.append(f"{row['output_rows']:,} rows written")
    parts.append(f"{row['batch_duration_ms']:,} ms")
    return ", ".join(parts)


class MetricsListener(StreamingQueryListener):
    """Collects a pipeline_metrics row per progress event; optionally echoes a line and
    keeps the job's Prometheus metrics (jobs/metrics.py) current."""

    def __init__(
        self, echo: Callable[[str], None] | None = None, exported: JobMetrics | None = None
    ) -> None:
        self._exported = exported
        self._names: dict[str, str] = {}  # query id -> name (idle events carry no name)
        self._rows: list[dict[str, Any]] = []
        self._last_batch: dict[str, int] = {}
        self._lock = threading.Lock()
        self._echo = echo

    def onQueryStarted(self, event: Any) -> None:
        """Remember the query's name; its start counts as its first report, so a query
        stuck in its first batch shows as stuck too."""
        name = event.name or str(event.id)
        with self._lock:
            self._names[str(event.id)] = name
        if self._exported is not None:
            self._exported.reported(name)

    def onQueryProgress(self, event: Any) -> None:
        """Keep the batch's row; echo it when the batch did something."""
        progress = json.loads(event.progress.json)
        row = progress_row(progress)
        if self._exported is not None:
            self._exported.progress(progress, row)
        with self._lock:
            self._rows.append(row)
            self._last_batch[row["query_id"]] = row["batch_id"]
        if self._echo and (row["input_rows"] or row["output_rows"]):
            self._echo(batch_line(row))

    def onQueryIdle(self, event: Any) -> None:
        """The query is alive with nothing to do: it reported."""
        if self._exported is not None:
            with self._lock:
                name = self._names.get(str(event.id), str(event.id))
            self._exported.reported(name)

    def onQueryTerminated(self, event: Any) -> None:
        """Nothing to record."""

    def take(self) -> list[dict[str, Any]]:
        """The rows collected since the last call."""
        with self._lock:
            rows, self._rows = self._rows, []
        return rows

    def give_back(self, rows: list[dict[str, Any]]) -> None:
        """Rows :meth:`take` gave that could not be written: the next take has them."""
        with self._lock:
            self._rows = [*rows, *self._rows]

    def wait_for(self, batches: dict[str, int], timeout: float = 30.0) -> bool:
        """Wait until progress up to ``batches`` (query id -> batch id) has arrived.

        Progress events reach the listener asynchronously, after a query has finished.
        """

        def arrived() -> bool:
            with self._lock:
                return all(self._last_batch.get(q, -1) >= b for q, b in batches.items())

        return poll_until(arrived, timeout, 0.05)


def executed_batches(queries: list[StreamingQuery]) -> dict[str, int]:
    """Query id -> the newest batch id this run executed, for the queries that ran one.

    A trigger that found no data also leaves a progress (``lastProgress``, with the next
    batch id), but the listener never hears of it: waiting for that id would wait for the
    listener's whole timeout, 30 s at the end of every availableNow run with nothing new.
    Only an executed batch's progress times ``addBatch``.
    """
    return {
        str(q.id): max(p["batchId"] for p in ran)
        for q in queries
        if (ran := [p for p in q.recentProgress if "addBatch" in p["durationMs"]])
    }


def write_metrics(rows: Iterable[dict[str, Any]], path: str) -> int:
    """Append the rows not yet in the table (by query_id and batch_id); returns how many
    rows were given. Reads back only the given queries' batches from the lowest given
    batch id on (file statistics skip the rest), then appends with delta-rs."""
    given = {(r["query_id"], r["batch_id"]): r for r in rows}
    if not given:
        return 0
    where = AllOf(
        [
            OneOf("query_id", tuple(sorted({q for q, _ in given}))),
            AtLeast("batch_id", min(b for _, b in given)),
        ]
    )
    present = read_path(path, ["query_id", "batch_id"], where)
    seen = set(zip(present["query_id"].to_pylist(), present["batch_id"].to_pylist(), strict=True))
    new = [row for key, row in given.items() if key not in seen]
    if new:
        data = pa.Table.from_pylist(new, arrow_schema(PIPELINE_METRICS_SCHEMA))
        with committing(path) as commit:
            write_deltalake(
                commit.table, data, mode="append", commit_properties=commit.properties()
            )
    return len(given)
