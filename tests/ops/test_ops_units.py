"""The ops view's small parts: --since parsing, table names, the lake reader's SQL
conditions and file skipping on real Delta tables, durations, terminal tables, the one
readiness poll, the vendored library's pin, the set-up's options."""

from __future__ import annotations

import hashlib
import json
import re
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
from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.dashboard import DashboardSettings
from conf.settings.job import JobSettings
from conf.settings.notifier import NotifierSettings
from conf.settings.producer import ProducerSettings
from contract.times import parse_since
from contract.waiting import poll_until
from jobs.writer.tables import (
    ALERTS,
    INCIDENTS,
    INTERNAL_TABLES,
    TABLES,
    arrow_schema,
    create_tables,
)
from lake import reader as lake
from lake.layout import Lake
from lake.reader import AllOf, AnyOf, AtLeast, OneOf
from ops.alert_reader import COLUMNS, INCIDENT_COLUMNS, describe_duration
from ops.table_text import fitted, line
from tests.support.polling import wait_until
from tests.support.tree import tracked_text_files

VENDOR = PROJECT_ROOT / "ops" / "dashboard" / "static" / "vendor"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", NOW - timedelta(seconds=90)),
        ("30m", NOW - timedelta(minutes=30)),
        ("1h", NOW - timedelta(hours=1)),
        ("2d", NOW - timedelta(days=2)),
        ("1.5h", NOW - timedelta(minutes=90)),
        ("2026-01-01T10:00:00Z", datetime(2026, 1, 1, 10, tzinfo=UTC)),
        ("2026-01-01T11:00:00+01:00", datetime(2026, 1, 1, 10, tzinfo=UTC)),
        ("2026-01-01 10:00", datetime(2026, 1, 1, 10, tzinfo=UTC)),  # no zone: UTC
    ],
)
def test_since_accepts_durations_and_timestamps(text: str, expected: datetime) -> None:
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["", "1w", "h", "-1h", "yesterday", "1 hour"])
def test_since_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="duration such as"):
        parse_since(text, now=NOW)


def test_the_ops_view_reads_the_tables_the_job_defines() -> None:
    # One definition of the names (lake/layout.py): the job's schemas are keyed by them.
    from lake import layout

    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)}
    assert names == set(TABLES) | set(INTERNAL_TABLES)
    assert layout.BASELINES in INTERNAL_TABLES  # the dashboard draws a sensor's band from it
    # The ops view's column lists are the job's schemas, column for column.
    assert ALERTS.fieldNames() == COLUMNS
    assert INCIDENTS.fieldNames() == INCIDENT_COLUMNS


