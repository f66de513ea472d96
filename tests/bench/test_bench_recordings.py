"""Recordings for scripts/bench --anomaly (bench/recordings.py, issue 69): their step and
hold, the map onto temperature_c's range, labels of our own or NAB's combined file, and
the rule sets and totals made for a recording other than the bundled one."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.anomaly import RECORDING, rule_set_document, totals
from bench.anomaly_score import LabelledWindow
from bench.recordings import (
    RecordingError,
    labels_for,
    read_recording,
    read_windows,
    write_mapped,
)
from contract.rules.parsing import parse_rules


def write_csv(path: Path, rows: list[tuple[str, float]]) -> Path:
    """A NAB-style recording at ``path``."""
    path.write_text("timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in rows), encoding="utf-8")
    return path


HOURLY = [(f"2014-01-01 {h:02d}:00:00", 1000.0 + 100 * h) for h in range(24)]


def test_an_hourly_recording_holds_its_incidents_six_hours(tmp_path: Path) -> None:
    recording = read_recording(write_csv(tmp_path / "taxi.csv", HOURLY))
    assert recording.step.total_seconds() == 3600
    assert recording.hold.total_seconds() == 6 * 3600
    # The bundled recording: 5 minutes apart, held half an hour.
    bundled = read_recording(RECORDING)
    assert (bundled.step.total_seconds(), bundled.hold.total_seconds()) == (300, 1800)


def test_values_outside_the_field_range_are_mapped_onto_0_to_100(tmp_path: Path) -> None:
    recording = read_recording(write_csv(tmp_path / "taxi.csv", HOURLY))
    assert not recording.fits
    mapped = read_recording(write_mapped(recording, tmp_path / "mapped.csv"))
    assert mapped.fits and mapped.times == recording.times
    assert mapped.values[0] == 0.0 and mapped.values[-1] == 100.0
    assert mapped.values[12] == pytest.approx(100 * 12 / 23)
    # A recording that fits is replayed as it is.
    fits = read_recording(write_csv(tmp_path / "room.csv", [("2014-01-01 00:00:00", 21.5)]))
    assert fits.fits and fits.mapped(21.5) == 21.5


def test_another_recording_gets_thresholds_at_its_own_quantiles(tmp_path: Path) -> None:
    recording = read_recording(write_csv(tmp_path / "taxi.csv", HOURLY))
    rules = rule_set_document("fixed", "6 hours", recording)
    by_name = {r["name"]: r for r in rules}
    assert by_name["below_q1"]["threshold"] == 0.0 and by_name["below_q1"]["op"] == "<"
    assert by_name["above_q99"]["threshold"] == 100.0 and by_name["above_q99"]["op"] == ">"
    assert by_name["below_q10"]["threshold"] == pytest.approx(100 * 2 / 23, abs=0.01)
    rates = {r["name"]: r for r in rule_set_document("rate", "6 hours", recording)}
    per_minute = round(100 / 23 / 60, 3)  # each hour +100/23 of the map
    assert {r["per_minute"] for r in rates.values()} == {per_minute}
    for name in ("fixed", "rate", "deviation"):  # every set validates as the job would
        assert parse_rules({"rule": rule_set_document(name, "6 hours", recording)}).rules
    # The bundled recording keeps its sweep in °C.
    assert "below_45" in {r["name"] for r in rule_set_document("fixed", "30 minutes")}


def test_labels_come_from_nab_combined_windows_or_a_file_beside_it(tmp_path: Path) -> None:
    recording = write_csv(tmp_path / "nyc_taxi.csv", HOURLY)
    combined = tmp_path / "combined_windows.json"
    combined.write_text(
        json.dumps(
            {
                "realKnownCause/nyc_taxi.csv": [
                    ["2014-01-01 03:00:00.000000", "2014-01-01 05:00:00.000000"]
                ],
                "realKnownCause/other.csv": [],
            }
        )
    )
    assert read_windows(labels_for(recording, combined), recording) == (
        LabelledWindow(datetime(2014, 1, 1, 3, tzinfo=UTC), datetime(2014, 1, 1, 5, tzinfo=UTC)),
    )
    with pytest.raises(RecordingError, match="no labels: give --anomaly-labels"):
        labels_for(recording, None)
    elsewhere = write_csv(tmp_path / "missing.csv", HOURLY)
    with pytest.raises(RecordingError, match=r"no single entry for missing\.csv"):
        read_windows(combined, elsewhere)


def test_a_recording_that_cannot_be_read_says_which_and_why(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"nope\.csv"):
        read_recording(tmp_path / "nope.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("time,reading\n2014-01-01,1\n")
    with pytest.raises(RecordingError, match="needs the columns timestamp and value"):
        read_recording(bad)
    bad.write_text("timestamp,value\n2014-01-01 00:00:00,warm\n")
    with pytest.raises(RecordingError, match="not a number"):
        read_recording(bad)


def test_totals_add_up_the_rules_scored_on_every_recording() -> None:
    def scored(detected: int, windows: int, false: int, delays: list[float | None]) -> dict:
        return {
            "detected": detected,
            "windows": windows,
            "false_incidents": false,
            "per_window": [{"delay_min": d} for d in delays],
        }

    runs = [
        {"rule_sets": {"deviation": {"rules": {"dev": scored(1, 2, 0, [60.0, None])}},
                       "fixed": {"rules": {"below_45": scored(1, 2, 3, [10.0, None])}}}},
        {"rule_sets": {"deviation": {"rules": {"dev": scored(2, 3, 1, [120.0, 180.0, None])}},
                       "fixed": {"rules": {"below_q1": scored(0, 3, 0, [None] * 3)}}}},
    ]  # fmt: skip
    assert totals(runs) == {
        "dev": {
            "recordings": 2,
            "windows": 5,
            "detected": 3,
            "false_incidents": 1,
            "median_delay_min": 120.0,
        }
    }
