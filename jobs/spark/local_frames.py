"""Small DataFrames of rows the driver holds (the registry, the rules' thresholds).

``spark.createDataFrame`` of Python rows parallelizes them as a Python RDD: its tasks
start a Python worker daemon of their own on every executor, beside the Arrow UDFs'
daemon (their environments differ), with workers of its own: three Python processes and
114 MiB of memory more per executor (docs/benchmarks.md). An Arrow table is read by the
JVM alone.

The frame is a local relation: its rows are in the plan, so there is nothing to cache.
Caching one gains nothing and costs a race: tasks that first use the cached frame at the
same time (the real-time query's, or two queries') each compute its block, and all but
one warn "Block rdd_... already exists on this machine" (run-local's output in CI,
2026-12-02).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from jobs.spark.arrow_schema import arrow_schema


def local_frame(
    spark: SparkSession, rows: Iterable[Sequence[Any]], schema: StructType
) -> DataFrame:
    """``rows`` (tuples in ``schema``'s column order) as a DataFrame, through Arrow."""
    arrow = arrow_schema(schema)
    columns = list(zip(*rows, strict=True)) or [()] * len(arrow)
    table = pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, arrow, strict=True)],
        schema=arrow,
    )
    return spark.createDataFrame(table, schema)
