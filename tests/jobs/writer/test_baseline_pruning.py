"""Pruning of ``_baselines`` (jobs/writer/baseline_pruning.py, issue 69): each key keeps
its newest two rows, so a replayed batch still finds the row before it; the writer's
batch transactions survive the rewrite (a replay is still told apart), and appends that
come meanwhile are kept."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from deltalake import DeltaTable, Transaction, write_deltalake

from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.baseline_pruning import GROWTH, newest_rows, prune
from jobs.writer.delta_io import committing
from jobs.writer.tables import BASELINES_SCHEMA, create_tables
from lake.layout import Lake
from lake.storage import table_rows
from tests.support.maintenance import maintenance, passes_beside

T0 = datetime(2026, 1, 1, tzinfo=UTC)
APP = "windows-abc"


def baselines(batch_id: int, sensors: list[str], writer: str = APP) -> pa.Table:
    """One batch's baseline rows: its batch id as the mean, so a row tells where it is from."""
    rows = [
        {"sensor_id": s, "rule": "drift", "params": "{}", "writer": writer, "batch_id": batch_id,
         "mean": float(batch_id), "var": 1.0, "learned_s": 60.0 * batch_id, "taught": batch_id,
         "last_pane": T0 + timedelta(minutes=batch_id), "breach_since": None}
        for s in sensors
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, arrow_schema(BASELINES_SCHEMA))


def append(path: str, batch_id: int, sensors: list[str]) -> None:
    """A windows batch's append, as the job commits it (jobs/writer/delta_io.BatchWriter):
    under the table's lock, with its batch transaction."""
    with committing(path) as commit:
        write_deltalake(
            commit.table,
            baselines(batch_id, sensors),
            mode="append",
            commit_properties=commit.properties(Transaction(APP, batch_id)),
        )


def newest_before(path: str, batch_id: int) -> dict[str, int]:
    """What a batch reads: each sensor's newest row of the writer before ``batch_id``."""
    found: dict[str, int] = {}
    for row in DeltaTable(path).to_pyarrow_table().to_pylist():
        if row["writer"] == APP and row["batch_id"] < batch_id:
            found[row["sensor_id"]] = max(found.get(row["sensor_id"], -1), row["batch_id"])
    return found


def test_each_key_keeps_its_two_newest_rows_in_any_order() -> None:
    rows = pa.Table.from_pylist(
        [{"writer": w, "sensor_id": s, "rule": r, "batch_id": b}
         for w, s, r, b in [("a", "s1", "x", 3), ("a", "s1", "x", 9), ("a", "s1", "x", 5),
                            ("a", "s1", "y", 1), ("b", "s1", "x", 2), ("a", "s2", "x", 7),
                            ("a", "s1", "x", 8), ("b", "s1", "x", 1), ("b", "s1", "x", 0)]]
    )  # fmt: skip
    kept = rows.filter(newest_rows(rows)).to_pylist()
    assert sorted((r["writer"], r["sensor_id"], r["rule"], r["batch_id"]) for r in kept) == [
        ("a", "s1", "x", 8), ("a", "s1", "x", 9), ("a", "s1", "y", 1), ("a", "s2", "x", 7),
        ("b", "s1", "x", 1), ("b", "s1", "x", 2),
    ]  # fmt: skip
    assert newest_rows(rows.slice(0, 0)).to_pylist() == []


def test_pruning_keeps_what_every_batch_and_every_replay_reads(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("_baselines")
    for b in range(12):  # s3 falls silent after batch 3; s2 reports every other batch
        append(path, b, ["s1", *(["s2"] if b % 2 == 0 else []), *(["s3"] if b <= 3 else [])])
    before = {b: newest_before(path, b) for b in (11, 12)}  # the replay of 11, and batch 12
    removed, kept = prune(path, kept_before=0) or (0, 0)

    rows = Counter(r["sensor_id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist())
    assert rows == {"s1": 2, "s2": 2, "s3": 2} and (removed, kept) == (12 + 6 + 4 - 6, 6)
    assert {b: newest_before(path, b) for b in (11, 12)} == before
    assert DeltaTable(path).transaction_version(APP) == 11  # a replay is still told apart
    assert prune(path, kept_before=kept) is None  # not due again until the table doubles
    assert table_rows(path) == 6


def test_maintenance_prunes_next_to_the_batches_and_loses_none_of_them(tmp_path) -> None:
    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("_baselines")
    sensors = [f"s{i}" for i in range(20)]
    for b in range(5):
        append(path, b, sensors)
    keeper = maintenance(lake, tables=("_baselines",))
    # The windows query's batches, meanwhile.
    appended = [4, *passes_beside(keeper, lambda b: append(path, b, sensors), range(5, 200))]

    last = appended[-1]
    assert keeper.counts.baselines_pruned > 0 and keeper.counts.failures == 0
    assert len(appended) > 5  # the batches went on meanwhile
    assert newest_before(path, last + 1) == dict.fromkeys(sensors, last)  # no batch lost
    assert newest_before(path, last) == dict.fromkeys(sensors, last - 1)
    assert DeltaTable(path).transaction_version(APP) == last
    # Bounded: under GROWTH x what the last pruning kept, which is each key's newest two
    # and the rows the batches added while it read; once they stop, two a key.
    assert table_rows(path) <= GROWTH * keeper._baselines_kept
    prune(path, kept_before=0)
    assert table_rows(path) == 2 * len(sensors)
    assert newest_before(path, last + 1) == dict.fromkeys(sensors, last)
    assert "superseded baselines pruned" in (keeper.counts.summary() or "")


def test_batches_committed_while_it_reads_are_kept_whole(tmp_path, monkeypatch) -> None:
    """The table is read outside the lock: a batch that commits between the read and the
    rewrite is kept, none of its rows lost."""
    import jobs.writer.baseline_pruning as pruning

    lake = Lake(tmp_path)
    create_tables(lake)
    path = lake.table("_baselines")
    for b in range(4):
        append(path, b, ["s1", "s2"])
    chosen = pruning.newest_rows

    def choose_then_a_batch_commits(rows, keep=pruning.KEEP):  # type: ignore[no-untyped-def]
        append(path, 4, ["s1", "s3"])  # the windows query, between the read and the lock
        return chosen(rows, keep)

    monkeypatch.setattr(pruning, "newest_rows", choose_then_a_batch_commits)
    removed, kept = prune(path, kept_before=0) or (0, 0)

    assert (removed, kept) == (4, 6)  # 8 read, 4 kept, and the batch's 2 rows
    assert newest_before(path, 5) == {"s1": 4, "s2": 3, "s3": 4}
    assert newest_before(path, 4) == {"s1": 3, "s2": 3}  # its replay still finds these
    assert DeltaTable(path).transaction_version(APP) == 4
