"""The notifier's real-time lane (ops/alert_stream.py): which incident a real-time alert
belongs to, and, against a real broker and a real Alertmanager, one notification per
episode whichever lane posts it first."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conf.settings import NotifierSettings, load_settings
from contract.alerts import OVERHEAT, alert_id, incident_id, incident_labels
from local_stack.alertmanager import AlertmanagerInfo
from ops.alert_stream import AlertStream, Episodes, stream_alert
from ops.notify import Notifier
from tests.alertmanager import (
    Webhook,
    active_alerts,
    alertmanager,
    incident,
    require_alertmanager,
    sensor,
    upsert_incidents,
    wait_until,
)
from tests.kafka_io import produce

HOLD = timedelta(minutes=5)
T0 = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def minute(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def message(sensor_id: str, start: datetime, value: float = 50.0) -> dict:
    """A real-time message as jobs/realtime/query.py writes it."""
    return {
        "alert_id": alert_id(sensor_id, OVERHEAT, start), "sensor_id": sensor_id,
        "site": "site-north", "rule": OVERHEAT, "severity": "critical",
        "window_start": start.isoformat().replace("+00:00", "Z"),
        "window_end": (start + timedelta(minutes=1)).isoformat().replace("+00:00", "Z"),
        "observed_value": value, "threshold": 45.0, "readings": 1,
        "detected_at": "2026-01-01T00:10:01.000Z", "reading_at": "2026-01-01T00:10:00.900Z",
    }  # fmt: skip


def test_an_alert_opens_the_incident_the_job_will_open_and_extends_it_within_the_hold():
    episodes = Episodes(HOLD)

    first = episodes.incident_for("s1", OVERHEAT, minute(0))
    again = episodes.incident_for("s1", OVERHEAT, minute(4))
    later = episodes.incident_for("s1", OVERHEAT, minute(10))  # 6 minutes after the last

    assert first == incident_id("s1", OVERHEAT, minute(0))  # what the job names it
    assert again == first
    assert later == incident_id("s1", OVERHEAT, minute(10))


def test_the_incident_a_sync_saw_firing_wins():
    episodes = Episodes(HOLD)
    episodes.saw_firing([{"sensor_id": "s1", "rule": OVERHEAT, "incident_id": "inc-1"}])

    assert episodes.incident_for("s1", OVERHEAT, minute(30)) == "inc-1"
    assert episodes.incident_for("s2", OVERHEAT, minute(30)) == incident_id(
        "s2", OVERHEAT, minute(30)
    )


def test_a_real_time_alert_has_its_incident_s_labels():
    row = incident("s1", incident_id=incident_id("s1", OVERHEAT, minute(0)), started_at=minute(0))
    now = minute(1)

    alert = stream_alert(message("s1", minute(0)), row["incident_id"], now, None)

    assert alert["labels"] == incident_labels(row)
    assert alert["startsAt"] == "2026-01-01T00:10:00.000Z"
    assert alert["endsAt"] > "2026-01-01T00:11:00.000Z"


@pytest.fixture
def am(tmp_path: Path) -> Iterator[tuple[AlertmanagerInfo, Webhook]]:
    require_alertmanager()
    hook = Webhook()
    try:
        with alertmanager(tmp_path / "am", hook) as info:
            yield info, hook
    finally:
        hook.close()


def test_one_notification_per_episode_whichever_lane_is_first(kafka, new_topic, am, tmp_path):
    info, webhook = am
    topic, sensor_id, lake = new_topic("alerts", 1), sensor(), tmp_path / "lake"
    settings = load_settings(
        NotifierSettings,
        {"lake": lake, "alertmanager_url": info.url, "notify_interval": 0.5,
         "bootstrap_servers": kafka.bootstrap, "alerts_topic": topic, "dashboard_url": ""},
    )  # fmt: skip
    lines: list[str] = []
    notifier = Notifier(settings, log=lines.append, warn=lines.append)
    notifier.episodes = Episodes(HOLD)
    lane = AlertStream(settings, notifier.episodes, notifier.now, lines.append, lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=lane.run, args=(stop,), daemon=True)
    thread.start()
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    try:
        wait_until(lambda: any("posting the real-time alerts" in x for x in lines), 30, "start")
        hot = [message(sensor_id, start, 50.0 + i) for i in range(3)]  # one minute, 3 readings

        def sent_and_posted() -> bool:
            # Sent again until posted: a consumer that starts at the topic's end may take
            # its position after the first send. Every copy has the same alert_id.
            produce(kafka.bootstrap, topic, [(m["alert_id"], json.dumps(m)) for m in hot])
            return bool(active_alerts(info.url, sensor_id=sensor_id))

        wait_until(sent_and_posted, 60, "the real-time alert in Alertmanager", every=2)
        webhook.wait_for("firing", sensor_id=sensor_id, timeout=30)

        # The job writes the incident; the sync posts it with the same labels.
        row = incident(
            sensor_id, incident_id=incident_id(sensor_id, OVERHEAT, start), started_at=start
        )
        upsert_incidents(lake, [row])
        notifier.sync()
        wait_until(
            lambda: active_alerts(info.url, sensor_id=sensor_id)[0]["annotations"].get(
                "alert_count"
            ),
            15,
            "the incident's annotations on the same alert",
        )
    finally:
        stop.set()
        thread.join(timeout=15)
    assert len(active_alerts(info.url, sensor_id=sensor_id)) == 1
    assert webhook.count("firing", sensor_id=sensor_id) == 1
    assert lane.posted == 1  # the repeats of the minute's alert_id were not posted again
