"""Malformed messages: each variant breaks the event (docs/architecture.md#the-event) in one
way and says how."""

from __future__ import annotations

import json
import random

from contract.event import (
    FIELDS,
    INVALID_EVENT_TIME,
    INVALID_JSON,
    MISSING_FIELD,
    NOT_AN_OBJECT,
    OUT_OF_RANGE,
    RANGES,
    WRONG_TYPE,
)  # fmt: skip

# Labelled with the reason the job must give: invalid_json, missing_field:seq, ...
VARIANTS = (
    INVALID_JSON,
    NOT_AN_OBJECT,
    MISSING_FIELD,
    WRONG_TYPE,
    OUT_OF_RANGE,
    INVALID_EVENT_TIME,
)

# A value of the wrong JSON type for each field.
_WRONG_TYPES: dict[str, tuple[object, ...]] = {
    "event_id": (12345, True),
    "sensor_id": (["sensor-0001"], 7),
    "event_time": (1767225600, {"ts": 1}),
    "temperature_c": ("21.5", "hot", True),
    "humidity_pct": ("40%", False),
    "battery_pct": ("full", [90]),
    "seq": ("12", 12.5),
}
_BAD_TIMES = ("yesterday", "2026-13-45T99:00:00Z", "", "21/11/2026 10:15")


def malform(event: dict[str, object], rng: random.Random) -> tuple[str, str]:
    """Break ``event`` (a valid reading as a dict) in one way; return (payload, label).

    The label is the quarantine reason the job must give: the variant and, where it
    applies, the field, e.g. ``missing_field:event_time`` or ``out_of_range:humidity_pct``.
    """
    variant = rng.choice(VARIANTS)
    if variant == INVALID_JSON:
        text = json.dumps(event)
        # Cut before the closing brace: the object can never be complete.
        return text[: rng.randint(1, len(text) - 1)], variant
    if variant == NOT_AN_OBJECT:
        return json.dumps(rng.choice([list(event.values()), event["sensor_id"], 42])), variant
    broken = dict(event)
    if variant == MISSING_FIELD:
        field = rng.choice(list(FIELDS))
        del broken[field]
    elif variant == WRONG_TYPE:
        field = rng.choice(list(FIELDS))
        broken[field] = rng.choice(_WRONG_TYPES[field])
    elif variant == OUT_OF_RANGE:
        field = rng.choice(list(RANGES))
        low, high = RANGES[field]
        broken[field] = round(
            rng.choice([rng.uniform(low - 200, low - 0.5), rng.uniform(high + 0.5, high + 500)]), 2
        )
    else:
        broken["event_time"] = rng.choice(_BAD_TIMES)
        return json.dumps(broken), INVALID_EVENT_TIME
    return json.dumps(broken), f"{variant}:{field}"
