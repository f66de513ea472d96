"""Read-only access to the lake's Delta tables through the ``deltalake`` package (no JVM).

The table schemas are defined once, in ``jobs/tables.py``; this module only knows the
table names, because importing ``jobs`` would import pyspark and cost the ops view its
fast start (a test checks the names against ``jobs.tables.TABLES``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

ALERTS = "alerts"
SENSOR_STATS_1M = "sensor_stats_1m"
PIPELINE_METRICS = "pipeline_metrics"

# A filter: a boolean mask over the rows of a table read from the lake.
Where = Callable[[pa.Table], pa.ChunkedArray | pa.Array]


@dataclass(frozen=True)
class LakeReader:
    """The lake folder, read only: a table is a folder ``<lake>/<name>``."""

    root: Path

    def exists(self) -> bool:
        """True when the lake folder exists (the job creates it on its first start)."""
        return self.root.is_dir()

    def table_path(self, name: str) -> Path:
        """Folder of a table."""
        return self.root / name

    def has_table(self, name: str) -> bool:
        """True when the table exists as a Delta table (has a commit)."""
        path = self.table_path(name)
        return (path / "_delta_log").is_dir() and DeltaTable.is_deltatable(str(path))

    def open(self, name: str) -> DeltaTable | None:
        """The table at its newest version, or None when it does not exist yet."""
        return DeltaTable(str(self.table_path(name))) if self.has_table(name) else None

    def read(
        self, name: str, columns: list[str] | None = None, where: Where | None = None
    ) -> pa.Table | None:
        """Rows of a table (newest version) matching ``where``; None when it does not exist.

        Each call opens the table afresh: the job commits all the time, and a reader
        must see the newest version without keeping state between calls.
        """
        table = self.open(name)
        return None if table is None else read_table(table, columns, where)


def read_table(
    table: DeltaTable, columns: list[str] | None = None, where: Where | None = None
) -> pa.Table:
    """Rows of an opened table matching ``where`` (which may use only ``columns``), with
    the table's own column types.

    Reads the table's current Parquet files with Arrow's plain Parquet reader. Why not
    deltalake's ``to_pyarrow_dataset``: it reads through a Python file system object whose
    Arrow threads can outlive the interpreter, and the process then aborts at exit
    ("terminate called without an active exception", delta-rs issue 2184); and importing
    Arrow's dataset module imports pandas, a third of a second of start-up. The job writes
    plain unpartitioned Parquet (reader protocol 1: no deletion vectors, no column
    mapping), so the plain reader sees exactly the same rows; other tables fall back.
    """
    schema = pa.schema(table.schema().to_arrow())
    wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    protocol = table.protocol()
    if protocol.min_reader_version > 1 or protocol.reader_features or _partitioned(table):
        data = table.to_pyarrow_dataset().to_table(columns=wanted.names)
    else:
        parts = [
            pq.ParquetFile(uri).read(columns=wanted.names).cast(wanted) for uri in table.file_uris()
        ]
        data = pa.concat_tables(parts) if parts else wanted.empty_table()
    return data.filter(where(data)) if where else data


def _partitioned(table: DeltaTable) -> bool:
    return bool(table.metadata().partition_columns)


def timestamp_at_least(column: str, when: datetime) -> Where:
    """A filter ``column >= when`` for a timestamp column with or without a time zone."""

    def mask(data: pa.Table) -> pa.ChunkedArray:
        kind = data.schema.field(column).type
        utc = when.astimezone(UTC)
        value = utc if getattr(kind, "tz", None) else utc.replace(tzinfo=None)
        return pc.greater_equal(data.column(column), pa.scalar(value, type=kind))

    return mask


def as_utc(value: datetime | None) -> datetime | None:
    """A timestamp from the lake as an aware UTC datetime (the job writes UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, to the millisecond: ``2026-01-01T00:15:00.000Z``."""
    utc = as_utc(value)
    return None if utc is None else utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
