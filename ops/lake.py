"""Read-only access to the lake's Delta tables through the ``deltalake`` package (no JVM).

The table schemas are defined once, in ``jobs/tables.py``; this module only knows the
table names, because importing ``jobs`` would import pyspark and cost the ops view its
fast start (a test checks the names against ``jobs.tables.TABLES``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

ALERTS = "alerts"
INCIDENTS = "incidents"
SENSOR_STATS_1M = "sensor_stats_1m"
PIPELINE_METRICS = "pipeline_metrics"

Mask = pa.ChunkedArray | pa.Array


@runtime_checkable
class Condition(Protocol):
    """A row filter that also knows which files cannot hold a matching row.

    ``mask`` is the filter itself, a boolean mask over rows read from the lake.
    ``may_match`` looks at Delta's per-file statistics (one row per data file, columns
    ``min.<column>`` and ``max.<column>``) and is False only for a file none of whose rows
    can match: the reader skips that file without opening it, so a reader of a recent
    time range does not pay for the table's whole history (SPEC section 9).
    """

    def mask(self, data: pa.Table) -> Mask:
        """True for the rows that match (null counts as no match)."""
        ...

    def may_match(self, stats: pa.Table) -> Mask:
        """Per file: False when no row of it can match; True (or null) when unsure."""
        ...


# A filter: a Condition, or a plain boolean mask over the rows (no file skipping).
Where = Condition | Callable[[pa.Table], Mask]


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
        uris = data_files(table, where if isinstance(where, Condition) else None)
        parts = [pq.ParquetFile(uri).read(columns=wanted.names).cast(wanted) for uri in uris]
        data = pa.concat_tables(parts) if parts else wanted.empty_table()
    if where is None:
        return data
    return data.filter(where.mask(data) if isinstance(where, Condition) else where(data))


def _partitioned(table: DeltaTable) -> bool:
    return bool(table.metadata().partition_columns)


def data_files(table: DeltaTable, where: Condition | None = None) -> list[str]:
    """The table's current data files, without those whose statistics rule ``where`` out.

    Every file is kept when the log has no statistics for a column the condition needs,
    or when a file's path in the log cannot be matched to its URI.
    """
    uris = table.file_uris()
    if where is None or not uris:
        return uris
    stats = pa.table(table.get_add_actions(flatten=True))
    by_name = {uri.rsplit("/", 1)[-1]: uri for uri in uris}
    paths = stats.column("path").to_pylist()
    if len(by_name) != len(uris) or {p.rsplit("/", 1)[-1] for p in paths} != set(by_name):
        return uris
    keep = pc.fill_null(where.may_match(stats), True).to_pylist()
    return [by_name[p.rsplit("/", 1)[-1]] for p, k in zip(paths, keep, strict=True) if k]


def _unsure(stats: pa.Table) -> pa.Array:
    return pa.nulls(stats.num_rows, pa.bool_())


def _scalar(value: object, kind: pa.DataType) -> pa.Scalar:
    """``value`` as a scalar of a column's type; an aware datetime fits a naive column
    as its UTC wall time."""
    if isinstance(value, datetime) and pa.types.is_timestamp(kind):
        utc = value.astimezone(UTC)
        value = utc if kind.tz else utc.replace(tzinfo=None)
    return pa.scalar(value, type=kind)


_STATS_PRECISION = timedelta(milliseconds=1)
# Delta writers may truncate string statistics of long values: only short ones are trusted.
_TRUSTED_STRING_STATS = 32


def _stat(stats: pa.Table, bound: str, column: str) -> pa.ChunkedArray | None:
    name = f"{bound}.{column}"
    if name not in stats.column_names:
        return None
    values = stats.column(name)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        long = pc.greater_equal(pc.utf8_length(values), _TRUSTED_STRING_STATS)
        values = pc.if_else(long, pa.scalar(None, values.type), values)
    return values


@dataclass(frozen=True)
class AtLeast:
    """``column >= value`` (a timestamp: aware datetimes compare as UTC instants)."""

    column: str
    value: object

    def mask(self, data: pa.Table) -> Mask:
        column = data.column(self.column)
        return pc.greater_equal(column, _scalar(self.value, column.type))

    def may_match(self, stats: pa.Table) -> Mask:
        high = _stat(stats, "max", self.column)
        if high is None:
            return _unsure(stats)
        value = self.value
        if isinstance(value, datetime):
            # Delta keeps timestamp statistics to the millisecond, truncated: a file's
            # max may lie up to a millisecond below its newest value.
            value -= _STATS_PRECISION
        return pc.greater_equal(high, _scalar(value, high.type))


@dataclass(frozen=True)
class OneOf:
    """``column`` equals one of ``values`` (strings)."""

    column: str
    values: tuple[str, ...]

    def mask(self, data: pa.Table) -> Mask:
        chosen = pa.array(self.values, data.schema.field(self.column).type)
        return pc.is_in(data.column(self.column), value_set=chosen)

    def may_match(self, stats: pa.Table) -> Mask:
        low, high = _stat(stats, "min", self.column), _stat(stats, "max", self.column)
        if low is None or high is None:
            return _unsure(stats)
        fits = [
            pc.and_kleene(
                pc.less_equal(low, _scalar(v, low.type)),
                pc.greater_equal(high, _scalar(v, high.type)),
            )
            for v in self.values
        ]
        return _any(fits, stats.num_rows)


@dataclass(frozen=True)
class AllOf:
    """Every condition holds (no condition: every row)."""

    conditions: Sequence[Condition]

    def mask(self, data: pa.Table) -> Mask:
        return _all([c.mask(data) for c in self.conditions], data.num_rows)

    def may_match(self, stats: pa.Table) -> Mask:
        return _all([c.may_match(stats) for c in self.conditions], stats.num_rows)


@dataclass(frozen=True)
class AnyOf:
    """At least one condition holds."""

    conditions: Sequence[Condition]

    def mask(self, data: pa.Table) -> Mask:
        return _any([pc.fill_null(c.mask(data), False) for c in self.conditions], data.num_rows)

    def may_match(self, stats: pa.Table) -> Mask:
        return _any([c.may_match(stats) for c in self.conditions], stats.num_rows)


def _all(masks: list[Mask], rows: int) -> Mask:
    # Typed from the start: a mask made from an empty Python list is null-typed, and
    # Arrow has no 'and' for (null, bool) (issue 14: --since on an empty alerts table).
    result: Mask = pa.array([True] * rows, pa.bool_()) if not masks else masks[0]
    for mask in masks[1:]:
        result = pc.and_kleene(result, mask)
    return result


def _any(masks: list[Mask], rows: int) -> Mask:
    result: Mask = pa.array([False] * rows, pa.bool_()) if not masks else masks[0]
    for mask in masks[1:]:
        result = pc.or_kleene(result, mask)
    return result


def as_utc(value: datetime | None) -> datetime | None:
    """A timestamp from the lake as an aware UTC datetime (the job writes UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, to the millisecond: ``2026-01-01T00:15:00.000Z``."""
    utc = as_utc(value)
    return None if utc is None else utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
