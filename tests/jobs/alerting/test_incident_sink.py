"""IncidentWriter on real Delta tables (delta-rs, no Spark): the catch-up pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from conf.paths import RULES_FILE
from contract.alerts import OVERHEAT, alert_id
from contract.rules.parsing import read_rules
from jobs.alerting.incident_sink import IncidentWriter
from jobs.alerting.incidents import rule_traits
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALERTS_SCHEMA, create_tables
from lake.layout import Lake

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

T0 = datetime(2026, 2, 1, 12, 0, tzinfo=UTC)
TRAITS = rule_traits(read_rules(RULES_FILE))


def write_alerts(lake: Lake, sensor: str, minutes: list[int]) -> None:
    rows = [
        {
            "alert_id": alert_id(sensor, OVERHEAT, T0 + timedelta(minutes=m)),
            "sensor_id": sensor,
            "site": "lab",
            "rule": "overheat_reading",
            "severity": "critical",
            "window_start": T0 + timedelta(minutes=m),
            "window_end": T0 + timedelta(minutes=m + 1),
            "observed_value": 50.0 + m,
            "threshold": 45.0,
            "readings": 1,
            "detected_at": datetime.now(UTC),
        }
        for m in minutes
    ]
    write_deltalake(
        lake.table("alerts"), pa.Table.from_pylist(rows, arrow_schema(ALERTS_SCHEMA)), mode="append"
    )


def write_alerts_at(lake: Lake, sensor: str, start: datetime) -> None:
    """One overheat alert of ``sensor`` in the minute that starts at ``start``."""
    row = {
        "alert_id": alert_id(sensor, OVERHEAT, start), "sensor_id": sensor, "site": "lab",
        "rule": "overheat_reading", "severity": "critical", "window_start": start,
        "window_end": start + timedelta(minutes=1), "observed_value": 50.0, "threshold": 45.0,
        "readings": 1, "detected_at": datetime.now(UTC),
    }  # fmt: skip
    write_deltalake(
        lake.table("alerts"),
        pa.Table.from_pylist([row], arrow_schema(ALERTS_SCHEMA)),
        mode="append",
    )


def incidents(lake: Lake) -> list[dict]:
    rows = DeltaTable(lake.table("incidents")).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: (r["sensor_id"], r["started_at"]))


def test_catch_up_writes_the_incidents_of_alerts_that_have_none(tmp_path: Path) -> None:
    """A run died after writing its alerts, before their incidents: the next run's pass
    finds them (alerts detected since the table's last change) and resolves by the clock."""
    lake = Lake(tmp_path / "lake")
    Path(lake.root).mkdir()
    create_tables(lake)
    writer = IncidentWriter(lake, lambda: TRAITS)
    write_alerts(lake, "s-1", [0, 1, 2, 20])
    write_alerts(lake, "s-2", [3])

    watermark = T0 + timedelta(minutes=10)  # aware UTC, as jobs.spark.checkpoints gives it
    writer.catch_up(watermark, lake.table("_panes"))
    got = [
        (r["sensor_id"], r["started_at"], r["status"], r["resolved_at"], r["alert_count"])
        for r in incidents(lake)
    ]
    assert got == [
        ("s-1", T0, "resolved", T0 + timedelta(minutes=7), 3),
        ("s-1", T0 + timedelta(minutes=20), "firing", None, 1),
        ("s-2", T0 + timedelta(minutes=3), "resolved", T0 + timedelta(minutes=8), 1),
    ]
    # Written resolved at once: the notifier can tell nobody saw them firing.
    first = incidents(lake)[0]
    assert first["created_at"] == first["updated_at"]

    # A second pass, and one after more alerts of the firing episode, write only changes.
    assert writer.catch_up(watermark, lake.table("_panes")) == []
    write_alerts(lake, "s-1", [22])
    [changed] = writer.catch_up(watermark, lake.table("_panes"))
    assert (changed.started_at, changed.alert_count, changed.status) == (
        T0 + timedelta(minutes=20),
        2,
        "firing",
    )
    assert len(incidents(lake)) == 3


def test_an_update_reads_only_the_files_that_can_hold_its_incidents(tmp_path: Path) -> None:
    """The incidents MERGE skips the data files of older episodes by their statistics:
    its cost follows the open episodes, not the table's age (issue 35)."""
    lake = Lake(tmp_path / "lake")
    Path(lake.root).mkdir()
    create_tables(lake)
    writer = IncidentWriter(lake, lambda: TRAITS)
    # A table that has aged: 30 episodes, each resolved long ago, each in its own file.
    for day in range(30):
        start = T0 - timedelta(days=30 - day)
        write_alerts_at(lake, f"s-{day}", start)
        writer.catch_up(start + timedelta(hours=1), lake.table("_panes"))
    assert len(DeltaTable(lake.table("incidents")).file_uris()) == 30

    write_alerts(lake, "s-new", [0, 1])
    writer.catch_up(T0 + timedelta(minutes=3), lake.table("_panes"))

    assert writer.last_merge["num_target_rows_inserted"] == 1
    assert writer.last_merge["num_target_files_scanned"] == 0
    assert writer.last_merge["num_target_files_skipped_during_scan"] == 30
    assert len(incidents(lake)) == 31
