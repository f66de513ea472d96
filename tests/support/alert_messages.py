"""A message of the real-time path as the tests write it to the alerts topic."""

from __future__ import annotations

from datetime import datetime, timedelta

from contract.alerts import OVERHEAT, alert_id


def message(sensor_id: str, start: datetime, value: float = 50.0) -> dict:
    """A real-time message as jobs/queries/realtime.py writes it."""
    return {
        "alert_id": alert_id(sensor_id, OVERHEAT, start), "sensor_id": sensor_id,
        "site": "site-north", "rule": OVERHEAT, "severity": "critical",
        "window_start": start.isoformat().replace("+00:00", "Z"),
        "window_end": (start + timedelta(minutes=1)).isoformat().replace("+00:00", "Z"),
        "observed_value": value, "threshold": 45.0, "readings": 1,
        "detected_at": "2026-01-01T00:10:01.000Z", "reading_at": "2026-01-01T00:10:00.900Z",
    }  # fmt: skip
