"""The sensor reading event: one Kafka message (docs/architecture.md#the-event). The one
definition.

The producer writes events by it, the streaming job builds its Spark schema and its
validation from it, and the tests check both against it: fields and their JSON types, the
valid ranges, the accepted event-time form and the reasons a record is quarantined.
"""

from __future__ import annotations

# Field name -> JSON type, in the order they are written.
FIELDS: dict[str, type] = {
    "event_id": str,
    "sensor_id": str,
    "event_time": str,
    "temperature_c": float,
    "humidity_pct": float,
    "battery_pct": float,
    "seq": int,
}

# Inclusive valid ranges of the numeric fields.
RANGES: dict[str, tuple[float, float]] = {
    "temperature_c": (-60.0, 125.0),
    "humidity_pct": (0.0, 100.0),
    "battery_pct": (0.0, 100.0),
}


# The accepted event_time form: ISO-8601 date and time with a zone, e.g.
# 2026-11-21T10:15:30.123Z or 2026-11-21T11:15:30+01:00.
EVENT_TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"

# Why a message is not a valid reading: the producer labels its malformed messages with
# these, and the job writes them to quarantine.error. Field-specific reasons end in
# ":<field>", e.g. "missing_field:event_time".
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
NULL_VALUE = "null_value"
INVALID_EVENT_TIME = "invalid_event_time"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
OUT_OF_RANGE = "out_of_range"
# Bytes that are not UTF-8 (JSON is UTF-8): quarantine.raw_value then holds them in
# base64, so nothing of them is lost.
INVALID_UTF8 = "invalid_utf8"
# A reading whose Kafka key is not its sensor_id (the key is the sensor: section "the
# event"); a null key is not checked. The bridge keys each message by the sensor its MQTT
# topic names, so this is a device publishing a reading under another sensor's topic.
KEY_MISMATCH = "key_mismatch"
# A reading whose Kafka key is empty: from the bridge, a message on a topic that names no
# sensor (an empty sensor level).
KEY_WITHOUT_SENSOR = "key_without_sensor"
