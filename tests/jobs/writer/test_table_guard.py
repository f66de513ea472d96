"""The start-up guard (jobs/writer/table_guard.py) on lakes made with delta-rs: a table an
earlier release made without a column gains it; a changed type, an unknown column or a
Delta feature the job's writer does not implement stops the job, saying what to do, and
changes nothing."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.table_guard import LakeMismatch, guard_tables
from jobs.writer.tables import ALERTS_SCHEMA, ALL_TABLES, create_tables
from lake.layout import Lake


def lake_with(tmp_path: Path, name: str, schema: pa.Schema, **create: object) -> Lake:
    """A lake of the job's tables, with ``name`` made as ``schema`` instead."""
    lake = Lake(tmp_path / "lake")
    DeltaTable.create(lake.table(name), schema=schema, **create)
    create_tables(lake)
    return lake


def job_schema(name: str) -> pa.Schema:
    return arrow_schema(ALL_TABLES[name])


def test_a_lake_the_job_made_passes_unchanged(tmp_path: Path) -> None:
    lake = Lake(tmp_path / "lake")
    create_tables(lake)
    versions = {n: DeltaTable(lake.table(n)).version() for n in ALL_TABLES}

    assert guard_tables(lake) == []
    assert {n: DeltaTable(lake.table(n)).version() for n in ALL_TABLES} == versions


def test_a_column_an_earlier_release_lacked_is_added_and_old_rows_read_null(
    tmp_path: Path,
) -> None:
    earlier = job_schema("alerts").remove(job_schema("alerts").get_field_index("site"))
    lake = lake_with(tmp_path, "alerts", earlier)
    old_row = {f.name: None for f in earlier} | {"alert_id": "a1", "rule": "overheat_reading"}
    write_deltalake(lake.table("alerts"), pa.Table.from_pylist([old_row], earlier), mode="append")
    said: list[str] = []

    added = guard_tables(lake, said.append)

    table = DeltaTable(lake.table("alerts"))
    assert [(a.table, a.columns) for a in added] == [("alerts", ("site",))]
    assert set(pa.schema(table.schema().to_arrow()).names) == {f.name for f in ALERTS_SCHEMA.fields}
    assert table.to_pyarrow_table().to_pylist()[0]["site"] is None
    assert said == ["table alerts: added column(s) site (null in the rows already there)"]
    assert guard_tables(lake) == []  # and once is enough


def test_a_changed_type_stops_the_job_naming_the_table_and_column(tmp_path: Path) -> None:
    schema = job_schema("readings")
    changed = schema.set(schema.get_field_index("seq"), pa.field("seq", pa.string()))
    lake = lake_with(tmp_path, "readings", changed)

    with pytest.raises(LakeMismatch) as stopped:
        guard_tables(lake)

    message = str(stopped.value)
    assert "table readings: column seq is string in the lake, int64 in this job" in message
    assert "Nothing was written" in message


def test_an_unknown_column_stops_the_job(tmp_path: Path) -> None:
    lake = lake_with(tmp_path, "quarantine", job_schema("quarantine").append(
        pa.field("severity_v2", pa.string())
    ))  # fmt: skip

    with pytest.raises(LakeMismatch, match=r"column\(s\) severity_v2 unknown to this job"):
        guard_tables(lake)


@pytest.mark.parametrize(
    ("configuration", "said"),
    [
        ({"delta.enableDeletionVectors": "true"}, "uses deletion vectors, which this job's writer"),
        ({"delta.enableChangeDataFeed": "true"}, "uses the change data feed"),
        ({"delta.columnMapping.mode": "name"}, "uses column mapping"),
    ],
)
def test_a_feature_the_writer_does_not_implement_stops_the_job(
    tmp_path: Path, configuration: dict[str, str], said: str
) -> None:
    lake = lake_with(tmp_path, "incidents", job_schema("incidents"), configuration=configuration)
    before = DeltaTable(lake.table("incidents")).version()

    with pytest.raises(LakeMismatch, match=said) as stopped:
        guard_tables(lake)

    assert "table incidents" in str(stopped.value)
    assert DeltaTable(lake.table("incidents")).version() == before


def test_a_check_constraint_stops_the_job_and_says_how_to_drop_it(tmp_path: Path) -> None:
    lake = lake_with(tmp_path, "readings", job_schema("readings"))
    DeltaTable(lake.table("readings")).alter.add_constraint({"sane": "temperature_c < 1000"})

    with pytest.raises(LakeMismatch, match="uses check constraints") as stopped:
        guard_tables(lake)

    assert "DROP CONSTRAINT" in str(stopped.value)
