"""The notifier's real-time lane runs supervised (ops/notifier/alert_stream.py), on a real broker
and a real Alertmanager: a missing alerts topic is said once and shown by
``sensorwatch_notifier_lane_up``; a failure is said once, the lane starts again from the
topic's end with a doubling delay, and posts again."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conf.settings.base import load_settings
from conf.settings.notifier import NotifierSettings
from contract.rules.model import RuleSet
from local_stack.alertmanager import AlertmanagerInfo
from ops.notifier.alert_stream import AlertStream, Episodes
from ops.notifier.metrics import NotifierMetrics
from tests.support.alert_messages import message
from tests.support.alertmanager import (
    Webhook,
    active_alerts,
    alertmanager,
    require_alertmanager,
    sensor,
)
from tests.support.kafka_io import produce
from tests.support.polling import wait_until
from topics.admin import create_topic


@pytest.fixture
def am(tmp_path: Path) -> Iterator[AlertmanagerInfo]:
    require_alertmanager()
    hook = Webhook()
    try:
        with alertmanager(tmp_path / "am", hook) as info:
            yield info
    finally:
        hook.close()


def test_a_missing_topic_and_a_failing_lane_are_said_once_and_the_lane_restarts(
    kafka, am: AlertmanagerInfo, tmp_path: Path
) -> None:
    topic = f"alerts-{uuid.uuid4().hex[:10]}"  # made only later: missing at first
    settings = load_settings(
        NotifierSettings,
        {"lake": tmp_path / "lake", "alertmanager_url": am.url, "dashboard_url": "",
         "bootstrap_servers": kafka.bootstrap, "alerts_topic": topic},
    )  # fmt: skip
    lines: list[str] = []
    metrics = NotifierMetrics()
    failures = [RuntimeError("rules unreadable"), RuntimeError("rules unreadable")]

    def rules() -> RuleSet:
        if failures:  # the first two alerts find the rules broken: the lane fails twice
            raise failures.pop()
        return settings.alert_rules

    lane = AlertStream(
        settings, Episodes(timedelta(minutes=5)), lambda: datetime.now(UTC), lines.append,
        lines.append, metrics=metrics, rules=rules, first_restart=0.2, max_restart=1.0,
    )  # fmt: skip
    lane._health(False)  # as ops.notify.main does before the lane reads

    def up() -> float | None:
        return metrics.registry.get_sample_value("sensorwatch_notifier_lane_up")

    def restarts() -> float:
        return metrics.registry.get_sample_value("sensorwatch_notifier_lane_restarts_total")

    stop = threading.Event()
    thread = threading.Thread(target=lane.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: any("does not exist" in x for x in lines), 30, "the missing topic said")
        assert up() == 0
        assert create_topic(kafka.bootstrap, topic, 1)
        wait_until(lambda: up() == 1, 30, "the lane reading once the topic is there")
        sid = sensor()
        start = datetime.now(UTC).replace(second=0, microsecond=0)

        def posted() -> bool:
            # Sent again until posted: each failure restarts the lane at the topic's end.
            hot = message(sid, start)
            produce(kafka.bootstrap, topic, [(hot["alert_id"], json.dumps(hot))])
            return bool(active_alerts(am.url, sensor_id=sid))

        wait_until(posted, 60, "the alert posted after the lane's restarts", every=1)
    finally:
        stop.set()
        thread.join(timeout=15)
    assert not thread.is_alive()
    assert restarts() == 2
    assert up() == 0  # stopped
    said = [x for x in lines if "the real-time lane failed" in x]
    assert len(said) == 1, lines  # the same failure twice: said once
    assert "RuntimeError: rules unreadable at " in said[0]
    assert sum("does not exist" in x for x in lines) == 1, lines
    assert any(f"the topic {topic} is there" in x for x in lines), lines
