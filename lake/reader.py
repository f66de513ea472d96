"""Reading the lake's Delta tables through the ``deltalake`` package (no JVM): the one
reader of the job's driver (its alert ids, incidents, metrics, summary) and of the ops
view and the notifier.

Reads go through deltalake's ``QueryBuilder``: DataFusion SQL over the table's current
snapshot. A reader states the columns and the rows it needs as a :class:`Condition`,
which renders to the SQL ``WHERE``; DataFusion then skips every data file whose Delta
statistics rule the condition out and opens only the others, so a reader of a recent time
range does not pay for the table's whole history (docs/architecture.md#running-for-weeks).

Tables are named by lake/layout.py (the one definition). Their schemas are the job's
(jobs/writer/tables.py), which this module does not import: that would import pyspark and
cost the ops view its fast start (tests/lake/test_layout_names.py checks the names are the
job's tables).
Results are Arrow tables with the table's own types: timestamps are aware UTC instants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder

from conf.lake_location import join
from contract.times import as_utc
from lake.layout import Lake
from lake.storage import delta_table, is_delta_table, is_folder

# The name a table has in the SQL of one query (each query registers one table).
_SQL_NAME = "lake_table"
# Every timestamp column the job writes is a UTC instant to the microsecond
# (jobs.spark.arrow_schema); a literal of exactly that type compares without a cast of
# the column, which would keep DataFusion from pruning files by the column's statistics.
_TIMESTAMP_TYPE = 'Timestamp(Microsecond, Some("UTC"))'

SqlValue = str | int | float | bool | datetime


def identifier(name: str) -> str:
    """A column or table name as a SQL identifier: double-quoted, so it is taken as is
    (DataFusion lower-cases unquoted names) and cannot end the quoting."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: SqlValue) -> str:
    """A Python value as a SQL literal of DataFusion's dialect.

    ``QueryBuilder`` binds no parameters, so every value a query compares with goes
    through here: a string in single quotes with each quote doubled (DataFusion's default
    dialect gives backslashes no meaning), a datetime as a UTC instant to the microsecond
    (naive: taken as UTC, as the job writes), numbers in full.

    Raises:
        ValueError: a float that is not finite (SQL has no literal for it).
        TypeError: any other type.
    """
    if isinstance(value, bool):  # before int: a bool is an int
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"no SQL literal for {value!r}")
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime):
        utc = as_utc(value)
        assert utc is not None
        text = utc.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
        return f"arrow_cast('{text}', '{_TIMESTAMP_TYPE}')"
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


@runtime_checkable
class Condition(Protocol):
    """A row filter, as a SQL boolean expression over one table's columns.

    SQL's rule applies: a row for which the expression is null (a comparison with a null
    value) does not match.
    """

    def sql(self) -> str:
        """The expression, every name and value quoted (:func:`identifier`, :func:`literal`)."""
        ...


@dataclass(frozen=True)
class _Comparison:
    """``column <op> value``; a timestamp compares as a UTC instant."""

    column: str
    value: SqlValue
    OPERATOR: ClassVar[str] = ""

    def sql(self) -> str:
        """``"column" <op> value``."""
        return f"{identifier(self.column)} {self.OPERATOR} {literal(self.value)}"


class AtLeast(_Comparison):
    """``column >= value``."""

    OPERATOR = ">="


class AtMost(_Comparison):
    """``column <= value``."""

    OPERATOR = "<="


class After(_Comparison):
    """``column > value``."""

    OPERATOR = ">"


@dataclass(frozen=True)
class OneOf:
    """``column`` equals one of ``values`` (none: no row)."""

    column: str
    values: tuple[SqlValue, ...]

    def sql(self) -> str:
        """``"column" IN (values)``."""
        if not self.values:
            return "FALSE"
        return f"{identifier(self.column)} IN ({', '.join(literal(v) for v in self.values)})"


@dataclass(frozen=True)
class AllOf:
    """Every condition holds (no condition: every row)."""

    conditions: Sequence[Condition]

    def sql(self) -> str:
        """The conditions joined by AND."""
        return " AND ".join(f"({c.sql()})" for c in self.conditions) or "TRUE"


@dataclass(frozen=True)
class AnyOf:
    """At least one condition holds (no condition: no row)."""

    conditions: Sequence[Condition]

    def sql(self) -> str:
        """The conditions joined by OR."""
        return " OR ".join(f"({c.sql()})" for c in self.conditions) or "FALSE"


