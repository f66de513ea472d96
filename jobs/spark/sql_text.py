"""Spark SQL as text: what the job hands the JVM to parse in one call, where the same
expression built of ``Column`` objects costs a Py4J round trip a step."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.types import StructType


def projection(schema: StructType, computed: Mapping[str, str] | None = None) -> list[str]:
    """SQL expressions (for ``DataFrame.selectExpr``) that give ``schema``'s columns, in
    its order and types: each column as it is, or as ``computed`` says in SQL.

    Built per micro-batch, a projection made of ``Column`` objects cost the driver about
    40 Py4J round trips a column (``F.col``, ``cast``, ``alias``); a SQL text is parsed
    in the JVM in one."""
    given = computed or {}
    return [
        f"CAST({given.get(f.name, f'`{f.name}`')} AS {f.dataType.simpleString()}) AS `{f.name}`"
        for f in schema.fields
    ]


def sql_text(value: str) -> str:
    """``value`` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
