"""The driver's small tables (registry, rule thresholds) as DataFrames, through Arrow."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from jobs.local_frames import local_frame

SCHEMA = StructType(
    [
        StructField("name", StringType()),
        StructField("count", LongType()),
        StructField("threshold", DoubleType()),
    ]
)


def lineage(frame: DataFrame) -> str:
    """The Spark RDDs behind ``frame``'s plan, as Spark describes them."""
    return frame._jdf.queryExecution().toRdd().toDebugString()


def test_rows_arrive_as_given_nulls_and_all(spark) -> None:
    rows = [("a", 1, 45.0), ("b", None, None), ("c's", 3, -0.5)]

    frame = local_frame(spark, rows, SCHEMA)

    assert frame.schema == SCHEMA
    assert sorted(tuple(r) for r in frame.collect()) == sorted(rows, key=lambda r: r[0])


def test_no_rows_is_an_empty_frame_of_the_schema(spark) -> None:
    frame = local_frame(spark, [], SCHEMA)

    assert frame.schema == SCHEMA and frame.count() == 0


def test_no_python_worker_makes_it(spark) -> None:
    """Python rows given to createDataFrame become a Python RDD, whose tasks start a Python
    worker daemon of their own on each executor; an Arrow table is read by the JVM."""
    rows = [("a", 1, 45.0)]

    assert "PythonRDD" in lineage(spark.createDataFrame(rows, SCHEMA))  # what it avoids
    assert "PythonRDD" not in lineage(local_frame(spark, rows, SCHEMA))
