"""Drills of the notifier (issue 68): an outage longer than an episode, on real components.

A real Alertmanager (conf/alertmanager.yml, 1-second timings) posts to a webhook receiver
in this process; the notifier runs as users run it (``python -m ops.notify``), following
a real Kafka topic of real-time alerts; the incidents table is written directly with
delta-rs, as the job commits it, and the alerts the real-time path would have sent are
produced to the topic. While the notifier (or Alertmanager) is out, one episode starts
and ends, another starts and still fires, and the topic fills (minutes, or an hour of
event time). After it is back, the receiver must hear of the first once, saying it
already ended, get the second as firing once, and nothing else.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conf.paths import PROJECT_ROOT
from contract.alerts import OVERHEAT, alert_id, incident_id
from contract.times import iso
from local_stack.alertmanager import start, stop
from local_stack.server import free_port
from tests.support.alertmanager import (
    FAST,
    Webhook,
    delivered,
    incident,
    quiet_period,
    require_alertmanager,
    resolved,
    sensor,
    upsert_incidents,
    wait_until,
)
from tests.support.kafka_io import produce
from tests.support.processes import Running

LATE_FIRING = 3  # seconds a late report shows firing


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def iso_z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def hot(sensor_id: str, start: datetime) -> tuple[str, str]:
    """The real-time path's message of an overheat in the minute starting at ``start``."""
    message = {
        "alert_id": alert_id(sensor_id, OVERHEAT, start), "sensor_id": sensor_id,
        "site": "site-north", "rule": OVERHEAT, "severity": "critical",
        "window_start": iso_z(start), "window_end": iso_z(start + timedelta(minutes=1)),
        "observed_value": 51.0, "threshold": 45.0, "readings": 1,
        "detected_at": iso_z(datetime.now(UTC)), "reading_at": iso_z(datetime.now(UTC)),
    }  # fmt: skip
    return message["alert_id"], json.dumps(message)


def episode(sensor_id: str, start: datetime, minutes: int) -> dict[str, Any]:
    """A firing incidents row as the job first writes it, named as the job names it."""
    now = datetime.now(UTC)
    return incident(
        sensor_id, incident_id=incident_id(sensor_id, OVERHEAT, start), started_at=start,
        last_seen_at=start + timedelta(minutes=minutes), created_at=now, updated_at=now,
    )  # fmt: skip


def minutes_of(row: dict[str, Any]) -> list[datetime]:
    """Each minute of an episode, first to last."""
    span = int((row["last_seen_at"] - row["started_at"]).total_seconds() // 60)
    return [row["started_at"] + timedelta(minutes=m) for m in range(span + 1)]


def notifier(lake: Path, url: str, state: Path, bootstrap: str, topic: str) -> Running:
    return Running(
        [sys.executable, "-u", "-m", "ops.notify", "--lake", str(lake), "--alertmanager-url", url,
         "--interval", "0.5", "--dashboard-url", "", "--metrics-port", "0",
         "--bootstrap-servers", bootstrap, "--alerts-topic", topic,
         "--notifier-state-dir", str(state), "--late-firing", str(LATE_FIRING)],
        cwd=PROJECT_ROOT,
    )  # fmt: skip


def heard(webhook: Webhook) -> list[tuple[str, str, str]]:
    """(status, sensor_id, late label) of every alert in every notification, in order."""
    return [
        (alert["status"], alert["labels"]["sensor_id"], alert["labels"].get("late", ""))
        for payload in webhook.payloads
        for alert in payload["alerts"]
    ]


# notifier: SIGKILLed, minutes of alerts on the topic meanwhile; notifier-hour-backlog:
# stopped cleanly (an upgrade: its consumer would commit its offsets then), an hour of
# event time on the topic meanwhile; alertmanager: Alertmanager stopped instead.
@pytest.mark.parametrize("out", ["notifier", "notifier-hour-backlog", "alertmanager"])
def test_an_outage_longer_than_an_episode_loses_no_page_and_pages_nothing_that_ended(
    kafka, new_topic, webhook: Webhook, tmp_path: Path, out: str
) -> None:
    require_alertmanager()
    lake, am_dir, state = tmp_path / "lake", tmp_path / "am", tmp_path / "state"
    topic = new_topic("alerts", 1)
    am = start(am_dir, free_port(), webhook_url=webhook.url, timings=FAST)
    # Before: an episode fires and is paged; the lane takes its real-time alert.
    before, ended, firing = sensor(), sensor(), sensor()
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    paged = episode(before, now, 0)  # named as its real-time alert, whichever lane is first
    upsert_incidents(lake, [paged])
    running = notifier(lake, am.url, state, kafka.bootstrap, topic)
    try:
        running.wait_for_line(lambda line: "from the topic's end" in line, 60, "the lane")
        wait_until(
            lambda: produce(kafka.bootstrap, topic, [hot(before, now)]) and webhook.count(
                "firing", sensor_id=before) >= 1, 30, "the first episode paged", every=1,
        )  # fmt: skip
        wait_until(lambda: delivered(am.url) >= 1, 30, "Alertmanager to log it delivered")

        # The outage.
        if out == "alertmanager":
            stop(am_dir)  # a clean stop: Alertmanager keeps its notification log
            running.wait_for_line(lambda line: "not reachable" in line, 60, "the warning")
        elif out == "notifier":
            running.kill()  # SIGKILL: no clean stop, nothing said
            running.finish(timeout=30)
        else:
            running.terminate()
            assert running.finish(timeout=30) == 0, running.lines
        span = 60 if out == "notifier-hour-backlog" else 4
        first = episode(ended, now - timedelta(minutes=span + 20), span)
        second = episode(firing, now - timedelta(minutes=span), span)
        upsert_incidents(lake, [first])
        first = resolved(first, resolved_at=first["last_seen_at"] + timedelta(minutes=5))
        upsert_incidents(lake, [first])
        upsert_incidents(lake, [second])
        # What the real-time path sent meanwhile: every minute of both, each one repeated.
        backlog = [hot(s["sensor_id"], m) for s in (first, second) for m in minutes_of(s)]
        produce(kafka.bootstrap, topic, backlog + backlog)

        if out == "alertmanager":
            start(am_dir, am.port, webhook_url=webhook.url, timings=FAST)
        else:
            running = notifier(lake, am.url, state, kafka.bootstrap, topic)
        webhook.wait_for("firing", sensor_id=ended, late="true", timeout=60)
        webhook.wait_for("resolved", sensor_id=ended, late="true", timeout=60)
        webhook.wait_for("firing", sensor_id=firing, timeout=60)
        quiet_period(webhook)
    finally:
        running.kill()
        stop(am_dir)

    assert sorted(heard(webhook)) == sorted(
        [
            ("firing", before, ""),
            ("firing", ended, "true"),
            ("resolved", ended, "true"),
            ("firing", firing, ""),
        ]
    ), (heard(webhook), {"before": before, "ended": ended, "firing": firing}, running.output())
    (_, late), *_ = webhook.notified(sensor_id=ended, late="true")
    assert late["labels"]["incident_id"] == first["incident_id"]
    notes = late["annotations"]
    assert notes["summary"].startswith("ENDED at ")
    assert notes["ended_at"] == iso(first["resolved_at"])
    because = "Alertmanager at" if out == "alertmanager" else "the notifier was not running"
    assert "already ended" in notes["late"] and because in notes["late"], notes["late"]
    [(_, live)] = webhook.notified(sensor_id=firing)
    assert live["labels"]["incident_id"] == second["incident_id"]
