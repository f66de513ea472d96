"""The notifier's real-time lane (ops/notifier/alert_stream.py): which incident a real-time alert
belongs to, and, against a real broker and a real Alertmanager, one notification per
episode whichever lane posts it first."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conf.paths import RULES_FILE
from conf.settings.base import load_settings
from conf.settings.notifier import NotifierSettings
from contract.alerts import OVERHEAT, alert_id, incident_id, incident_labels
from contract.rules.parsing import read_rules
from jobs.alerting.incidents import Evidence, Incident, reconcile, rule_traits
from local_stack.alertmanager import AlertmanagerInfo
from ops.notifier.alert_stream import AlertStream, Episodes, stream_alert
from ops.notifier.loop import Notifier
from tests.support.alert_messages import message
from tests.support.alertmanager import (
    Webhook,
    active_alerts,
    alertmanager,
    incident,
    require_alertmanager,
    resolved,
    sensor,
    upsert_incidents,
    wait_until,
)
from tests.support.kafka_io import produce

HOLD = timedelta(minutes=5)
TRAITS = rule_traits(read_rules(RULES_FILE))  # overheat_reading: a 5-minute hold
T0 = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def minute(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


def evidence(sensor_id: str, start: datetime) -> Evidence:
    """The alerts row of an overheat alert, as the job's incidents read it."""
    return Evidence(
        alert_id(sensor_id, OVERHEAT, start), sensor_id, "site-north", OVERHEAT, "critical",
        start, 50.0, 45.0,
    )  # fmt: skip


def test_an_alert_opens_the_incident_the_job_will_open_and_extends_it_within_the_hold():
    episodes = Episodes(HOLD)

    first = episodes.incident_for("s1", OVERHEAT, minute(0))
    again = episodes.incident_for("s1", OVERHEAT, minute(4))
    later = episodes.incident_for("s1", OVERHEAT, minute(10))  # 6 minutes after the last

    assert first == incident_id("s1", OVERHEAT, minute(0))  # what the job names it
    assert again == first
    assert later == incident_id("s1", OVERHEAT, minute(10))


def row(incident: str, start: int, last: int, status: str = "firing", end: int | None = None):
    """An incidents row as the sync reads it (the columns Episodes uses)."""
    return {
        "incident_id": incident, "sensor_id": "s1", "rule": OVERHEAT, "status": status,
        "started_at": minute(start), "last_seen_at": minute(last),
        "resolved_at": None if end is None else minute(end),
    }  # fmt: skip


def test_the_incident_a_sync_saw_firing_wins_within_its_hold():
    episodes = Episodes(HOLD)
    episodes.saw([row("inc-1", 20, 28)])

    assert episodes.incident_for("s1", OVERHEAT, minute(30)) == "inc-1"
    assert episodes.incident_for("s2", OVERHEAT, minute(30)) == incident_id(
        "s2", OVERHEAT, minute(30)
    )
    # A whole hold after its last alert: the job resolves it and opens a new one.
    assert episodes.incident_for("s1", OVERHEAT, minute(35)) == incident_id(
        "s1", OVERHEAT, minute(35)
    )


def test_an_alert_of_an_episode_the_table_resolved_is_not_posted():
    """A late reading inside (or just before) a resolved incident: the job counts it into
    that incident, so there is nothing live to page."""
    episodes = Episodes(HOLD)
    episodes.saw([row("inc-1", 20, 22, "resolved", 27)])

    assert episodes.incident_for("s1", OVERHEAT, minute(21)) is None
    assert episodes.incident_for("s1", OVERHEAT, minute(16)) is None  # 4 min before
    assert episodes.incident_for("s1", OVERHEAT, minute(27)) == incident_id(
        "s1", OVERHEAT, minute(27)
    )


@pytest.mark.parametrize("gap", [4, 5])
def test_the_lane_and_the_job_share_the_hold_boundary(gap: int):
    """contract.alerts.same_episode: a gap shorter than the hold continues the episode, a
    whole hold opens the next, in the lane as in the job."""
    episodes = Episodes(HOLD)
    lane = [episodes.incident_for("s1", OVERHEAT, minute(m)) for m in (0, gap)]
    job = reconcile([], [evidence("s1", minute(m)) for m in (0, gap)], TRAITS, minute(30))
    assert {i.incident_id for i in job} == set(lane)
    assert len(set(lane)) == (1 if gap < 5 else 2)


@pytest.mark.parametrize("batches", [[[2], [0], [1]], [[2], [0, 1]]])
def test_out_of_order_alerts_get_one_id_in_the_lane_and_the_job(batches: list[list[int]]):
    """Hot readings of one episode arrive minute 2 first, then 0 and 1: the lane posts
    the episode by minute 2; the job, whichever micro-batches bring them after the first,
    names it the same and counts all three. (Had one micro-batch brought all three, the
    job would name it by minute 0; the sync then posts it under the lane's id: below.)"""
    episodes = Episodes(HOLD)
    arrival = [m for batch in batches for m in batch]
    lane = {episodes.incident_for("s1", OVERHEAT, minute(m)) for m in arrival}
    written: dict[str, Incident] = {}
    seen: list[Evidence] = []
    for batch in batches:
        seen += [evidence("s1", minute(m)) for m in batch]
        changed = reconcile(written.values(), seen, TRAITS, None)
        written.update({i.incident_id: i for i in changed})
    assert lane == {incident_id("s1", OVERHEAT, minute(2))}
    [incident] = written.values()
    assert (incident.incident_id, incident.alert_count) == (lane.pop(), 3)


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


