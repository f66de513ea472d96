"""The incidents table through the real job: scripted episodes sent to Kafka in three
stages, each followed by an availableNow run, as an operator's day would unfold."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT
from contract.alerts import incident_id
from jobs.stream import run
from producer.reading import IsoClock, Reading, encode
from tests.support.alertmanager import Webhook, alertmanager, require_alertmanager
from tests.support.job_settings import available_now
from tests.support.kafka_io import produce

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

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


def notify_once(lake, url: str) -> None:
    """``python -m ops.notify --once`` as an operator (or a cron job) runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "ops.notify", "--once", "--lake", str(lake),
         "--alertmanager-url", url, "--dashboard-url", ""],
        capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Stages:
    """The incidents table after each stage, and what Alertmanager's webhook received."""

    tables: list[dict]
    webhook: Webhook


def notifications(webhook: Webhook) -> Counter:
    """(incident_id, status) -> how many notifications announced that status. An alert
    listed again, unchanged, in a later notification of its group does not count."""
    last: dict[str, str] = {}
    announced: Counter = Counter()
    for payload in webhook.payloads:
        for alert in payload["alerts"]:
            key, status = alert["labels"]["incident_id"], alert["status"]
            if last.get(key) != status:
                announced[key, status] += 1
            last[key] = status
    return announced


@pytest.fixture(scope="module")
def stages(spark, kafka, tmp_path_factory):
    """Sensor hot: hot minutes 0-19, clear, hot again 35-39; silent: quiet 20-44. After
    each stage the job runs availableNow and the notifier syncs a real Alertmanager once."""
    from tests.support.kafka_io import make_topic

    require_alertmanager()
    tmp = tmp_path_factory.mktemp("incidents")
    topic, lake = make_topic(kafka, "incidents"), tmp / "lake"
    settings = available_now(kafka, topic, lake)
    fleet, tables, webhook = Fleet(), [], Webhook()
    plan = [
        [("hot", 0, 20, range(0, 20)), ("silent", 0, 20), ("calm", 0, 20)],
        [("hot", 20, 35), ("calm", 20, 35)],
        [("hot", 35, 50, range(35, 40)), ("silent", 45, 50), ("calm", 35, 50)],
        [],  # nothing new: a rerun of the job and of the notifier
    ]
    try:
        with alertmanager(tmp / "alertmanager", webhook) as am:
            for stage in plan:
                produce(kafka.bootstrap, topic, [m for a in stage for m in fleet.readings(*a)])
                run(settings, spark)
                tables.append(incidents(lake))
                notify_once(lake, am.url)
            yield Stages(tables, webhook)
    finally:
        webhook.close()


def test_hot_for_twenty_minutes_is_one_firing_incident_per_rule(stages) -> None:
    first = stages.tables[0]
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
    second = stages.tables[1]
    assert status(second) == {
        # last hot minute 19 + hold 5; last warm window starts at 17 (3 hot minutes of 5)
        ("hot", "overheat_reading", minute(0)): ("resolved", minute(24), 20),
        ("hot", "sustained_high", minute(-4)): ("resolved", minute(22), 22),
        # the last reading before the silence
        ("silent", "sensor_silent", minute(19) + timedelta(seconds=50)): ("firing", None, 1),
    }
    later = second["hot", "overheat_reading", minute(0)]["updated_at"]
    assert later > stages.tables[0]["hot", "overheat_reading", minute(0)]["updated_at"]


def test_hot_again_is_a_second_incident_and_data_resuming_ends_the_silence(stages) -> None:
    third = stages.tables[2]
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
    assert stages.tables[3] == stages.tables[2]


def test_alertmanager_pages_once_per_change(stages) -> None:
    """One firing and one resolved notification per incident a person must hear of; the
    sustained_high warnings are inhibited by the same sensor's critical overheat
    (conf/alertmanager.yml) and never notified twice; nothing twice after the rerun."""
    ids = {
        name: stages.tables[2][key]["incident_id"]
        for name, key in {
            "hot": ("hot", "overheat_reading", minute(0)),
            "silent": ("silent", "sensor_silent", minute(19) + timedelta(seconds=50)),
            "hot again": ("hot", "overheat_reading", minute(35)),
        }.items()
    }
    webhook = stages.webhook
    webhook.wait_for("resolved", incident_id=ids["hot"])
    webhook.wait_for("resolved", incident_id=ids["silent"])
    # Opened and ended within the third run: the notifier shows it firing for a minute.
    webhook.wait_for("firing", incident_id=ids["hot again"])
    got = notifications(webhook)
    got.pop((ids["hot again"], "resolved"), None)  # due a minute after the third run
    # The sustained_high warnings are muted by the critical incident of the same sensor,
    # which Alertmanager does on a best-effort basis (its issue 2229): at most once each.
    warnings = {k: n for k, n in got.items() if k[0] not in ids.values()}
    assert all(n == 1 for n in warnings.values()), warnings
    got = Counter({k: n for k, n in got.items() if k[0] in ids.values()})
    assert got == {
        (ids["hot"], "firing"): 1,
        (ids["hot"], "resolved"): 1,
        (ids["silent"], "firing"): 1,
        (ids["silent"], "resolved"): 1,
        (ids["hot again"], "firing"): 1,
    }
