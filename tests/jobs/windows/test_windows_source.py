"""Where a new windows query starts reading readings (jobs/windows/source.py): from version 0
only while the log's commits hold exactly the table's rows. Real Delta tables (delta-rs)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.windows.source import source_options, whole_history_is_the_table


def rows(*values: int) -> pa.Table:
    return pa.table({"sensor_id": [f"s{v}" for v in values], "value": pa.array(values, pa.int64())})


@pytest.fixture
def appended(tmp_path: Path) -> str:
    """A table made and then appended to twice, as ingest does."""
    table = str(tmp_path / "readings")
    for batch in (rows(1, 2), rows(3), rows(4, 5)):
        write_deltalake(table, batch, mode="append")
    return table


def test_appends_only_are_read_from_version_0(appended: str) -> None:
    assert whole_history_is_the_table(appended)
    assert source_options(appended, new_query=True) == {
        "skipChangeCommits": "true",
        "startingVersion": "0",
    }


def test_a_query_with_a_checkpoint_gets_no_starting_version(appended: str) -> None:
    assert source_options(appended, new_query=False) == {"skipChangeCommits": "true"}


def test_a_compaction_means_the_snapshot(appended: str) -> None:
    DeltaTable(appended).optimize.compact()
    assert not whole_history_is_the_table(appended)


def test_a_delete_means_the_snapshot(appended: str) -> None:
    DeltaTable(appended).delete("value = 3")
    assert not whole_history_is_the_table(appended)


def test_a_schema_change_means_the_snapshot(appended: str) -> None:
    wider = rows(6).append_column("battery_pct", pa.array([50.0]))
    write_deltalake(appended, wider, mode="append", schema_mode="merge")
    assert not whole_history_is_the_table(appended)


def test_an_expired_first_commit_means_the_snapshot(appended: str) -> None:
    DeltaTable(appended).create_checkpoint()
    (Path(appended) / "_delta_log" / f"{0:020d}.json").unlink()
    assert DeltaTable(appended).to_pyarrow_table().num_rows == 5  # the table reads as before
    assert not whole_history_is_the_table(appended)


def test_a_long_history_is_not_read_and_means_the_snapshot(appended: str) -> None:
    assert whole_history_is_the_table(appended, most=3)
    assert not whole_history_is_the_table(appended, most=2)


def test_no_table_yet_means_the_snapshot(tmp_path: Path) -> None:
    assert not whole_history_is_the_table(str(tmp_path / "readings"))
