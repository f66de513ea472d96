"""The ops view's small parts: --since parsing, its column lists, durations, terminal
tables, the dashboard's vendored library's pin."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from conf.paths import PROJECT_ROOT
from contract.times import parse_since
from jobs.writer.tables import ALERTS_SCHEMA, INCIDENTS_SCHEMA
from ops.alert_reader import COLUMNS, INCIDENT_COLUMNS, describe_duration
from ops.table_text import fitted, line
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


def test_the_ops_view_columns_are_the_jobs() -> None:
    """The ops view's column lists are the job's schemas, column for column."""
    assert ALERTS_SCHEMA.fieldNames() == COLUMNS
    assert INCIDENTS_SCHEMA.fieldNames() == INCIDENT_COLUMNS


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
