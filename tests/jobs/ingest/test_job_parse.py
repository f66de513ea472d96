"""Parsing and validation on static DataFrames: every record gets exactly one outcome."""

from __future__ import annotations

import base64
import json
import random
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from jobs.ingest.parse import parse_records, split_ingested, to_ingested
from jobs.writer.delta_io import collect_rows
from producer.malform import malform
from producer.reading import IsoClock, Reading, as_dict
from tests.support.spec_event import violations

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

VALID = {
    "event_id": "0b5e7f6a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
    "sensor_id": "sensor-0001",
    "event_time": "2026-11-21T10:15:30.123Z",
    "temperature_c": 21.5,
    "humidity_pct": 40.0,
    "battery_pct": 88.0,
    "seq": 12,
}
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def records(spark, values: list[bytes | None]):
    rows = [(None, v, 0, i, NOW) for i, v in enumerate(values)]
    return spark.createDataFrame(
        rows, "key binary, value binary, partition int, offset long, timestamp timestamp"
    )


def with_(**changes) -> bytes:
    event = {**VALID, **changes}
    return json.dumps({k: v for k, v in event.items() if v is not ...}).encode()


CASES = [
    (with_(), None),
    (with_(temperature_c=21), None),  # an integer is a number
    (with_(event_time="2026-11-21T11:15:30+01:00"), None),
    (with_(temperature_c=-60), None),
    (with_(humidity_pct=100), None),
    (None, "null_value"),
    (b'{"event_id": "x", ', "invalid_json"),
    (b"\xff\xfe not utf8 {", "invalid_utf8"),
    (with_(sensor_id="caf\u00e9").replace(b"\\u00e9", b"\xe9"), "invalid_utf8"),
    (b"", "invalid_json"),
    (b"[1, 2, 3]", "not_an_object"),
    (b'"sensor-0001"', "not_an_object"),
    (b"42", "not_an_object"),
    (with_(event_time=...), "missing_field:event_time"),
    (with_(seq=...), "missing_field:seq"),
    (with_(sensor_id=None), "missing_field:sensor_id"),
    (with_(temperature_c="21.5"), "wrong_type:temperature_c"),
    (with_(humidity_pct=True), "wrong_type:humidity_pct"),
    (with_(seq=12.0), "wrong_type:seq"),
    (with_(seq="12"), "wrong_type:seq"),
    (with_(seq=2**70), "wrong_type:seq"),
    (with_(event_id=12345), "wrong_type:event_id"),
    # from_json (the fast path) would make text of these; the thorough path must decide.
    (with_(sensor_id=True), "wrong_type:sensor_id"),
    (with_(sensor_id={"id": 1}), "wrong_type:sensor_id"),
    (with_(event_id=[1]), "wrong_type:event_id"),
    (with_(event_id=-1.5e3), "wrong_type:event_id"),
    # ... while strings that merely look like those are valid.
    (with_(event_id="12345", sensor_id="true"), None),
    (with_(sensor_id="[not a list"), None),
    (with_(event_time=1767225600), "wrong_type:event_time"),
    (with_(event_time="yesterday"), "invalid_event_time"),
    (with_(event_time="2026-13-45T99:00:00Z"), "invalid_event_time"),
    (with_(event_time="2026-11-21T10:15:30"), "invalid_event_time"),  # no zone
    (with_(event_time=""), "invalid_event_time"),
    (with_(temperature_c=125.01), "out_of_range:temperature_c"),
    (with_(temperature_c=-60.5), "out_of_range:temperature_c"),
    (with_(humidity_pct=-0.1), "out_of_range:humidity_pct"),
    (with_(battery_pct=1e30), "out_of_range:battery_pct"),
]


@pytest.fixture(scope="module")
def parsed(spark):
    frame = parse_records(records(spark, [value for value, _ in CASES]))
    # Not the text columns: bad records' may not be UTF-8 (a Python str cannot hold it).
    columns = ["error", "event_time", "temperature_c", "humidity_pct", "battery_pct", "seq"]
    return collect_rows(frame.orderBy("kafka_offset").select(*columns))


@pytest.mark.parametrize("index", range(len(CASES)))
def test_each_record_gets_its_reason(parsed, index: int) -> None:
    value, expected = CASES[index]

    assert parsed[index].error == expected, value
    # The independent oracle agrees on valid versus invalid.
    assert (not violations(value)) == (expected is None), value


