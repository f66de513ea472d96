"""Fencing at the store (lake/lease.py, jobs/writer/delta_io.py): a holder that stalled
past its lease and wakes after another job took the lake over commits nothing, on any
table, even while its own clock says its lease is fresh; and a stalled holder never makes
an epoch file again that the new holder deleted. Real Delta tables, no JVM; the end-to-end
drill with two job processes is tests/jobs/test_drills.py::test_kill_drill."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from conf.paths import RULES_FILE
from contract.rules.parsing import read_rules
from jobs.alerting.rule_changes import record_rules
from jobs.writer.delta_io import BatchWriter, committing, fence_tables, write_under
from jobs.writer.maintenance import Maintenance, Policy, StreamGuard
from jobs.writer.tables import create_tables
from lake.layout import Lake
from lake.lease import FENCE_APP_ID, FOLDER, KEEP, LakeLease, LeaseLost
from tests.support.leases import EXPIRY, Clocks, lease, remote
from tests.support.query_checkpoint import lake_with_checkpoint, log_offsets

QUERY = "ingest"


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    lake = lake_with_checkpoint(tmp_path, QUERY, "ckpt-1")
    create_tables(lake)
    return lake


def take_over(lake: Lake, holder: LakeLease) -> LakeLease:
    """Another job takes the lake from ``holder`` (after its expiry) and stamps the
    tables, as jobs.driver.startup.lake_held does before anything else."""
    remote(holder)
    clocks = Clocks()
    taker = lease(Path(lake.root), clocks)
    assert taker.acquire(standby=True)  # waits out the expiry on its own clock
    write_under(lake.root, taker)
    try:
        assert fence_tables(lake, taker) > 0
    finally:
        write_under(lake.root, holder)  # the stalled job's process, as it wakes
    return taker


def versions(lake: Lake) -> dict[str, int]:
    return {name: DeltaTable(lake.table(name)).version() for name in ("alerts", "rule_changes")}


def test_a_holder_that_stalled_past_its_lease_commits_nothing_anywhere(lake: Lake) -> None:
    clocks = Clocks()
    stalled = lease(Path(lake.root), clocks)
    assert stalled.acquire(standby=False)
    write_under(lake.root, stalled)
    try:
        writer = BatchWriter(None, lake, QUERY)
        log_offsets(lake, QUERY, 0)
        alerts = lake.table("alerts")
        before = DeltaTable(alerts).version()
        empty = pa.Table.from_pylist([], pa.schema(DeltaTable(alerts).schema().to_arrow()))
        with committing(alerts) as commit:  # its commits carry its term
            write_deltalake(
                commit.table, empty, mode="append", commit_properties=commit.properties()
            )
        assert DeltaTable(alerts).transaction_version(FENCE_APP_ID) == stalled.term == 1
        assert DeltaTable(alerts).version() == before + 1

        taker = take_over(lake, stalled)
        # By its own clock the stalled job renewed a moment ago: only the store stops it.
        assert clocks.t - stalled._renewed < EXPIRY * 0.5
        stamped = versions(lake)
        assert (
            DeltaTable(alerts).transaction_version(FENCE_APP_ID) == taker.term == 3
        )  # 2: the stalled job's last renewal

        described = {"path": "part-0.parquet", "size": 1, "modification_time": 0, "stats": "{}"}
        with pytest.raises(LeaseLost, match="taken over by another job"):
            writer.commit_files([described], alerts, 0)
        with pytest.raises(LeaseLost):
            record_rules(lake.table("rule_changes"), read_rules(RULES_FILE), "edited")
        with pytest.raises(LeaseLost), committing(alerts):
            pass
        assert versions(lake) == stamped
        assert stalled.lost and "commits nothing more" in stalled.lost
    finally:
        write_under(lake.root, None)


def test_a_commit_on_a_snapshot_read_before_the_takeover_is_refused(lake: Lake) -> None:
    """The stalled job read the table, then stalled, then commits on what it read: the
    newer holder's stamp since then fails the commit (delta-rs, concurrent transaction),
    and it is told as the lake lost."""
    stalled = lease(Path(lake.root))
    assert stalled.acquire(standby=False)
    write_under(lake.root, stalled)
    try:
        fence_tables(lake, stalled)
        path = lake.table("rule_changes")
        snapshot = DeltaTable(path)  # read before it stalled
        take_over(lake, stalled)
        stamped = DeltaTable(path).version()
        row = pa.Table.from_pylist([], pa.schema(snapshot.schema().to_arrow()))

        with pytest.raises(LeaseLost, match="taken over"), committing(path, snapshot) as commit:
            assert commit.table.transaction_version(FENCE_APP_ID) == stalled.term
            write_deltalake(commit.table, row, mode="append", commit_properties=commit.properties())
        assert DeltaTable(path).version() == stamped
    finally:
        write_under(lake.root, None)


def old_rows(schema: pa.Schema, count: int) -> pa.Table:
    """``count`` rows of ``schema``, ingested long ago (retention may delete them)."""
    long_ago = datetime(2026, 1, 1, tzinfo=UTC)

    def value(kind: pa.DataType, i: int) -> object:
        if pa.types.is_timestamp(kind):
            return long_ago
        if pa.types.is_string(kind):
            return f"v{i}"
        return 1.0 if pa.types.is_floating(kind) else 1

    return pa.Table.from_pylist(
        [{f.name: value(f.type, i) for f in schema} for i in range(count)], schema
    )


def test_maintenance_of_a_stalled_holder_rewrites_nothing(lake: Lake) -> None:
    stalled = lease(Path(lake.root))
    assert stalled.acquire(standby=False)
    write_under(lake.root, stalled)
    try:
        path = lake.table("readings")
        schema = pa.schema(DeltaTable(path).schema().to_arrow())
        for _ in range(6):  # small files for a compaction, rows old enough to expire
            write_deltalake(path, old_rows(schema, 3), mode="append")
        take_over(lake, stalled)
        stamped = DeltaTable(path).version()
        policy = Policy(
            small_size=1 << 20, target_size=1 << 26, compact_min_files=2,
            retention=timedelta(hours=1), raw_retention=timedelta(seconds=1),
        )  # fmt: skip
        said: list[str] = []
        guard = StreamGuard(lambda: None)
        maintenance = Maintenance(lake, policy, guard, said.append, ("readings",))

        maintenance.run_pass(housekeeping=True)

        assert DeltaTable(path).version() == stamped
        assert DeltaTable(path).to_pyarrow_table().num_rows == 18
        counts = maintenance.counts
        assert (counts.compactions, counts.rows_expired, counts.failures, said) == (0, 0, 0, [])
    finally:
        write_under(lake.root, None)


def test_a_stalled_holder_never_makes_again_an_epoch_the_new_holder_deleted(
    tmp_path: Path,
) -> None:
    stalled = lease(tmp_path)
    assert stalled.acquire(standby=False)
    remote(stalled)  # epoch 2
    taker = lease(tmp_path, Clocks())
    assert taker.acquire(standby=True)  # epoch 3, after the expiry
    for _ in range(KEEP + 2):
        taker.renew()  # ... epoch 10: epochs up to 5 are deleted
    folder = tmp_path / FOLDER
    before = sorted(p.name for p in folder.iterdir())
    assert f"{stalled.epoch + 1:020d}.json" not in before  # the name it would renew to

    with pytest.raises(LeaseLost, match="taken over by another job"):
        stalled.renew()
    stalled.release()  # a clean stop after the loss hands nothing back

    assert sorted(p.name for p in folder.iterdir()) == before
    assert taker.epoch == 10 and not taker.lost
    taker.verify()  # still the newest
