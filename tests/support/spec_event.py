"""docs/architecture.md#the-event, written out independently of the code under test: a test
oracle."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

# docs/architecture.md#the-event: "ISO-8601 with zone (2026-11-21T10:15:30.123Z)": date
# T time [fraction] zone.
_ISO_WITH_ZONE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
# A zone is at most 18 hours from UTC (java.time's range, beyond every real zone);
# "-23:59" is syntax, not a zone.
_MAX_OFFSET = timedelta(hours=18)


def violations(raw: bytes | str | None) -> list[str]:
    """Why a Kafka message value is not a valid reading per docs/architecture.md#the-event
    ([] = valid)."""
    if raw is None:
        return ["null value"]
    try:
        event = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return ["not JSON"]
    if not isinstance(event, dict):
        return ["not an object"]
    problems = []
    strings = ("event_id", "sensor_id", "event_time")
    numbers = {"temperature_c": (-60, 125), "humidity_pct": (0, 100), "battery_pct": (0, 100)}
    for name in (*strings, *numbers, "seq"):
        if name not in event:
            problems.append(f"missing {name}")
    for name in strings:
        if name in event and not isinstance(event[name], str):
            problems.append(f"{name} is not a string")
    for name, (low, high) in numbers.items():
        value = event.get(name)
        if name not in event:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"{name} is not a number")
        elif not low <= value <= high:
            problems.append(f"{name} out of range")
    seq = event.get("seq")
    if "seq" in event and (isinstance(seq, bool) or not isinstance(seq, int)):
        problems.append("seq is not an integer")
    elif isinstance(seq, int) and not -(2**63) <= seq < 2**63:
        problems.append("seq does not fit 64 bits")
    if isinstance(event.get("event_time"), str):
        text = event["event_time"]
        try:
            offset = (
                datetime.fromisoformat(text).utcoffset() if _ISO_WITH_ZONE.fullmatch(text) else None
            )
            if offset is None or abs(offset) > _MAX_OFFSET:
                problems.append("event_time is not ISO-8601 with a zone")
        except ValueError:
            problems.append("event_time unparseable")
    return problems
