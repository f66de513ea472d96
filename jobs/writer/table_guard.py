"""The start-up guard (docs/architecture.md#tables): before the job writes anything, each
table of its lake is compared with the job's definition (jobs/writer/tables.py).

- A column the job defines and the table lacks is added (nullable; the rows already
  there read it as null): a lake made by an earlier release takes the columns a later
  one adds. That is the only change made.
- Anything else stops the job with :class:`LakeMismatch`, naming the table, the
  difference and what to do: a column whose type differs, a column the job does not know
  (a later release, or another program, wrote the lake), and any Delta feature the job's
  writer does not implement. The job commits the data files its executors wrote with its
  own log entries (jobs/writer/delta_io.py), so it would silently break a table that uses
  column mapping (files name columns by id), deletion vectors, row tracking, check
  constraints, invariants, generated or identity columns, or the change data feed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable, Schema

from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALL_TABLES
from lake.layout import Lake
from lake.storage import delta_table, is_delta_table

# Table features the job's writer keeps intact: legacy ones every table of protocol
# (1, 2) has, named once a table moves to table features, and types it never writes.
READER_FEATURES = {"timestampNtz", "variantType"}
WRITER_FEATURES = {"appendOnly", "invariants", "timestampNtz", "variantType"}
# What to do about a feature the writer does not implement, where something can be done.
ADVICE = {
    "deletionVectors": "turn them off and purge them (Spark SQL: ALTER TABLE delta.`{path}` "
    "SET TBLPROPERTIES ('delta.enableDeletionVectors' = false); REORG TABLE "
    "delta.`{path}` APPLY (PURGE)), or start on a new lake",
    "checkConstraints": "drop them (Spark SQL: ALTER TABLE delta.`{path}` DROP CONSTRAINT "
    "<name>), or start on a new lake",
    "changeDataFeed": "turn it off (ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
    "('delta.enableChangeDataFeed' = false)), or start on a new lake",
}
NAMES = {
    "columnMapping": "column mapping",
    "deletionVectors": "deletion vectors",
    "rowTracking": "row tracking",
    "checkConstraints": "check constraints",
    "columnInvariants": "column invariants",
    "generatedColumns": "generated columns",
    "identityColumns": "identity columns",
    "changeDataFeed": "the change data feed",
}


class LakeMismatch(RuntimeError):
    """A table of the lake does not match what the job writes; the message says what to do."""


@dataclass(frozen=True)
class Added:
    """Columns added to a table by the guard."""

    table: str
    columns: tuple[str, ...]


def _features(table: DeltaTable) -> set[str]:
    """The features a table uses, by their Delta names, from its protocol, its
    properties and its columns' metadata."""
    protocol, config = table.protocol(), table.metadata().configuration
    used = set(protocol.writer_features or ()) | set(protocol.reader_features or ())
    if protocol.min_reader_version == 2 or config.get("delta.columnMapping.mode", "none") != "none":
        used.add("columnMapping")
    if config.get("delta.enableDeletionVectors") == "true":
        used.add("deletionVectors")
    if config.get("delta.enableRowTracking") == "true":
        used.add("rowTracking")
    if config.get("delta.enableChangeDataFeed") == "true":
        used.add("changeDataFeed")
    if any(key.startswith("delta.constraints.") for key in config):
        used.add("checkConstraints")
    schema = pa.schema(table.schema().to_arrow())
    for field in schema:
        keys = {k.decode() for k in (field.metadata or {})}
        if "delta.invariants" in keys:
            # Declared on a column, to be enforced by every writer (the legacy feature
            # "invariants" alone, which every table of protocol 2 names, is harmless).
            used.add("columnInvariants")
        if "delta.generationExpression" in keys:
            used.add("generatedColumns")
        if any(k.startswith("delta.identity.") for k in keys):
            used.add("identityColumns")
    return used


def _unsupported(table: DeltaTable) -> list[str]:
    protocol = table.protocol()
    if protocol.min_reader_version > 3 or protocol.min_writer_version > 7:
        return [
            f"protocol ({protocol.min_reader_version}, {protocol.min_writer_version}), "
            "newer than Delta's table features"
        ]
    return sorted(_features(table) - READER_FEATURES - WRITER_FEATURES)


def _columns(name: str, table: DeltaTable) -> tuple[list[pa.Field], list[str]]:
    """The job's columns the table lacks, and every other difference, said."""
    have = pa.schema(table.schema().to_arrow())
    want = arrow_schema(ALL_TABLES[name])
    missing, differences = [], []
    for field in want:
        if field.name not in have.names:
            missing.append(field)
        elif not have.field(field.name).type.equals(field.type):
            differences.append(
                f"column {field.name} is {have.field(field.name).type} in the lake, "
                f"{field.type} in this job"
            )
    unknown = [n for n in have.names if n not in want.names]
    if unknown:
        differences.append(
            f"column(s) {', '.join(unknown)} unknown to this job (a later release or "
            "another program wrote this lake)"
        )
    return missing, differences


def guard_tables(lake: Lake, say: Callable[[str], None] | None = None) -> list[Added]:
    """Check every existing table of ``lake`` and add the columns it lacks; returns what
    was added. Tables that do not exist yet are left to jobs.writer.tables.create_tables.

    Raises:
        LakeMismatch: a table differs otherwise; nothing has been changed then.
    """
    problems: list[str] = []
    additions: list[tuple[str, DeltaTable, list[pa.Field]]] = []
    for name in ALL_TABLES:
        path = lake.table(name)
        if not is_delta_table(path):
            continue
        table = delta_table(path)
        for feature in _unsupported(table):
            what = NAMES.get(feature, f"the Delta feature {feature}")
            advice = ADVICE.get(feature, "start on a new lake (--lake)").format(path=path)
            problems.append(
                f"table {name} uses {what}, which this job's writer does not implement: {advice}"
            )
        missing, differences = _columns(name, table)
        problems += [f"table {name}: {d}" for d in differences]
        if missing:
            additions.append((name, table, missing))
    if problems:
        raise LakeMismatch(
            f"the lake {lake.root} does not match this job: " + "; ".join(problems)
            + ". Nothing was written."
        )  # fmt: skip
    added = []
    for name, table, missing in additions:
        table.alter.add_columns(Schema.from_arrow(pa.schema(missing)).fields)
        added.append(Added(name, tuple(f.name for f in missing)))
        if say:
            say(
                f"table {name}: added column(s) {', '.join(f.name for f in missing)} "
                "(null in the rows already there)"
            )
    return added
