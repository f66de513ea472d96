"""BatchWriter: each (table, batch) at most once, across runs, on real Delta tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import Row

from conf.paths import PROJECT_ROOT
from jobs.writer import delta_io
from jobs.writer.delta_io import BatchWriter, write_under
from lake.layout import Lake
from lake.lease import LakeLease, LeaseLost
from tests.support.query_checkpoint import lake_with_checkpoint, log_offsets

QUERY = "q"


def new_lake(root: Path, checkpoint_id: str = "ckpt-1") -> Lake:
    return lake_with_checkpoint(root, QUERY, checkpoint_id)


def new_table(lake: Lake) -> str:
    """A table ``t`` of the lake, created empty as the job creates its tables at start."""
    path = lake.table("t")
    DeltaTable.create(path, schema=pa.schema([("batch", pa.int32()), ("i", pa.int32())]))
    return path


def start_batch(lake: Lake, batch_id: int) -> None:
    log_offsets(lake, QUERY, batch_id)


def rows(spark, batch_id: int):
    return spark.createDataFrame([(batch_id, i) for i in range(3)], "batch INT, i INT")


def count(spark, path: str) -> int:
    return spark.read.format("delta").load(path).count()


def test_a_replayed_first_batch_is_written_once(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    path = new_table(lake)
    run1 = BatchWriter(spark, lake, QUERY)
    for batch in range(3):
        start_batch(lake, batch)
        assert run1.append(rows(spark, batch), path, batch)
    # The job died after batch 2's commit, before Spark recorded it: the next run replays 2.
    run2 = BatchWriter(spark, lake, QUERY)
    assert not run2.append(rows(spark, 2), path, 2)
    assert count(spark, path) == 9
    start_batch(lake, 3)
    assert run2.append(rows(spark, 3), path, 3)
    assert count(spark, path) == 12
    assert DeltaTable(path).transaction_version(run2.app_id) == 3


def test_a_first_batch_not_yet_written_is_written(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    path = new_table(lake)
    run1 = BatchWriter(spark, lake, QUERY)
    start_batch(lake, 0)
    run1.append(rows(spark, 0), path, 0)
    # Died before batch 1's commit: the replay of 1 must write.
    start_batch(lake, 1)
    assert BatchWriter(spark, lake, QUERY).append(rows(spark, 1), path, 1)
    assert count(spark, path) == 6


def test_the_replay_is_found_behind_other_writers_commits(spark, tmp_path) -> None:
    """Another query's commits after ours (alerts has two writers) do not hide ours."""
    lake = new_lake(tmp_path)
    other = new_lake(tmp_path / "other", checkpoint_id="ckpt-2")
    path = new_table(lake)
    start_batch(lake, 7)
    BatchWriter(spark, lake, QUERY).append(rows(spark, 7), path, 7)
    busy = BatchWriter(spark, other, QUERY)
    for batch in range(20):  # more than one page of history
        start_batch(other, batch)
        busy.append(rows(spark, batch), path, batch)
    assert not BatchWriter(spark, lake, QUERY).append(rows(spark, 7), path, 7)
    assert count(spark, path) == 3 + 60


def test_a_batch_spark_wrote_with_txn_app_id_is_not_written_again(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    path = lake.table("t")
    app_id = BatchWriter(spark, lake, QUERY).app_id
    old = rows(spark, 4).write.format("delta").mode("append")
    old.option("txnAppId", app_id).option("txnVersion", 4).save(path)
    start_batch(lake, 4)
    BatchWriter(spark, lake, QUERY).append(rows(spark, 4), path, 4)
    # Delta's own check skipped the data: the table still holds the old batch once.
    assert count(spark, path) == 3


def test_a_new_checkpoint_is_a_new_writer(spark, tmp_path) -> None:
    lake = new_lake(tmp_path)
    path = new_table(lake)
    start_batch(lake, 0)
    BatchWriter(spark, lake, QUERY).append(rows(spark, 0), path, 0)
    fresh = new_lake(tmp_path, checkpoint_id="ckpt-new")
    start_batch(fresh, 0)
    assert BatchWriter(spark, fresh, QUERY).append(rows(spark, 0), path, 0)
    assert count(spark, path) == 6


READ_THEN_EXIT = """
import sys
import pyarrow as pa
from deltalake import write_deltalake
from lake.reader import After, read_path
write_deltalake(sys.argv[1], pa.table({"a": [1, 2, 3]}), mode="overwrite")
assert read_path(sys.argv[1], where=After("a", 1)).num_rows == 2
"""


def test_a_process_that_read_a_table_exits_cleanly(tmp_path) -> None:
    """deltalake's to_pyarrow_dataset left Arrow threads that aborted the interpreter at
    exit (status 134) in most runs; the job's reads must not, or a clean stop fails."""
    for attempt in range(5):
        done = subprocess.run(
            [sys.executable, "-c", READ_THEN_EXIT, str(tmp_path / f"t{attempt}")],
            capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (attempt, done.returncode, done.stderr[-500:])


def driver_rows(batch_id: int) -> list[Row]:
    return [Row(batch=batch_id, i=i) for i in range(3)]


def batches(path: str) -> list[int]:
    return sorted(DeltaTable(path).to_pyarrow_table()["batch"].to_pylist())


def test_every_commit_is_checked_not_only_a_run_s_first(tmp_path) -> None:
    """Two writers of one query's batches (two jobs on one lake): whichever comes second
    with a batch skips it, whatever batch of its run that is."""
    lake = new_lake(tmp_path)
    path = new_table(lake)
    mine, other = BatchWriter(None, lake, QUERY), BatchWriter(None, lake, QUERY)
    for batch in range(3):
        start_batch(lake, batch)
        assert mine.append_rows(driver_rows(batch), path, batch)
    start_batch(lake, 3)
    assert other.append_rows(driver_rows(3), path, 3)  # the other job was first with 3

    assert not mine.append_rows(driver_rows(3), path, 3)
    assert batches(path) == sorted([0, 1, 2, 3] * 3)


def test_a_batch_committed_by_another_writer_meanwhile_is_not_committed_again(
    tmp_path, monkeypatch
) -> None:
    """The other writer commits the batch after this one read the table's snapshot:
    delta-rs refuses the commit as a concurrent transaction, and the check on the new
    snapshot finds the batch written."""
    lake = new_lake(tmp_path)
    path = new_table(lake)
    start_batch(lake, 5)
    stale = DeltaTable(path)  # this writer's snapshot, taken before the other commits
    assert BatchWriter(None, lake, QUERY).append_rows(driver_rows(5), path, 5)
    snapshots = iter([stale])
    monkeypatch.setattr(delta_io, "delta_table", lambda p: next(snapshots, None) or DeltaTable(p))

    assert not BatchWriter(None, lake, QUERY).append_rows(driver_rows(5), path, 5)
    assert batches(path) == [5, 5, 5]


def test_a_job_that_lost_its_lease_commits_nothing(tmp_path) -> None:
    lake = new_lake(tmp_path)
    path = new_table(lake)
    lost = LakeLease(lake.root, 10.0, lambda line: None)
    lost.acquire(standby=False)
    LakeLease(lake.root, 10.0, lambda line: None)._claim(lost.epoch + 1)  # taken over
    lost.check = lost.renew  # as after a stall: the next check renews, and finds it taken
    write_under(lake.root, lost)
    try:
        start_batch(lake, 0)
        with pytest.raises(LeaseLost):
            BatchWriter(None, lake, QUERY).append_rows(driver_rows(0), path, 0)
    finally:
        write_under(lake.root, None)
    assert batches(path) == []