def test_the_ops_view_shares_the_jobs_lake_and_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set once for the job, in its settings file or the environment, and the dashboard
    reads the same lake and rules."""
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "hot"\nkind = "reading"\nfield = "temperature_c"\nop = ">="\n'
        'threshold = 50.0\nseverity = "critical"\n',
        encoding="utf-8",
    )
    config = tmp_path / "pipeline.toml"
    config.write_text('lake = "/srv/lake"\n', encoding="utf-8")
    monkeypatch.setenv("SENSORWATCH_RULES", str(rules))

    dashboard = load_settings(DashboardSettings, {}, SettingsFile(config, shared=True))
    job = load_settings(JobSettings, {}, SettingsFile(config, shared=True))

    assert dashboard.lake == job.lake == "/srv/lake"
    assert dashboard.alert_rules == job.alert_rules
    assert [r.threshold for r in job.alert_rules.rules] == [50.0]
    with pytest.raises(SettingsError, match=r"--host \(SENSORWATCH_DASHBOARD_HOST\)"):
        load_settings(DashboardSettings, {"dashboard_host": ""}, flags={"dashboard_host": "--host"})


def test_a_threshold_setting_that_moved_to_the_rules_file_is_refused_naming_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text("critical_temp_c = 50.0\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"settings file: critical_temp_c is now "
                       r"overheat_reading's threshold in the rules file"):  # fmt: skip
        load_settings(JobSettings, {}, SettingsFile(config, shared=True))

    monkeypatch.setenv("SENSORWATCH_INCIDENT_HOLD", "10 minutes")
    with pytest.raises(SettingsError, match=r"SENSORWATCH_INCIDENT_HOLD: incident_hold is now "
                       r"each rule's resolve_after"):  # fmt: skip
        load_settings(NotifierSettings, {})


def test_a_bad_rules_file_stops_a_program_naming_the_file_the_rule_and_the_problem(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "hot"\nkind = "reading"\nfield = "pressure"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(ProducerSettings, {"rules": str(rules)})

    assert str(caught.value).startswith(f"--rules (SENSORWATCH_RULES): rules file {rules}: ")
    assert "rule 'hot': field: " in str(caught.value)


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
        str(tmp_path / "alerts"), pa.Table.from_pylist([row], arrow_schema(ALERTS)), mode="append"
    )

    read = lake.LakeReader(tmp_path).read("alerts", where=AtLeast("detected_at", now))
    some = lake.LakeReader(tmp_path).read("alerts", ["detected_at", "site"])

    assert read.schema == arrow_schema(ALERTS)  # strings, not DataFusion's string views
    assert read.to_pylist() == [row]  # timestamps aware, in UTC
    assert some.schema == only(arrow_schema(ALERTS), ["detected_at", "site"])


def test_empty_tables_and_missing_ones(tmp_path: Path) -> None:
    create_tables(Lake(tmp_path))
    reader = lake.LakeReader(tmp_path)
    where = AllOf([AtLeast("detected_at", NOW), OneOf("rule", ("sensor_silent",))])
    table = reader.open("alerts")

    assert reader.read("alerts", where=where) == arrow_schema(ALERTS).empty_table()
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


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (59.9, "59s"), (60, "1m"), (200, "3m20s"), (4200, "1h10m"),
     (7260, "2h01m"), (3 * 86_400 + 4 * 3600 + 5, "3d4h")],
)  # fmt: skip
def test_durations_are_short(seconds: float | None, text: str) -> None:
    assert describe_duration(seconds) == text


def test_table_columns_have_their_widths_and_a_long_value_pushes_only_its_row() -> None:
    assert line(["a", "bb", "c"], [3, 3, 3]) == "a    bb   c"  # no trailing spaces
    assert line(["longer", "x"], [3, 3]) == "longer  x"
    assert fitted([("n", "value"), ("1,000", "-")], right=True) == ["    n  value", "1,000      -"]
    assert fitted([("label", "v"), ("l", "value")]) == ["label  v", "l      value"]
    assert fitted([]) == []


def test_a_poll_returns_what_held_or_the_last_answer_at_its_deadline() -> None:
    answers = iter(range(10))
    assert poll_until(lambda: next(answers), 5, 0.001, lambda n: n >= 3) == 3
    assert poll_until(lambda: 0, 0.05, 0.01) == 0  # the deadline: the last, falsy, answer
    assert poll_until(lambda: "ready", 0, 1) == "ready"  # one look even without time

    def dead() -> bool:
        raise RuntimeError("exited")

    with pytest.raises(RuntimeError, match="exited"):
        poll_until(dead, 5, 0.01)


def test_a_wait_that_runs_out_says_what_it_waited_for_and_what_it_saw() -> None:
    seen = iter(range(100))
    with pytest.raises(AssertionError) as failed:
        wait_until(lambda: False, 0.05, "the lake", every=0.01, detail=lambda: f"{next(seen)} rows")
    assert str(failed.value) == "not within 0.05s: the lake\n0 rows"  # asked once, at the end
    with pytest.raises(AssertionError, match=r"^not within 0s: the lake$"):
        wait_until(lambda: 0, 0, "the lake")
    assert wait_until(lambda: 7, 1, "seven", detail=lambda: 1 / 0) == 7  # no detail on success


def test_vendored_files_match_their_pins_and_the_version_is_written_once() -> None:
    pins = json.loads((VENDOR / "pinned.json").read_text())
    tracked = tracked_text_files()

    for name, pin in pins.items():
        for path, digest in pin["files"].items():
            assert hashlib.sha256((VENDOR / path).read_bytes()).hexdigest() == digest, path
        pattern = re.compile(rf"(?<![\w.]){re.escape(pin['version'])}(?![\w.])")
        holders = [f for f, text in tracked.items() if pattern.search(text)]
        assert holders == ["ops/dashboard/static/vendor/pinned.json"], (name, holders)
    assert "MIT License" in (VENDOR / "uplot" / "LICENSE").read_text()


def test_setup_rejects_an_unknown_option() -> None:
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup"), "--quiet", "--no-such-option"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert done.returncode == 2
    assert "--no-browser" in done.stderr


def test_setup_no_browser_skips_the_browser_step() -> None:
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup"), "--no-browser"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "browser: skipped (--no-browser)" in done.stdout
