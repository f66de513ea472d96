"""The lake reader (lake/reader.py) on real Delta tables: its SQL conditions, the files it
skips, types, empty and missing tables, a clean exit."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from conf.paths import PROJECT_ROOT
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALERTS_SCHEMA, create_tables
from lake import reader as lake
from lake.layout import Lake
from lake.reader import AllOf, AnyOf, AtLeast, OneOf

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T0 = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


SCHEMA = pa.schema([("t", pa.timestamp("us", tz="UTC")), ("s", pa.string())])


def one_file_per_row(path: Path, rows: list[dict], **create: Any) -> DeltaTable:
    """A table written one commit, hence one data file, per row."""
    if create:
        DeltaTable.create(str(path), schema=SCHEMA, **create)
    for row in rows:
        write_deltalake(str(path), pa.Table.from_pylist([row], SCHEMA), mode="append")
    return DeltaTable(str(path))


def values(table: DeltaTable, where: lake.Condition | None = None) -> list[str]:
    return sorted(lake.read_table(table, ["s"], where).column("s").to_pylist())


def only(schema: pa.Schema, names: list[str]) -> pa.Schema:
    return pa.schema([schema.field(name) for name in names])


def break_files(table: DeltaTable, holding: set[str]) -> None:
    """Make the data files whose rows have an s in ``holding`` unreadable."""
    for uri in table.file_uris():
        if set(pq.read_table(uri, columns=["s"]).column(0).to_pylist()) <= holding:
            Path(uri).write_bytes(b"not parquet")


def test_conditions_render_as_sql_with_every_name_and_value_quoted() -> None:
    assert OneOf("site", ("it's", "a\\b")).sql() == """"site" IN ('it''s', 'a\\b')"""
    assert OneOf("s", ()).sql() == "FALSE"
    assert AtLeast('odd "name"', 3).sql() == '"odd ""name""" >= 3'
    same_instant = datetime(2026, 1, 1, 1, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    expected = (
        """"t" >= arrow_cast('2026-01-01T00:00:00.123456Z', """
        """'Timestamp(Microsecond, Some("UTC"))')"""
    )
    assert AtLeast("t", T0).sql() == AtLeast("t", same_instant).sql() == expected
    assert AtLeast("t", T0.replace(tzinfo=None)).sql() == expected  # naive: UTC
    assert AllOf([]).sql() == "TRUE" and AnyOf([]).sql() == "FALSE"
    assert AllOf([OneOf("s", ("a",)), AnyOf([AtLeast("n", 1.5)])]).sql() == (
        """("s" IN ('a')) AND (("n" >= 1.5))"""
    )
    with pytest.raises(ValueError, match="nan"):
        lake.literal(float("nan"))


def test_conditions_select_exactly_the_matching_rows(tmp_path: Path) -> None:
    quoted = "it's a \\ 'quote'"
    table = one_file_per_row(
        tmp_path / "t",
        [
            {"t": T0, "s": "a"},
            {"t": T0 + timedelta(hours=1), "s": "b"},
            {"t": None, "s": "c"},  # null never matches a comparison
            {"t": T0, "s": quoted},
        ],
    )
    micro = timedelta(microseconds=1)

    # To the microsecond, although Delta keeps the files' statistics to the millisecond
    # (T0's file says 00:00:00.123): such a file is not skipped for a later instant.
    assert values(table, AtLeast("t", T0 - micro)) == ["a", "b", quoted]
    assert values(table, AtLeast("t", T0)) == ["a", "b", quoted]
    assert values(table, AtLeast("t", T0.replace(microsecond=123400))) == ["a", "b", quoted]
    assert values(table, AtLeast("t", T0 + micro)) == ["b"]
    assert values(table, AtLeast("t", T0.astimezone(timezone(timedelta(hours=-5))))) == [
        "a", "b", quoted,
    ]  # fmt: skip
    # Quotes and backslashes in a value are the value, not SQL.
    assert values(table, OneOf("s", (quoted, "zzz"))) == [quoted]
    assert values(table, OneOf("s", ("a' OR 'x' = 'x",))) == []
    assert values(table, OneOf("s", ())) == []
    assert values(table, AllOf([AtLeast("t", T0 + micro), OneOf("s", ("a", "b"))])) == ["b"]
    assert values(table, AnyOf([OneOf("s", ("c",)), AtLeast("t", T0 + micro)])) == ["b", "c"]
    assert values(table, AllOf([])) == ["a", "b", "c", quoted]
    assert lake.count_by(table, "s", AtLeast("t", T0)) == {"a": 1, "b": 1, quoted: 1}
    assert lake.maximum(table, "t", OneOf("s", ("a", "c"))) == T0


def test_reads_keep_the_tables_types(tmp_path: Path) -> None:
    create_tables(Lake(tmp_path))
    now = datetime.now(UTC)
    row = {
        "alert_id": "x", "sensor_id": "s-1", "site": "a", "severity": "critical",
        "rule": "overheat_reading", "window_start": T0, "window_end": T0,
        "observed_value": 50.0, "threshold": 45.0, "readings": 1, "detected_at": now,
    }  # fmt: skip
    write_deltalake(
        str(tmp_path / "alerts"),
        pa.Table.from_pylist([row], arrow_schema(ALERTS_SCHEMA)),
        mode="append",
    )

    read = lake.LakeReader(tmp_path).read("alerts", where=AtLeast("detected_at", now))
    some = lake.LakeReader(tmp_path).read("alerts", ["detected_at", "site"])

    assert read.schema == arrow_schema(ALERTS_SCHEMA)  # strings, not DataFusion's string views
    assert read.to_pylist() == [row]  # timestamps aware, in UTC
    assert some.schema == only(arrow_schema(ALERTS_SCHEMA), ["detected_at", "site"])


def test_empty_tables_and_missing_ones(tmp_path: Path) -> None:
    create_tables(Lake(tmp_path))
    reader = lake.LakeReader(tmp_path)
    where = AllOf([AtLeast("detected_at", NOW), OneOf("rule", ("sensor_silent",))])
    table = reader.open("alerts")

    assert reader.read("alerts", where=where) == arrow_schema(ALERTS_SCHEMA).empty_table()
    assert lake.count_by(table, "severity", where) == {}
    assert lake.maximum(table, "detected_at") is None
    assert lake.newest(table, "detected_at") is None
    assert reader.open("nothing") is None and reader.read("nothing") is None
    assert lake.LakeReader(tmp_path / "nowhere").read("alerts", where=where) is None


def test_a_bounded_read_opens_no_file_outside_its_range(tmp_path: Path) -> None:
    """File skipping: the files of old rows are made unreadable, and a read of the recent
    rows (or of other values of a column) still works, because it never opens them."""
    table = one_file_per_row(
        tmp_path / "t",
        [{"t": T0 - timedelta(days=d), "s": f"old{d}"} for d in range(1, 6)]
        + [{"t": T0, "s": "new"}],
    )
    break_files(table, {f"old{d}" for d in range(1, 6)})
    recent = AtLeast("t", T0 - timedelta(hours=1))

    assert values(table, recent) == ["new"]
    assert values(table, OneOf("s", ("new",))) == ["new"]
    assert lake.count_by(table, "s", recent) == {"new": 1}
    assert lake.maximum(table, "t", recent) == T0
    assert lake.newest(table, "t") == T0.replace(microsecond=123000)  # from the log alone
    with pytest.raises(pa.ArrowInvalid):  # the broken files really are unreadable
        values(table, AtLeast("t", T0 - timedelta(days=2)))


def test_newest_without_statistics_asks_sql(tmp_path: Path) -> None:
    # A writer told to keep no column statistics: the log cannot say, the data can.
    table = one_file_per_row(
        tmp_path / "t",
        [{"t": T0, "s": "a"}, {"t": None, "s": "b"}],
        configuration={"delta.dataSkippingNumIndexedCols": "0"},
    )
    with_stats = one_file_per_row(tmp_path / "u", [{"t": None, "s": "a"}, {"t": T0, "s": "b"}])

    assert lake.newest(table, "t") == T0  # exact: read from the data
    assert lake.newest(with_stats, "t") == T0.replace(microsecond=123000)


def test_partitioned_and_newer_protocol_tables_are_read(tmp_path: Path) -> None:
    # Other writers' tables: what the old plain-Parquet reader could not read itself.
    rows = [{"t": T0, "s": "a"}, {"t": T0 + timedelta(hours=1), "s": "b"}]
    for name, options in (
        ("partitioned", {"partition_by": ["s"]}),
        ("mapped", {"configuration": {"delta.columnMapping.mode": "name"}}),
    ):
        DeltaTable.create(str(tmp_path / name), schema=SCHEMA, **options)
        for row in rows:
            write_deltalake(
                str(tmp_path / name), pa.Table.from_pylist([row], SCHEMA), mode="append"
            )
        read = lake.LakeReader(tmp_path).read(
            name, ["s", "t"], AtLeast("t", T0 + timedelta(minutes=1))
        )
        assert read.schema == only(SCHEMA, ["s", "t"]), name
        assert read.to_pylist() == [rows[1]], name


def test_a_reading_process_exits_with_status_0(tmp_path: Path) -> None:
    """deltalake's to_pyarrow_dataset left Arrow threads that aborted the interpreter at
    exit (status 134, delta-rs issue 2184); the SQL reader must not."""
    one_file_per_row(tmp_path / "t", [{"t": T0, "s": "a"}, {"t": T0, "s": "b"}])
    probe = (
        "import sys\n"
        "from datetime import datetime, UTC\n"
        "from lake.reader import AtLeast, LakeReader\n"
        "reader = LakeReader(__import__('pathlib').Path(sys.argv[1]))\n"
        "for _ in range(3):\n"
        "    rows = reader.read('t', where=AtLeast('t', datetime(2000, 1, 1, tzinfo=UTC)))\n"
        "print(rows.num_rows)\n"
    )
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path)],
            capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (0, "2\n"), done.stderr[-2000:]