@contextlib.contextmanager
def lane_and_sync(kafka, new_topic, info: AlertmanagerInfo, tmp_path: Path):
    """A notifier (synced by hand) with its real-time lane reading a new alerts topic;
    yields (notifier, lane, topic, lake, lines) once the lane reads."""
    topic, lake = new_topic("alerts", 1), tmp_path / "lake"
    settings = load_settings(
        NotifierSettings,
        {"lake": lake, "alertmanager_url": info.url, "notify_interval": 0.5,
         "bootstrap_servers": kafka.bootstrap, "alerts_topic": topic, "dashboard_url": "",
         "notifier_state_dir": tmp_path / "state"},
    )  # fmt: skip
    lines: list[str] = []
    notifier = Notifier(settings, log=lines.append, warn=lines.append)
    notifier.episodes = Episodes(HOLD)
    lane = AlertStream(settings, notifier.episodes, notifier.now, lines.append, lines.append)
    stop = threading.Event()
    thread = threading.Thread(target=lane.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: any("posting the real-time alerts" in x for x in lines), 30, "start")
        yield notifier, lane, topic, lake, lines
    finally:
        stop.set()
        thread.join(timeout=15)


def send_until_posted(kafka, topic: str, url: str, sent: list[dict]) -> None:
    """Send ``sent`` again until Alertmanager holds the sensor's alert: a consumer that
    starts at the topic's end may take its position after the first send. Every copy has
    the same alert_id."""
    sensor_id = sent[0]["sensor_id"]

    def sent_and_posted() -> bool:
        produce(kafka.bootstrap, topic, [(m["alert_id"], json.dumps(m)) for m in sent])
        return bool(active_alerts(url, sensor_id=sensor_id))

    wait_until(sent_and_posted, 60, "the real-time alert in Alertmanager", every=2)


def test_one_notification_per_episode_whichever_lane_is_first(kafka, new_topic, am, tmp_path):
    info, webhook = am
    sensor_id = sensor()
    start = datetime.now(UTC).replace(second=0, microsecond=0)
    with lane_and_sync(kafka, new_topic, info, tmp_path) as (notifier, lane, topic, lake, _):
        hot = [message(sensor_id, start, 50.0 + i) for i in range(3)]  # one minute, 3 readings
        send_until_posted(kafka, topic, info.url, hot)
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
    assert len(active_alerts(info.url, sensor_id=sensor_id)) == 1
    assert webhook.count("firing", sensor_id=sensor_id) == 1
    assert lane.posted == 1  # the repeats of the minute's alert_id were not posted again


def test_one_page_when_one_micro_batch_brings_an_episode_out_of_order(
    kafka, new_topic, am, tmp_path
):
    """Hot readings of a new episode arrive minute 2 first, then minutes 0 and 1, and one
    micro-batch of the job brings all three: the lane posted the episode by minute 2, the
    job names it by minute 0. Alertmanager still holds one alert, the receiver hears one
    firing and, once the job resolves it, one resolution."""
    info, webhook = am
    sensor_id = sensor()
    zero = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=3)
    at = [zero + timedelta(minutes=m) for m in range(3)]
    with lane_and_sync(kafka, new_topic, info, tmp_path) as (notifier, _, topic, lake, _):
        send_until_posted(kafka, topic, info.url, [message(sensor_id, at[2])])
        webhook.wait_for("firing", sensor_id=sensor_id, timeout=30)
        [lanes] = reconcile([], [evidence(sensor_id, t) for t in at], TRAITS, None)
        assert lanes.incident_id == incident_id(sensor_id, OVERHEAT, at[0])  # the job's name
        row = {k: getattr(lanes, k) for k in incident(sensor_id)}
        upsert_incidents(lake, [{**row, "site": "site-north"}])
        notifier.sync()
        wait_until(
            lambda: (
                active_alerts(info.url, sensor_id=sensor_id)[0]["annotations"].get("alert_count")
                == "3"
            ),
            15,
            "the job's incident on the lane's alert",
        )
        [held] = active_alerts(info.url, sensor_id=sensor_id)
        assert held["labels"]["incident_id"] == incident_id(sensor_id, OVERHEAT, at[2])
        assert lanes.incident_id in held["annotations"]["description"]
        upsert_incidents(lake, [resolved(row)])
        notifier.sync()
        webhook.wait_for("resolved", sensor_id=sensor_id, timeout=30)
    assert not active_alerts(info.url, sensor_id=sensor_id)
    assert webhook.count("firing", sensor_id=sensor_id) == 1
    assert webhook.count("resolved", sensor_id=sensor_id) == 1
