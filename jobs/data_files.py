"""Delta data files written on the executors, described for the driver's commit.

A table's rows never cross to the driver: each task writes the rows it holds to one new,
uniquely named Parquet file in the table's folder and returns one small row describing it
(path, size, row count, Delta statistics). The driver commits the descriptions it receives
(jobs/delta_io.py). Spark hands the driver the result of exactly one attempt of each task,
so a file written by a failed or speculative attempt is never committed: it stays unlisted
in the log, and table maintenance's VACUUM removes it once it is older than the retention.

The Delta statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) are what
readers skip files by (Spark's Delta source and data skipping, ``lake.reader``'s pushdown),
so they must never claim less than the file holds: timestamps are rounded outwards to the
millisecond (the precision of Delta's JSON statistics), and a string longer than
:data:`MAX_STAT_STRING` leaves its column without min/max rather than a cut value.
"""

from __future__ import annotations

import json
import math
import sys
import time
import uuid
import zipimport
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.tables import arrow_schema
from lake import storage

# One row per data file a task wrote: what a Delta "add" action needs.
DATA_FILE = StructType(
    [
        StructField("table", StringType()),  # the table's folder (URI or path)
        StructField("path", StringType()),  # relative to the table's folder
        StructField("size", LongType()),
        StructField("modification_time", LongType()),  # epoch milliseconds
        StructField("num_records", LongType()),
        StructField("stats", StringType()),  # Delta's statistics JSON
    ]
)
DATA_FILE_ARROW = arrow_schema(DATA_FILE)

MAX_STAT_STRING = 64
_MILLI = timedelta(milliseconds=1)


def task_started() -> None:
    """What every task of the job's own code does first, on its Python worker.

    PySpark's worker calls ``importlib.invalidate_caches()`` before each task, which makes
    every cached zip importer re-read its archive's directory: one per package of
    ``pyspark.zip`` and of Spark's core jar on the worker's path, some 120 ms per task on
    this machine (docs/benchmarks.md). Once the worker has imported what it needs, those
    importers can go (a later import makes a new one): the next tasks skip the re-reads.
    """
    for path, finder in list(sys.path_importer_cache.items()):
        if isinstance(finder, zipimport.zipimporter):
            del sys.path_importer_cache[path]


def file_name(batch_id: int) -> str:
    """A new data file's name: the batch, the task (partition and attempt) and a random
    part, so no two attempts, batches or runs ever write the same file."""
    task = TaskContext.get()
    partition = task.partitionId() if task is not None else 0
    attempt = task.taskAttemptId() if task is not None else 0
    return f"part-{batch_id:08d}-{partition:05d}-{attempt}-{uuid.uuid4().hex}.snappy.parquet"


def _instant(value: datetime, up: bool) -> str:
    """A timestamp statistic: UTC, to the millisecond, rounded away from the data."""
    floor = value - timedelta(microseconds=value.microsecond % 1000)
    if up and floor != value:
        floor += _MILLI
    return floor.strftime("%Y-%m-%dT%H:%M:%S.") + f"{floor.microsecond // 1000:03d}Z"


def _stat_value(value: Any, up: bool) -> Any:
    """A min (``up`` False) or max value as Delta's statistics JSON holds it, or None
    where none may be given (a long or invalid string, a NaN or infinity)."""
    if isinstance(value, datetime):
        return _instant(value, up)
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return text if len(text) <= MAX_STAT_STRING else None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass
class ColumnStats:
    """Running min, max and null count of one column across a file's batches."""

    low: Any = None
    high: Any = None
    nulls: int = 0

    def add(self, values: pa.Array | pa.ChunkedArray) -> None:
        """Take one batch's values of the column into account."""
        self.nulls += values.null_count
        if values.null_count == len(values):
            return
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            # As bytes: the order Delta compares strings in (UTF-8 bytes), and a record's
            # raw text may be no valid UTF-8 at all (it is quarantined as it came).
            values = values.cast(pa.binary())
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)


