"""Property-based: whatever bytes arrive, each record lands once, with a meaningful reason,
and the job agrees with an independent reading of docs/architecture.md#the-event on valid
versus invalid."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from jobs.ingest.parse import parse_records, split_ingested, to_ingested
from tests.support.spec_event import violations

REASON = re.compile(
    r"^(null_value|invalid_utf8|invalid_json|not_an_object|invalid_event_time"
    r"|key_mismatch|key_without_sensor"
    r"|(missing_field|wrong_type):(event_id|sensor_id|event_time|temperature_c|humidity_pct|battery_pct|seq)"
    r"|out_of_range:(temperature_c|humidity_pct|battery_pct))$"
)

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline
VALID = {
    "event_id": "e-1", "sensor_id": "sensor-0001", "event_time": "2026-11-21T10:15:30.123Z",
    "temperature_c": 21.5, "humidity_pct": 40.0, "battery_pct": 88.0, "seq": 12,
}  # fmt: skip

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
numbers = (
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([-60, -60.0001, 125, 125.0001, 0, 100, 100.0001, -0.0, 1e308])
)
times = st.sampled_from([
    "2026-11-21T10:15:30Z", "2026-11-21T10:15:30.5+01:00", "2026-11-21T10:15:30",
    "2026-02-30T10:15:30Z", "2026-11-21 10:15:30Z", "2026-11-21T25:15:30Z", "", "now",
    "2026-11-21T10:15:30.123456789Z", "2026-11-21T10:15:30-23:59",
]) | st.text(max_size=30)  # fmt: skip


@st.composite
def near_valid(draw) -> bytes:
    """A reading with some fields removed, retyped or pushed to their limits."""
    event = dict(VALID)
    for field in draw(st.sets(st.sampled_from(sorted(VALID)), max_size=3)):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            del event[field]
        elif choice == 1:
            event[field] = draw(junk)
        elif choice == 2 and field in ("temperature_c", "humidity_pct", "battery_pct", "seq"):
            event[field] = draw(numbers)
        elif field == "event_time":
            event[field] = draw(times)
    return json.dumps(event).encode()


values = st.one_of(
    st.none(),
    st.binary(max_size=60),
    st.text(max_size=60).map(str.encode),
    junk.map(lambda v: json.dumps(v).encode()),
    near_valid(),
)


def with_time(text: str) -> bytes:
    return json.dumps({**VALID, "event_time": text}).encode()


# Derandomized: CI sees the same examples every run (the suite is deterministic); the
# explicit examples pin the zone-offset limits, which random draws reach only rarely.
@settings(
    max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(batch=st.lists(values, min_size=1, max_size=40))
@example(
    batch=[
        with_time(t)
        for t in (
            "2026-11-21T10:15:30-18:00",
            "2026-11-21T10:15:30+18:00",
            "2026-11-21T10:15:30-18:01",
            "2026-11-21T10:15:30-23:59",
        )
    ]
)
def test_every_record_lands_once_with_a_reason(spark, batch: list[bytes | None]) -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(None, value, 0, offset, stamp) for offset, value in enumerate(batch)]
    records = spark.createDataFrame(
        rows, "key binary, value binary, partition int, offset long, timestamp timestamp"
    )
    parsed = parse_records(records)
    # As ingest divides a batch: one transfer, split on the driver.
    valid, invalid = split_ingested(to_ingested(parsed, F.lit(stamp)).toArrow())
    readings = {r["kafka_offset"]: SimpleNamespace(**r) for r in valid.to_pylist()}
    # Without the raw text: some of it is not UTF-8 (a Python str cannot hold it).
    invalid = invalid.drop_columns(["raw_value"])
    quarantine = {q["kafka_offset"]: SimpleNamespace(**q) for q in invalid.to_pylist()}

    assert not readings.keys() & quarantine.keys()
    assert readings.keys() | quarantine.keys() == set(range(len(batch)))
    for offset, value in enumerate(batch):
        if offset in quarantine:
            assert REASON.match(quarantine[offset].error), quarantine[offset].error
            assert violations(value), (value, quarantine[offset].error)
        else:
            assert not violations(value), (value, violations(value))
            row = readings[offset]
            assert None not in (row.event_id, row.sensor_id, row.event_time, row.seq)