class LakeReader(Lake):
    """The lake (lake/layout.py: a table is a folder ``<lake>/<name>``), read only."""

    def exists(self) -> bool:
        """True when the lake exists (the job creates it on its first start)."""
        return is_folder(self.root)

    def has_table(self, name: str) -> bool:
        """True when the table exists as a Delta table (has a commit)."""
        path = self.table(name)
        return is_folder(join(path, "_delta_log")) and is_delta_table(path)

    def open(self, name: str) -> DeltaTable | None:
        """The table at its newest version, or None when it does not exist yet.

        Each call opens the table afresh: the job commits all the time, and a reader
        must see the newest version without keeping state between calls. Several reads
        of one opened table see the same version.
        """
        return delta_table(self.table(name)) if self.has_table(name) else None

    def read(
        self, name: str, columns: list[str] | None = None, where: Condition | None = None
    ) -> pa.Table | None:
        """Rows of a table (newest version) matching ``where``; None when it does not exist."""
        table = self.open(name)
        return None if table is None else read_table(table, columns, where)


def _execute(table: DeltaTable, sql: str) -> pa.Table:
    """Run a query over ``table`` (named ``_SQL_NAME`` in ``sql``), read to the end.

    The result comes as an Arrow C stream: read with pyarrow's own stream reader, which
    (unlike ``pa.table`` on a foreign object) does not import pandas, a third of a second
    of the command line's start-up. Never ``DeltaTable.to_pyarrow_dataset``: its Arrow
    threads can outlive the interpreter, which then aborts at exit (delta-rs issue 2184).
    """
    stream = QueryBuilder().register(_SQL_NAME, table).execute(sql)
    return pa.RecordBatchReader.from_stream(stream).read_all()


def _where(where: Condition | None) -> str:
    return "" if where is None else f" WHERE {where.sql()}"


def read_table(
    table: DeltaTable, columns: list[str] | None = None, where: Condition | None = None
) -> pa.Table:
    """The ``columns`` (default: all) of the rows of an opened table matching ``where``,
    in no particular order, with the table's own column types.

    Only the files that may hold a matching row are opened (DataFusion prunes by the
    Delta log's statistics), and of them only the columns asked for and those the
    condition uses.
    """
    schema = pa.schema(table.schema().to_arrow())
    wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    select = ", ".join(identifier(c) for c in wanted.names)
    data = _execute(table, f"SELECT {select} FROM {_SQL_NAME}{_where(where)}")
    # DataFusion answers strings as string_view, and types may differ for other
    # writers' tables: callers get the table's schema, as the job declared it.
    return data.cast(wanted)


def read_path(
    path: str | Path, columns: list[str] | None = None, where: Condition | None = None
) -> pa.Table:
    """:func:`read_table` of the table at ``path`` at its newest version."""
    return read_table(delta_table(path), columns, where)


def count_by(table: DeltaTable, column: str, where: Condition | None = None) -> dict[Any, int]:
    """How many rows matching ``where`` have each value of ``column`` (SQL GROUP BY)."""
    return {key[0]: n for key, n in group_counts(table, [column], where).items()}


def group_counts(
    table: DeltaTable, columns: Sequence[str], where: Condition | None = None
) -> dict[tuple[Any, ...], int]:
    """How many rows matching ``where`` have each combination of ``columns``."""
    names = ", ".join(identifier(c) for c in columns)
    sql = f"SELECT {names}, count(*) AS n FROM {_SQL_NAME}{_where(where)} GROUP BY {names}"
    data = _execute(table, sql)
    keys = zip(*(data.column(i).to_pylist() for i in range(len(columns))), strict=True)
    return dict(zip(keys, data.column("n").to_pylist(), strict=True))


def maximum(table: DeltaTable, column: str, where: Condition | None = None) -> Any:
    """The largest value of ``column`` among the rows matching ``where`` (SQL max); None
    when no row has one. Reads that column of every file the condition does not rule
    out: give a condition that bounds it."""
    data = _execute(table, f"SELECT max({identifier(column)}) AS v FROM {_SQL_NAME}{_where(where)}")
    return data.column("v")[0].as_py()


def newest(table: DeltaTable, column: str) -> datetime | None:
    """The newest value of a timestamp column, as an aware UTC datetime, to the
    millisecond: the largest of the per-file maxima in the Delta log, so no data file
    is opened; None when the column holds no value.

    Delta keeps timestamp statistics truncated to the millisecond: the true newest value
    lies less than a millisecond after the one returned, never before it. A range that
    starts a span before it holds at least that span of the table's newest data. When
    some file that holds values has no statistics for the column (a writer that wrote
    none), the value is asked of SQL instead, which reads the column of every file.
    """
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    if actions.num_rows == 0:
        return None
    high, nulls = f"max.{column}", f"null_count.{column}"
    if {high, nulls} <= set(actions.column_names):
        # A file without a maximum holds no value of the column only if its null count
        # is its row count (every row null); otherwise its statistics are missing.
        all_null = pc.fill_null(
            pc.equal(actions.column(nulls), actions.column("num_records")), False
        )
        unknown = pc.and_(pc.is_null(actions.column(high)), pc.invert(all_null))
        if not pc.any(unknown).as_py():
            return as_utc(pc.max(actions.column(high)).as_py())
    return as_utc(maximum(table, column))