@dataclass
class FileStats:
    """Delta statistics of one data file, gathered batch by batch as it is written."""

    columns: dict[str, ColumnStats]
    rows: int = 0

    @classmethod
    def of(cls, schema: pa.Schema) -> FileStats:
        """Empty statistics for a file of ``schema``."""
        return cls({name: ColumnStats() for name in schema.names})

    def add(self, batch: pa.RecordBatch) -> None:
        """Take one written batch into account."""
        self.rows += batch.num_rows
        for name, column in self.columns.items():
            column.add(batch.column(name))

    def to_json(self) -> str:
        """Delta's statistics JSON for the file."""
        lows, highs = {}, {}
        for name, column in self.columns.items():
            if column.low is None:
                continue
            low, high = _stat_value(column.low, up=False), _stat_value(column.high, up=True)
            if low is not None and high is not None:
                lows[name], highs[name] = low, high
        nulls = {name: column.nulls for name, column in self.columns.items()}
        return json.dumps(
            {"numRecords": self.rows, "minValues": lows, "maxValues": highs, "nullCount": nulls},
            separators=(",", ":"),
        )


@dataclass
class DataFileWriter:
    """One new Parquet data file of one table, opened at its first row.

    ``close`` returns the file's description (a :data:`DATA_FILE` row as a dict), or None
    when no row was written (no file exists then).
    """

    table_uri: str
    schema: pa.Schema
    batch_id: int
    _writer: pq.ParquetWriter | None = field(default=None, init=False)
    _sink: Any = field(default=None, init=False)
    _name: str = field(default="", init=False)
    _stats: FileStats | None = field(default=None, init=False)

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append rows (with at least the table's columns) to the file."""
        if not data.num_rows:
            return
        if self._writer is None:
            filesystem, folder = storage.filesystem(self.table_uri)
            self._name = file_name(self.batch_id)
            self._sink = filesystem.open_output_stream(f"{folder}/{self._name}")
            self._writer = pq.ParquetWriter(self._sink, self.schema, compression="snappy")
            self._stats = FileStats.of(self.schema)
        rows = data.select(self.schema.names).cast(self.schema)
        assert self._stats is not None
        for batch in rows.to_batches() if isinstance(rows, pa.Table) else [rows]:
            self._writer.write_batch(batch)
            self._stats.add(batch)

    def close(self) -> dict[str, Any] | None:
        """Finish the file; its description, or None if it holds no row."""
        if self._writer is None:
            return None
        self._writer.close()
        size = self._sink.tell()
        self._sink.close()
        assert self._stats is not None
        return {
            "table": self.table_uri,
            "path": self._name,
            "size": size,
            "modification_time": int(time.time() * 1000),
            "num_records": self._stats.rows,
            "stats": self._stats.to_json(),
        }


def described(files: Iterable[dict[str, Any] | None]) -> Iterator[pa.RecordBatch]:
    """The descriptions of the files that exist, as one :data:`DATA_FILE` batch."""
    rows = [f for f in files if f is not None]
    if rows:
        yield pa.RecordBatch.from_pylist(rows, DATA_FILE_ARROW)


def write_data_files(df: DataFrame, table_uri: str, schema: pa.Schema, batch_id: int) -> DataFrame:
    """``df``'s rows written on the executors as new data files of the table at
    ``table_uri`` whose columns are ``schema`` (one file per non-empty partition); the
    result is their descriptions (:data:`DATA_FILE`), one row per file. Nothing is
    written until it is evaluated.

    At most one task per executor core: each task of Python code costs a fixed 30 to
    60 ms besides its rows, and each writes a file (a micro-batch of a few hundred rows
    would otherwise pay for every shuffle partition)."""

    def writer(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task_started()
        out = DataFileWriter(table_uri, schema, batch_id)
        for batch in batches:
            out.write(batch)
        yield from described([out.close()])

    return per_core(df.select(*schema.names)).mapInArrow(writer, DATA_FILE)


# Task slots of the lake path, where the real-time path holds others for good: set by the
# job when it adds those to local mode (jobs/realtime.py); else every slot.
LAKE_SLOTS = "spark.sensorwatch.lakeSlots"


def per_core(df: DataFrame) -> DataFrame:
    """``df`` in at most as many partitions as the lake path has task slots, by merging
    whole partitions (no shuffle: one Kafka partition's records stay in one task)."""
    session = df.sparkSession
    slots = session.conf.get(LAKE_SLOTS, None) or session.sparkContext.defaultParallelism
    return df.coalesce(int(slots))
