"""A generated reading and its encoding as one Kafka message.

The message's fields, types and ranges are the event contract, ``contract/event.py``;
:func:`encode` writes exactly those fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class Reading:
    """One sensor reading as the producer generated it."""

    event_id: str
    sensor_id: str
    event_time: float  # epoch seconds, UTC
    temperature_c: float
    humidity_pct: float
    battery_pct: float
    seq: int


_TEMPLATE = (
    '{"event_id":"%s","sensor_id":"%s","event_time":"%s","temperature_c":%.2f,'
    '"humidity_pct":%.1f,"battery_pct":%.1f,"seq":%d}'
)


class IsoClock:
    """Formats epoch seconds as ``2026-11-21T10:15:30.123Z``, caching the seconds part.

    Readings come in runs within the same second, and strftime is the costly part.
    """

    __slots__ = ("_prefix", "_second")

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def format(self, epoch: float) -> str:
        """ISO-8601 UTC with milliseconds and a ``Z``."""
        millis = round(epoch * 1000)
        second, ms = divmod(millis, 1000)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._prefix}.{ms:03d}Z"


def encode(reading: Reading, event_time: str) -> str:
    """The JSON text of a valid reading whose event time is formatted as ``event_time``.

    The hot path: a template, not json.dumps (every value is ours and needs no escaping).
    """
    return _TEMPLATE % (
        reading.event_id,
        reading.sensor_id,
        event_time,
        reading.temperature_c,
        reading.humidity_pct,
        reading.battery_pct,
        reading.seq,
    )


def as_dict(reading: Reading, clock: IsoClock) -> dict[str, object]:
    """The reading as the JSON object :func:`encode` writes (for malformations)."""
    return {
        "event_id": reading.event_id,
        "sensor_id": reading.sensor_id,
        "event_time": clock.format(reading.event_time),
        "temperature_c": round(reading.temperature_c, 2),
        "humidity_pct": round(reading.humidity_pct, 1),
        "battery_pct": round(reading.battery_pct, 1),
        "seq": reading.seq,
    }
