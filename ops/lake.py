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
import pyarrow.dataset as ds
from deltalake import DeltaTable

ALERTS = "alerts"
SENSOR_STATS_1M = "sensor_stats_1m"
PIPELINE_METRICS = "pipeline_metrics"

# A filter built against the table's Arrow schema (timestamps need the column's exact type).
Where = Callable[[pa.Schema], pc.Expression | None]


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
    """Rows of an opened table matching ``where``."""
    dataset = _dataset(table)
    expression = where(dataset.schema) if where else None
    return dataset.to_table(columns=columns, filter=expression)


def _dataset(table: DeltaTable) -> ds.Dataset:
    """The table's current files as a plain Arrow dataset.

    deltalake's own ``to_pyarrow_dataset`` reads through a Python file system object
    whose Arrow threads can outlive the interpreter: the process then aborts at exit
    ("terminate called without an active exception", delta-rs issue 2184). The lake is
    a local folder and the job writes plain Parquet (reader protocol 1: no deletion
    vectors, no column mapping), so Arrow's own local reader sees exactly the same rows.
    """
    protocol = table.protocol()
    if protocol.min_reader_version > 1 or protocol.reader_features:
        return table.to_pyarrow_dataset()  # features the plain reader would get wrong
    schema = pa.schema(table.schema().to_arrow())
    return ds.dataset(table.file_uris(), schema=schema, format="parquet")


def timestamp_at_least(column: str, when: datetime) -> Where:
    """A filter ``column >= when`` for a timestamp column with or without a time zone."""

    def build(schema: pa.Schema) -> pc.Expression:
        kind = schema.field(column).type
        utc = when.astimezone(UTC)
        value = utc if getattr(kind, "tz", None) else utc.replace(tzinfo=None)
        return pc.field(column) >= pa.scalar(value, type=kind)

    return build


def as_utc(value: datetime | None) -> datetime | None:
    """A timestamp from the lake as an aware UTC datetime (the job writes UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, to the millisecond: ``2026-01-01T00:15:00.000Z``."""
    utc = as_utc(value)
    return None if utc is None else utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
