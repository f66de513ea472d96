"""The ops view's small parts: --since parsing, table names, file skipping by Delta
statistics, durations, the vendored library's pin, the set-up's options."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from conf.paths import PROJECT_ROOT
from conf.settings import DashboardSettings, JobSettings, SettingsError, load_settings
from jobs.tables import ALERTS, INCIDENTS, PIPELINE_METRICS, SENSOR_STATS, TABLES
from ops import lake
from ops.alerts import COLUMNS, INCIDENT_COLUMNS, describe_duration, parse_since
from ops.lake import AllOf, AnyOf, AtLeast, OneOf, data_files
from tests.test_setup_contract import tracked_text_files

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
    assert {lake.ALERTS, lake.INCIDENTS, lake.SENSOR_STATS_1M, lake.PIPELINE_METRICS} <= set(TABLES)
    assert ALERTS.fieldNames() == COLUMNS
    assert TABLES[lake.INCIDENTS] == INCIDENTS
    assert INCIDENTS.fieldNames() == INCIDENT_COLUMNS
    assert TABLES[lake.SENSOR_STATS_1M] == SENSOR_STATS
    assert TABLES[lake.PIPELINE_METRICS] == PIPELINE_METRICS


def test_the_ops_view_shares_the_jobs_lake_default_and_thresholds() -> None:
    dashboard = load_settings(DashboardSettings, {})
    job = load_settings(JobSettings, {})

    assert dashboard.lake == job.lake
    assert (dashboard.critical_temp_c, dashboard.warning_temp_c) == (45.0, 35.0)
    with pytest.raises(SettingsError, match=r"--host \(SENSORWATCH_DASHBOARD_HOST\)"):
        load_settings(DashboardSettings, {"dashboard_host": ""}, flags={"dashboard_host": "--host"})


T0 = datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)


def one_file_per_row(path: Path, rows: list[dict]) -> DeltaTable:
    schema = pa.schema([("t", pa.timestamp("us", tz="UTC")), ("s", pa.string())])
    for row in rows:
        write_deltalake(str(path), pa.Table.from_pylist([row], schema), mode="append")
    return DeltaTable(str(path))


def kept(table: DeltaTable, condition) -> list[str]:
    """The values of s in the files the condition keeps."""
    return sorted(
        v for uri in data_files(table, condition) for v in pq.read_table(uri)["s"].to_pylist()
    )


def test_files_are_skipped_only_when_their_statistics_rule_them_out(tmp_path: Path) -> None:
    long = "x" * 40  # string statistics of long values may be truncated: never trusted
    table = one_file_per_row(
        tmp_path / "t",
        [
            {"t": T0, "s": "a"},
            {"t": T0 + timedelta(hours=1), "s": "b"},
            {"t": None, "s": "c"},  # no statistics for t: kept
            {"t": T0, "s": long},
        ],
    )

    # Delta keeps timestamp statistics truncated to the millisecond: T0's file is kept.
    assert kept(table, AtLeast("t", T0)) == ["a", "b", "c", long]
    assert kept(table, AtLeast("t", T0 + timedelta(milliseconds=2))) == ["b", "c"]
    assert kept(table, OneOf("s", ("b", "zzz"))) == ["b", long]
    assert kept(
        table, AllOf([AtLeast("t", T0 + timedelta(minutes=1)), OneOf("s", ("a", "c"))])
    ) == ["c"]
    assert kept(table, AnyOf([OneOf("s", ("a",)), AtLeast("t", T0 + timedelta(minutes=1))])) == [
        "a", "b", "c", long,
    ]  # fmt: skip
    assert kept(table, AllOf([])) == ["a", "b", "c", long]
    # The same conditions as row filters.
    rows = lake.LakeReader(tmp_path).read("t", where=AtLeast("t", T0 + timedelta(minutes=1)))
    assert rows.column("s").to_pylist() == ["b"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0, "0s"), (59.9, "59s"), (60, "1m"), (200, "3m20s"), (4200, "1h10m"),
     (7260, "2h01m"), (3 * 86_400 + 4 * 3600 + 5, "3d4h")],
)  # fmt: skip
def test_durations_are_short(seconds: float | None, text: str) -> None:
    assert describe_duration(seconds) == text


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