def test_valid_reading_columns(parsed) -> None:
    row = parsed[0]

    assert row.event_time == datetime(2026, 11, 21, 10, 15, 30, 123000, tzinfo=UTC)
    assert (row.temperature_c, row.humidity_pct, row.battery_pct, row.seq) == (21.5, 40.0, 88.0, 12)
    assert parsed[2].event_time == datetime(2026, 11, 21, 10, 15, 30, tzinfo=UTC)  # from +01:00


def ingest_split(parsed) -> tuple[list[dict], list[dict]]:
    """Readings and quarantine rows as ingest makes them from a parsed batch; the raw
    text as bytes decoded with replacement (some of it is not UTF-8)."""
    readings, quarantine = split_ingested(to_ingested(parsed, F.lit(NOW)).toArrow())
    return _rows(readings), _rows(quarantine)


def _rows(table: pa.Table) -> list[dict]:
    raw = table.schema.get_field_index("raw_value")
    if raw < 0:  # readings keep no raw text
        return table.to_pylist()
    table = table.set_column(raw, "raw_value", table.column(raw).cast(pa.binary()))
    return [
        {
            **row,
            "raw_value": None
            if row["raw_value"] is None
            else row["raw_value"].decode(errors="replace"),
        }
        for row in table.to_pylist()
    ]


def test_readings_and_quarantine_split_every_record_once(spark) -> None:
    parsed = parse_records(records(spark, [value for value, _ in CASES]))
    readings, quarantine = ingest_split(parsed)

    assert len(readings) + len(quarantine) == len(CASES)
    offsets = [r["kafka_offset"] for r in readings] + [q["kafka_offset"] for q in quarantine]
    assert sorted(offsets) == list(range(len(CASES)))
    assert {q["raw_value"] for q in quarantine if q["error"] == "invalid_json"} >= {
        '{"event_id": "x", '
    }
    assert [q["raw_value"] for q in quarantine if q["error"] == "null_value"] == [None]
    assert {r["ingested_at"] for r in readings + quarantine} == {NOW}
    assert all("raw_value" not in r for r in readings)  # only quarantine keeps the text


def test_a_key_that_is_not_the_reading_s_sensor_is_quarantined_with_its_reason(spark) -> None:
    valid, broken = with_(), b'{"event_id": "x", '
    keyed = [
        (b"sensor-0001", valid, None),
        (None, valid, None),  # no key: the event carries its own sensor_id
        (b"sensor-0002", valid, "key_mismatch"),  # a device under another's topic
        (b"", valid, "key_without_sensor"),  # from the bridge: a topic without a sensor
        (b"sensor-0002", broken, "invalid_json"),  # the payload's own problem first
    ]
    frame = spark.createDataFrame(
        [(key, value, 0, i, NOW) for i, (key, value, _) in enumerate(keyed)],
        "key binary, value binary, partition int, offset long, timestamp timestamp",
    )
    parsed = parse_records(frame)

    rows = parsed.orderBy("kafka_offset").select("error", "sensor_id").collect()
    assert [r.error for r in rows] == [reason for _, _, reason in keyed]
    readings, quarantine = ingest_split(parsed)
    assert [r["kafka_offset"] for r in readings] == [0, 1]
    assert [q["raw_value"] for q in quarantine] == [
        valid.decode(),
        valid.decode(),
        '{"event_id": "x", ',
    ]


def test_bytes_that_are_not_utf8_are_kept_whole_in_base64(spark) -> None:
    payload = b"\x00\x9f\xff\xfe binary \xc3"
    parsed = parse_records(records(spark, [payload]))

    _, quarantine = split_ingested(to_ingested(parsed, F.lit(NOW)).toArrow())
    (row,) = quarantine.to_pylist()
    assert row["error"] == "invalid_utf8"
    assert base64.b64decode(row["raw_value"]) == payload


def test_every_producer_malformation_is_quarantined_with_its_label(spark) -> None:
    rng, clock = random.Random(1), IsoClock()
    reading = Reading("id-1", "sensor-0001", 1767225600.5, 20.0, 40.0, 90.0, 3)
    broken = [malform(as_dict(reading, clock), rng) for _ in range(300)]

    rows = parse_records(records(spark, [p.encode() for p, _ in broken])).orderBy("kafka_offset")

    assert [r.error for r in rows.collect()] == [label for _, label in broken]
