"""Data files written on the executors and committed by the driver (jobs/writer/data_files.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from pyspark.sql import functions as F

from conf.paths import PROJECT_ROOT
from jobs.alerting.reading_rules import RULE_BUCKET, CompiledRule, merge_buckets
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.data_files import MAX_STAT_STRING, DataFileWriter, FileStats, write_data_files
from jobs.writer.delta_io import BatchWriter, table_schema
from jobs.writer.tables import READINGS_SCHEMA, create_tables
from lake.layout import Lake
from tests.support.query_checkpoint import lake_with_checkpoint, log_offsets

T0 = datetime(2026, 11, 21, 10, 15, 30, 123456, tzinfo=UTC)


def reading(offset: int, at: datetime, sensor: str = "sensor-0001") -> dict:
    return {
        "event_id": f"e-{offset}", "sensor_id": sensor, "event_time": at,
        "temperature_c": 20.0 + offset, "humidity_pct": 50.0, "battery_pct": 90.0,
        "seq": offset, "kafka_partition": 0, "kafka_offset": offset, "kafka_timestamp": at,
        "ingested_at": at,
    }  # fmt: skip


def footer_stats(*batches: pa.RecordBatch, statistics: bool = True) -> dict:
    """The Delta statistics of a Parquet file of ``batches`` (a row group each), from the
    footer its writer wrote, as jobs/writer/data_files.py makes them."""
    sink = pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, batches[0].schema, write_statistics=statistics)
    for batch in batches:
        writer.write_table(pa.Table.from_batches([batch]))
    writer.close()
    return json.loads(FileStats.of_file(writer.writer.metadata).to_json())


def test_statistics_never_claim_less_than_the_file_holds() -> None:
    schema = pa.schema(
        [("at", pa.timestamp("us", tz="UTC")), ("text", pa.string()), ("value", pa.float64())]
    )
    late = T0 + timedelta(seconds=1, microseconds=875_000)  # .998456: rounds up to .999

    found = footer_stats(
        pa.record_batch([[T0, None], ["b", None], [1.5, None]], schema=schema),
        pa.record_batch([[late], ["x" * (MAX_STAT_STRING + 1)], [-2.0]], schema=schema),
    )

    assert found["numRecords"] == 3
    assert found["nullCount"] == {"at": 1, "text": 1, "value": 1}
    # Milliseconds, rounded outwards: down for the minimum, up for the maximum.
    assert found["minValues"]["at"] == "2026-11-21T10:15:30.123Z"
    assert found["maxValues"]["at"] == "2026-11-21T10:15:31.999Z"
    assert (found["minValues"]["value"], found["maxValues"]["value"]) == (-2.0, 1.5)
    # A long string would have to be cut: no min/max for that column at all.
    assert "text" not in found["minValues"] and "text" not in found["maxValues"]


def test_text_that_is_no_utf_8_leaves_its_column_without_bounds() -> None:
    schema = pa.schema([("raw", pa.string()), ("error", pa.string())])
    raw = pa.array([b"\xff\xfe{", b"{}"], pa.binary()).cast(pa.string(), safe=False)
    found = footer_stats(
        pa.record_batch([raw, pa.array(["invalid_json", "missing_field"])], schema=schema)
    )
    assert "raw" not in found["minValues"]
    assert (found["minValues"]["error"], found["maxValues"]["error"]) == (
        "invalid_json",
        "missing_field",
    )


def test_a_footer_without_statistics_claims_no_bounds_and_no_null_count() -> None:
    schema = pa.schema([("value", pa.float64())])

    found = footer_stats(pa.record_batch([[1.0, None]], schema=schema), statistics=False)

    assert found == {"numRecords": 2, "minValues": {}, "maxValues": {}, "nullCount": {}}


def test_a_timestamp_on_the_millisecond_is_its_own_bound() -> None:
    schema = pa.schema([("at", pa.timestamp("us", tz="UTC"))])
    exact = T0.replace(microsecond=123_000)
    found = footer_stats(pa.record_batch([[exact]], schema=schema))
    assert found["minValues"]["at"] == found["maxValues"]["at"] == "2026-11-21T10:15:30.123Z"


def test_executors_write_one_file_per_task_and_the_driver_commits_them(spark, tmp_path) -> None:
    lake = lake_with_checkpoint(tmp_path, "q", "ckpt-1")
    create_tables(lake)
    log_offsets(lake, "q", 0)
    path = lake.table("readings")
    rows = [reading(n, T0 + timedelta(minutes=n)) for n in range(30)]
    df = spark.createDataFrame(rows, READINGS_SCHEMA).repartition(3, "kafka_offset")
    schema = table_schema(DeltaTable(path))

    files = write_data_files(df, path, schema, 0).toArrow().to_pylist()

    # Three partitions, merged into one task per core (at most), one file per task.
    tasks = min(3, spark.sparkContext.defaultParallelism)
    assert len(files) == tasks and {f["table"] for f in files} == {path}
    assert sum(f["num_records"] for f in files) == 30
    for f in files:  # each description is what the file holds
        meta = pq.read_metadata(Path(path) / f["path"])
        assert meta.num_rows == f["num_records"] == json.loads(f["stats"])["numRecords"]
        assert (Path(path) / f["path"]).stat().st_size == f["size"]
    assert BatchWriter(spark, lake, "q").commit_files(files, path, 0)
    table = DeltaTable(path)
    assert table.version() == 1  # one commit for all the files
    assert sorted(r["kafka_offset"] for r in table.to_pyarrow_table().to_pylist()) == list(
        range(30)
    )
    # Spark's Delta reader skips files by those statistics: a range gives the right rows.
    since = T0 + timedelta(minutes=12, microseconds=1)
    found = spark.read.format("delta").load(path).filter(F.col("event_time") >= F.lit(since))
    assert sorted(r.kafka_offset for r in found.collect()) == list(range(13, 30))


def test_an_empty_dataframe_writes_and_commits_nothing(spark, tmp_path) -> None:
    lake = lake_with_checkpoint(tmp_path, "q", "ckpt-1")
    create_tables(lake)
    log_offsets(lake, "q", 0)
    path = lake.table("readings")
    empty = spark.createDataFrame([], READINGS_SCHEMA)

    assert BatchWriter(spark, lake, "q").append(empty, path, 0)

    assert DeltaTable(path).version() == 0
    assert not list(Path(path).glob("*.parquet"))


def test_breached_buckets_of_several_tasks_merge_into_one_per_rule_sensor_and_minute() -> None:
    """Counts add up; the worst value is the highest for an upward rule, the lowest for a
    downward one."""
    minute = T0.replace(second=0, microsecond=0)
    rules = (
        CompiledRule("hot", "temperature_c", ">=", "critical", (), (), 45.0),
        CompiledRule("flat", "battery_pct", "<=", "warning", (), (), 15.0),
    )
    rows = [("hot", "a", 47.0, 2, 45.0), ("hot", "a", 51.5, 1, 45.0), ("hot", "b", 46.0, 1, 40.0),
            ("flat", "a", 12.0, 1, 15.0), ("flat", "a", 9.5, 2, 15.0)]  # fmt: skip
    buckets = pa.Table.from_pylist(
        [{"rule": r, "sensor_id": s, "window_start": minute, "observed_value": v,
          "readings": n, "threshold": t} for r, s, v, n, t in rows],
        RULE_BUCKET,
    )  # fmt: skip
    merged = merge_buckets(buckets, rules).to_pylist()
    assert sorted(
        (r["rule"], r["sensor_id"], r["observed_value"], r["readings"]) for r in merged
    ) == [
        ("flat", "a", 9.5, 3),
        ("hot", "a", 51.5, 3),
        ("hot", "b", 46.0, 1),
    ]


# A task attempt that wrote its file and then failed (here: the operator after the
# writer, on the first attempt of partition 0) is retried; the driver gets the file list
# of the successful attempts only.
FAILED_ATTEMPT = """
import json, sys
import pyarrow as pa
from pyspark import TaskContext
from deltalake import DeltaTable
from jobs.writer.data_files import DATA_FILE, write_data_files
from jobs.writer.delta_io import BatchWriter, table_schema
from jobs.spark.spark_session import build_spark_session
from jobs.writer.tables import READINGS_SCHEMA
from tests.support.query_checkpoint import lake_with_checkpoint, log_offsets
from jobs.writer.tables import create_tables
from tests.jobs.writer.test_data_files import T0, reading

