"""The driver's small tables (registry, rule thresholds) as local DataFrames, through Arrow."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from conf.paths import RULES_FILE
from contract.rules.parsing import read_rules
from jobs.alerting.alert_columns import thresholds_frame
from jobs.alerting.reading_rules import compile_rules
from jobs.alerting.window_rules import RuleFrames
from jobs.queries.registry_cache import RegistryCache
from jobs.spark.local_frames import local_frame

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


def test_the_job_s_small_frames_are_local_relations_never_cached(spark, tmp_path) -> None:
    """The rows live in the plan: no cache, so no block that concurrent tasks race to put."""
    path = tmp_path / "fleet.jsonl"
    path.write_text('{"sensor_id": "s-1", "site": "lab", "max_temp_c": 40.0}\n'
                    '{"sensor_id": "s-2"}\n')  # fmt: skip
    registry = RegistryCache(spark, path, check_every=1)
    rules = read_rules(RULES_FILE)
    frames = RuleFrames.of(spark, rules, registry.sensors())
    compiled = compile_rules(rules.of_kind("reading"), registry.sensors())

    for frame in (registry.current(), frames.rules, frames.thresholds,
                  thresholds_frame(spark, compiled)):  # fmt: skip
        assert not frame.is_cached
        assert frame._jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation"
        assert "InMemory" not in lineage(frame)
