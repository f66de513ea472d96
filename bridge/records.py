"""An MQTT message as the Kafka record it becomes: the payload unchanged, keyed by the
sensor its topic names, with where and when it arrived as headers (contract/devices.py).

The bridge judges nothing: a payload that is not JSON, or not a reading, goes to Kafka as
it came, and the job quarantines it with its reason; a topic that names no sensor (an
empty level) goes with an empty key, which the job quarantines as ``key_without_sensor``
(and a key naming another sensor than the payload as ``key_mismatch``). Nothing a device
sends is dropped here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT, TopicLayout
from contract.times import iso


@dataclass(frozen=True)
class Record:
    """What is produced to Kafka for one MQTT message."""

    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


def to_record(topic: str, payload: bytes, received_at: datetime, layout: TopicLayout) -> Record:
    """The record of a message on ``topic`` that reached the bridge at ``received_at``."""
    sensor = layout.sensor_of(topic)
    return Record(
        key=b"" if sensor is None else sensor.encode("utf-8"),
        value=bytes(payload),
        headers=(
            (HEADER_MQTT_TOPIC, topic.encode("utf-8")),
            (HEADER_RECEIVED_AT, (iso(received_at) or "").encode("ascii")),
        ),
    )