def fail_first_attempt(batches):
    task = TaskContext.get()
    for batch in batches:
        if task.partitionId() == 0 and task.attemptNumber() == 0:
            raise RuntimeError("injected failure after the file was written")
        yield batch

spark = build_spark_session("failed-attempt", master="local[2,2]")
lake = lake_with_checkpoint(__import__("pathlib").Path(sys.argv[1]), "q", "ckpt-1")
create_tables(lake)
log_offsets(lake, "q", 0)
path = lake.table("readings")
df = spark.createDataFrame([reading(n, T0) for n in range(10)], READINGS_SCHEMA).repartition(2)
files = write_data_files(df, path, table_schema(DeltaTable(path)), 0)
described = files.mapInArrow(fail_first_attempt, DATA_FILE).toArrow().to_pylist()
BatchWriter(spark, lake, "q").commit_files(described, path, 0)
print(json.dumps([f["path"] for f in described]))
"""


@pytest.mark.jvm  # a Spark session of its own, in a subprocess
def test_a_failed_attempt_s_file_is_never_committed_and_vacuum_removes_it(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FAILED_ATTEMPT, str(tmp_path)],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    committed = set(json.loads(done.stdout.strip().splitlines()[-1]))
    path = Lake(tmp_path).table("readings")
    table = DeltaTable(path)
    live = {uri.rsplit("/", 1)[-1] for uri in table.file_uris()}
    on_disk = {p.name for p in Path(path).glob("*.parquet")}

    assert live == committed and len(live) == 2
    assert len(on_disk - live) == 1  # the failed attempt's file, never in the log
    assert sorted(r["kafka_offset"] for r in table.to_pyarrow_table().to_pylist()) == list(
        range(10)
    )
    # Table maintenance's VACUUM (full: files the log never listed too) removes it.
    table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True)
    assert {p.name for p in Path(path).glob("*.parquet")} == live


def test_the_file_schema_is_the_table_s(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    assert table_schema(DeltaTable(lake.table("readings"))) == arrow_schema(READINGS_SCHEMA)


def test_a_file_is_stored_whole_at_close_and_a_failed_task_leaves_nothing(tmp_path) -> None:
    """Made in memory, stored in one piece: a task that fails after some rows leaves no
    (partial) file; on object storage one PUT makes the object appear whole."""
    lake = Lake(tmp_path)
    create_tables(lake)
    folder = Path(lake.table("readings"))
    schema = arrow_schema(READINGS_SCHEMA)
    rows = pa.Table.from_pylist([reading(o, T0) for o in range(5)], schema)

    failed = DataFileWriter(lake.table("readings"), schema, batch_id=1)
    failed.write(rows)  # ... and then the task dies
    done = DataFileWriter(lake.table("readings"), schema, batch_id=1)
    done.write(rows)
    assert list(folder.glob("*.parquet")) == []
    described = done.close()

    assert described is not None
    [stored] = folder.glob("*.parquet")
    assert stored.name == described["path"] and stored.stat().st_size == described["size"]
    assert pq.read_table(stored).num_rows == 5 == json.loads(described["stats"])["numRecords"]
