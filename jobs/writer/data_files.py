"""Delta data files written on the executors, described for the driver's commit.

A table's rows never cross to the driver: each task writes the rows it holds to one new,
uniquely named Parquet file in the table's folder and returns one small row describing it
(path, size, row count, Delta statistics). The driver commits the descriptions it receives
(jobs/writer/delta_io.py). Spark hands the driver the result of exactly one attempt of each task,
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
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.spark.arrow_schema import arrow_schema
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
    """Min, max and null count of one column across a file's row groups."""

    low: Any = None
    high: Any = None
    nulls: int | None = 0  # None once a row group did not say
    bounded: bool = True  # False once a row group with values gave no min/max

    def add(self, low: Any, high: Any, nulls: int | None, values: int) -> None:
        """Take one row group's statistics into account (``values``: its non-null count;
        ``nulls`` None: unknown)."""
        self.nulls = None if nulls is None or self.nulls is None else self.nulls + nulls
        if not values:
            return
        if low is None or high is None:
            self.bounded = False
            return
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)


@dataclass
class FileStats:
    """Delta statistics of one data file, from the footer its Parquet writer wrote."""

    columns: dict[str, ColumnStats]
    rows: int = 0

    @classmethod
    def of_file(cls, footer: pq.FileMetaData) -> FileStats:
        """The statistics a Parquet file's footer holds, per column, for Delta.

        Text as its raw bytes: the order Delta compares strings in (UTF-8 bytes), and a
        record's raw text may be no valid UTF-8 at all (it is quarantined as it came).
        """
        stats = cls({name: ColumnStats() for name in footer.schema.names}, footer.num_rows)
        for group in range(footer.num_row_groups):
            row_group = footer.row_group(group)
            for index in range(row_group.num_columns):
                chunk = row_group.column(index)
                column = stats.columns[chunk.path_in_schema]
                found = chunk.statistics
                if found is None:  # no statistics at all: no bounds, nulls unknown
                    column.add(None, None, None, row_group.num_rows)
                    continue
                values = row_group.num_rows - found.null_count
                if not found.has_min_max:
                    column.add(None, None, found.null_count, values)
                elif found.logical_type.type == "STRING":
                    column.add(found.min_raw, found.max_raw, found.null_count, values)
                else:
                    column.add(found.min, found.max, found.null_count, values)
        return stats

    def to_json(self) -> str:
        """Delta's statistics JSON for the file."""
        lows, highs = {}, {}
        for name, column in self.columns.items():
            if column.low is None or not column.bounded:
                continue
            low, high = _stat_value(column.low, up=False), _stat_value(column.high, up=True)
            if low is not None and high is not None:
                lows[name], highs[name] = low, high
        # A count no row group gave is left out: Delta reads a missing one as unknown.
        nulls = {n: c.nulls for n, c in self.columns.items() if c.nulls is not None}
        return json.dumps(
            {"numRecords": self.rows, "minValues": lows, "maxValues": highs, "nullCount": nulls},
            separators=(",", ":"),
        )


@dataclass
class DataFileWriter:
    """One new Parquet data file of one table, made in memory from its first row and
    stored in one piece by ``close``: a task that fails before leaves nothing behind, and
    on object storage the file appears whole or not at all (a single PUT, or a multipart
    upload that is never completed).

    ``close`` returns the file's description (a :data:`DATA_FILE` row as a dict), or None
    when no row was written (no file exists then).
    """

    table_uri: str
    schema: pa.Schema
    batch_id: int
    _writer: pq.ParquetWriter | None = field(default=None, init=False)
    _buffer: pa.BufferOutputStream | None = field(default=None, init=False)

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Append rows (with at least the table's columns) to the file."""
        if not data.num_rows:
            return
        if self._writer is None:
            self._buffer = pa.BufferOutputStream()
            self._writer = pq.ParquetWriter(self._buffer, self.schema, compression="snappy")
        rows = data.select(self.schema.names).cast(self.schema)
        if isinstance(rows, pa.Table):
            self._writer.write_table(rows)
        else:
            self._writer.write_batch(rows)

    def close(self) -> dict[str, Any] | None:
        """Finish the file and store it; its description, or None if it holds no row."""
        if self._writer is None:
            return None
        assert self._buffer is not None
        self._writer.close()
        # The statistics the writer put in the footer: no second pass over the rows.
        stats = FileStats.of_file(self._writer.writer.metadata)
        content = self._buffer.getvalue()
        filesystem, folder = storage.filesystem(self.table_uri)
        name = file_name(self.batch_id)
        with filesystem.open_output_stream(f"{folder}/{name}") as out:
            out.write(content)
        return {
            "table": self.table_uri,
            "path": name,
            "size": content.size,
            "modification_time": int(time.time() * 1000),
            "num_records": stats.rows,
            "stats": stats.to_json(),
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
# job when it adds those to local mode (jobs/queries/realtime.py); else every slot.
LAKE_SLOTS = "spark.sensorwatch.lakeSlots"


def per_core(df: DataFrame) -> DataFrame:
    """``df`` in at most as many partitions as the lake path has task slots, by merging
    whole partitions (no shuffle: one Kafka partition's records stay in one task)."""
    session = df.sparkSession
    slots = session.conf.get(LAKE_SLOTS, None) or session.sparkContext.defaultParallelism
    return df.coalesce(int(slots))
