"""The ops view's small parts: --since parsing, table names, the vendored library's pin,
the set-up's options."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from conf.paths import PROJECT_ROOT
from conf.settings import DashboardSettings, JobSettings, SettingsError, load_settings
from jobs.tables import ALERTS, PIPELINE_METRICS, SENSOR_STATS, TABLES
from ops import lake
from ops.alerts import COLUMNS, parse_since
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
    assert {lake.ALERTS, lake.SENSOR_STATS_1M, lake.PIPELINE_METRICS} <= set(TABLES)
    assert ALERTS.fieldNames() == COLUMNS
    assert TABLES[lake.SENSOR_STATS_1M] == SENSOR_STATS
    assert TABLES[lake.PIPELINE_METRICS] == PIPELINE_METRICS


def test_the_ops_view_shares_the_jobs_lake_default_and_thresholds() -> None:
    dashboard = load_settings(DashboardSettings, {})
    job = load_settings(JobSettings, {})

    assert dashboard.lake == job.lake
    assert (dashboard.critical_temp_c, dashboard.warning_temp_c) == (45.0, 35.0)
    with pytest.raises(SettingsError, match=r"--host \(SENSORWATCH_DASHBOARD_HOST\)"):
        load_settings(DashboardSettings, {"dashboard_host": ""}, flags={"dashboard_host": "--host"})


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
