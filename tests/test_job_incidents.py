"""The incidents table through the real job: scripted episodes sent to Kafka in three
stages, each followed by an availableNow run, as an operator's day would unfold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable

from jobs.incidents import incident_id
from jobs.stream import run
from producer.reading import IsoClock, Reading, encode
from tests.conftest import available_now
from tests.kafka_io import produce

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
STEP = 10  # seconds between two readings of one sensor
HOT, NORMAL = 50.0, 20.0


def minute(n: float) -> datetime:
    return T0 + timedelta(minutes=n)


class Fleet:
    """Readings of a few sensors over event-time minutes, with a temperature per minute."""

    def __init__(self) -> None:
        self.seq: dict[str, int] = {}
        self.clock = IsoClock()

    def readings(self, sensor: str, start: int, end: int, hot: range = range(0)) -> list:
        messages = []
        for second in range(start * 60, end * 60, STEP):
            seq = self.seq[sensor] = self.seq.get(sensor, 0) + 1
            temperature = HOT if second // 60 in hot else NORMAL
            reading = Reading(
                f"{sensor}-{seq}", sensor, minute(second / 60).timestamp(), temperature,
                40.0, 90.0, seq,
            )  # fmt: skip
            messages.append((sensor, encode(reading, self.clock.format(reading.event_time))))
        return messages


def incidents(lake) -> dict[tuple[str, str, datetime], dict]:
    rows = DeltaTable(str(lake / "incidents")).to_pyarrow_table().to_pylist()
    assert len({r["incident_id"] for r in rows}) == len(rows), "an incident_id twice"
    return {(r["sensor_id"], r["rule"], r["started_at"]): r for r in rows}


def status(found: dict) -> dict[tuple[str, str, datetime], tuple]:
    return {k: (r["status"], r["resolved_at"], r["alert_count"]) for k, r in found.items()}


@pytest.fixture(scope="module")
def stages(spark, kafka, tmp_path_factory):
    """Sensor hot: hot minutes 0-19, clear, hot again 35-39; silent: quiet 20-44."""
    from tests.conftest import make_topic

    topic, lake = make_topic(kafka, "incidents"), tmp_path_factory.mktemp("incidents") / "lake"
    settings = available_now(kafka, topic, lake)
    fleet, seen = Fleet(), []
    plan = [
        [("hot", 0, 20, range(0, 20)), ("silent", 0, 20), ("calm", 0, 20)],
        [("hot", 20, 35), ("calm", 20, 35)],
        [("hot", 35, 50, range(35, 40)), ("silent", 45, 50), ("calm", 35, 50)],
    ]
    for stage in plan:
        produce(kafka.bootstrap, topic, [m for args in stage for m in fleet.readings(*args)])
        run(settings, spark)
        seen.append(incidents(lake))
    run(settings, spark)  # nothing new: a rerun
    seen.append(incidents(lake))
    return seen


def test_hot_for_twenty_minutes_is_one_firing_incident_per_rule(stages) -> None:
    first = stages[0]
    assert status(first) == {
        ("hot", "overheat_reading", minute(0)): ("firing", None, 20),
        # 5-minute windows averaging 35 or more: starting at minutes -4 (its only readings
        # are minute 0's) to 12 (the watermark, 17:50, has closed those ending by 17).
        ("hot", "sustained_high", minute(-4)): ("firing", None, 17),
    }
    overheat = first["hot", "overheat_reading", minute(0)]
    assert overheat["incident_id"] == incident_id("hot", "overheat_reading", minute(0))
    assert overheat["last_seen_at"] == minute(19)
    assert (overheat["peak_value"], overheat["threshold"]) == (HOT, 45.0)
    assert overheat["severity"] == "critical" and overheat["site"] == "unregistered"


def test_clear_for_longer_than_the_hold_resolves_and_silence_opens(stages) -> None:
    second = stages[1]
    assert status(second) == {
        # last hot minute 19 + hold 5; last warm window starts at 17 (3 hot minutes of 5)
        ("hot", "overheat_reading", minute(0)): ("resolved", minute(24), 20),
        ("hot", "sustained_high", minute(-4)): ("resolved", minute(22), 22),
        # the last reading before the silence
        ("silent", "sensor_silent", minute(19) + timedelta(seconds=50)): ("firing", None, 1),
    }
    later = second["hot", "overheat_reading", minute(0)]["updated_at"]
    assert later > stages[0]["hot", "overheat_reading", minute(0)]["updated_at"]


def test_hot_again_is_a_second_incident_and_data_resuming_ends_the_silence(stages) -> None:
    third = stages[2]
    assert status(third) == {
        ("hot", "overheat_reading", minute(0)): ("resolved", minute(24), 20),
        ("hot", "sustained_high", minute(-4)): ("resolved", minute(22), 22),
        ("silent", "sensor_silent", minute(19) + timedelta(seconds=50)): (
            "resolved",
            minute(45),
            1,
        ),
        ("hot", "overheat_reading", minute(35)): ("resolved", minute(44), 5),
        ("hot", "sustained_high", minute(33)): ("resolved", minute(42), 5),
    }


def test_a_rerun_changes_nothing(stages) -> None:
    assert stages[3] == stages[2]
