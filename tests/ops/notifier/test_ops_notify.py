"""ops.notify against a real Alertmanager: what reaches the webhook, and what does not.

Alertmanager runs with the project's config (conf/alertmanager.yml) and 1-second timings;
its receiver posts to a webhook in this process. Each test uses sensors of its own, so
the tests can share one Alertmanager (the outage test runs its own, to stop it).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conf.paths import PROJECT_ROOT, RULES_FILE
from conf.settings.base import load_settings
from conf.settings.notifier import NotifierSettings
from contract.rules.parsing import read_rules
from local_stack.alertmanager import AlertmanagerInfo, start, stop
from local_stack.server import free_port
from ops.notifier.alert_stream import Episodes
from ops.notifier.incident_alerts import incident_alert
from ops.notifier.loop import Notifier
from ops.notifier.metrics import NotifierMetrics
from tests.support.alertmanager import (
    FAST,
    Webhook,
    active_alerts,
    alertmanager,
    delivered,
    incident,
    metric,
    quiet_period,
    require_alertmanager,
    resolved,
    sensor,
    upsert_incidents,
    wait_until,
)
from tests.support.processes import Running

DASHBOARD = "http://dashboard.example:8080"


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory, webhook: Webhook) -> Iterator[AlertmanagerInfo]:
    require_alertmanager()
    with alertmanager(tmp_path_factory.mktemp("alertmanager"), webhook) as info:
        yield info


def settings(lake: Path, url: str, **overrides: Any) -> NotifierSettings:
    # The notifier's kept instant beside the test's lake, not in the project's var/.
    given = {"lake": lake, "alertmanager_url": url, "notify_interval": 0.5,
             "notifier_state_dir": lake.parent / "notifier-state"}  # fmt: skip
    return load_settings(NotifierSettings, {**given, "dashboard_url": DASHBOARD, **overrides})


def notifier(lake: Path, url: str, lines: list[str] | None = None, **kw: Any) -> Notifier:
    """A notifier in this process; what it prints goes to ``lines``."""
    out = lines if lines is not None else []
    return Notifier(settings(lake, url), log=out.append, warn=out.append, **kw)


def notify_once(lake: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """``python -m ops.notify --once`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ops.notify", "--once", "--lake", str(lake),
         "--alertmanager-url", url, "--dashboard-url", DASHBOARD,
         "--notifier-state-dir", str(lake.parent / "state"),
         *flags],
        capture_output=True, text=True, timeout=90, cwd=PROJECT_ROOT,
    )  # fmt: skip


def test_each_change_of_an_incident_is_notified_once(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    lake, sid = tmp_path / "lake", sensor()
    first = incident(sid, site="site-north", peak_value=47.5, threshold=45.0)
    upsert_incidents(lake, [first])

    notifier(lake, am.url).sync()

    webhook.wait_for("firing", incident_id=first["incident_id"])
    (_, alert), *_ = webhook.notified(incident_id=first["incident_id"])
    assert alert["labels"] == {
        "alertname": "overheat_reading",
        "severity": "critical",
        "sensor_id": sid,
        "site": "site-north",
        "incident_id": first["incident_id"],
    }
    notes = alert["annotations"]
    assert notes["summary"].startswith(f"{sid} @ site-north: overheat_reading (critical)")
    assert "peak 47.5 °C (threshold 45.0 °C)" in notes["summary"]
    assert (notes["peak_value"], notes["threshold"]) == ("47.5 °C", "45.0 °C")
    assert notes["dashboard_url"] == DASHBOARD and alert["generatorURL"] == DASHBOARD
    assert {"description", "started_at", "last_seen_at"} <= notes.keys()

    # The notifier restarted (a new process keeps no state) and syncing again: Alertmanager
    # already notified these labels, so nothing is sent twice.
    for _ in range(3):
        notifier(lake, am.url).sync()
    quiet_period(webhook)
    assert webhook.count("firing", incident_id=first["incident_id"]) == 1

    upsert_incidents(lake, [resolved(first)])
    notifier(lake, am.url).sync()

    webhook.wait_for("resolved", incident_id=first["incident_id"])
    assert not active_alerts(am.url, sensor_id=sid)

    # A new episode of the same sensor and rule: a new incident_id, a new notification.
    second = incident(sid)
    upsert_incidents(lake, [second])
    for _ in range(3):
        notifier(lake, am.url).sync()

    webhook.wait_for("firing", incident_id=second["incident_id"])
    quiet_period(webhook)
    assert webhook.count("firing", incident_id=first["incident_id"]) == 1
    assert webhook.count("firing", incident_id=second["incident_id"]) == 1
    # The first episode's resolution was announced once on its own; Alertmanager may list
    # it again among the group's alerts in the notification that announces the second.
    resolutions = [
        payload
        for payload in webhook.payloads
        if any(a["labels"].get("incident_id") == first["incident_id"] for a in payload["alerts"])
        and payload["status"] == "resolved"
    ]
    assert len(resolutions) == 1
    assert [a["labels"]["incident_id"] for a in active_alerts(am.url, sensor_id=sid)] == [
        second["incident_id"]
    ]


def test_an_incident_written_resolved_is_notified_firing_then_resolved(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    """It opened and ended within one micro-batch (or one availableNow run): Alertmanager
    notifies nobody of an alert it never saw firing, so the notifier shows it firing
    briefly; every sync posts the same, so a second pass sends nothing more."""
    lake, sid = tmp_path / "lake", sensor()
    now = datetime.now(UTC)
    short = resolved(incident(sid, rule="sensor_silent", created_at=now), updated_at=now)
    upsert_incidents(lake, [short])
    brief = timedelta(seconds=4)

    notifier(lake, am.url, brief_firing=brief).sync()
    webhook.wait_for("firing", incident_id=short["incident_id"])
    while datetime.now(UTC) < now + brief:  # syncs while it still shows firing
        notifier(lake, am.url, brief_firing=brief).sync()
        time.sleep(0.5)  # a poll interval, bounded by the brief firing
    webhook.wait_for("resolved", incident_id=short["incident_id"])
    for _ in range(2):
        notifier(lake, am.url, brief_firing=brief).sync()
    quiet_period(webhook)
    assert webhook.count("firing", incident_id=short["incident_id"]) == 1
    assert webhook.count("resolved", incident_id=short["incident_id"]) == 1
    assert not active_alerts(am.url, sensor_id=sid)


def test_a_silent_sensor_fires_then_resolves_through_the_command_line(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    lake, sid = tmp_path / "lake", sensor()
    silent = incident(sid, rule="sensor_silent", peak_value=600.0, threshold=300.0)
    upsert_incidents(lake, [silent])

    done = notify_once(lake, am.url)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("notify: 1 firing, 0 resolved -> Alertmanager"), done.stdout
    webhook.wait_for("firing", incident_id=silent["incident_id"])
    (_, alert), *_ = webhook.notified(incident_id=silent["incident_id"])
    assert alert["labels"]["alertname"] == "sensor_silent"
    assert alert["labels"]["severity"] == "warning"
    assert "silent for 600 s (threshold 300 s)" in alert["annotations"]["summary"]

    upsert_incidents(lake, [resolved(silent)])
    done = notify_once(lake, am.url)

    assert done.returncode == 0, done.stderr
    assert "0 firing, 1 resolved" in done.stdout
    webhook.wait_for("resolved", incident_id=silent["incident_id"])
    assert notify_once(lake, am.url).returncode == 0  # once more: nothing new
    quiet_period(webhook)
    assert webhook.count("firing", incident_id=silent["incident_id"]) == 1
    assert webhook.count("resolved", incident_id=silent["incident_id"]) == 1


def test_only_firing_and_recently_resolved_incidents_are_posted(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    lake, now = tmp_path / "lake", datetime.now(UTC)
    firing = incident(sensor())
    recent = resolved(incident(sensor()), updated_at=now - timedelta(minutes=5))
    old = resolved(
        incident(sensor(), started_at=now - timedelta(hours=3)),
        resolved_at=now - timedelta(hours=2),
        updated_at=now - timedelta(hours=2),  # beyond the default lookback of one hour
    )
    # Separate commits, as the job makes them: the old row's file is not read at all.
    upsert_incidents(lake, [old])
    upsert_incidents(lake, [firing, recent])
    received = {s: metric(am.url, "alertmanager_alerts_received_total", status=s)
                for s in ("firing", "resolved")}  # fmt: skip

    result = notifier(lake, am.url).sync()

    assert result.firing == {firing["incident_id"]}
    assert result.resolved == {recent["incident_id"]}
    assert metric(am.url, "alertmanager_alerts_received_total", status="firing") == (
        received["firing"] + 1
    )
    assert metric(am.url, "alertmanager_alerts_received_total", status="resolved") == (
        received["resolved"] + 1
    )
    assert [a["labels"]["incident_id"] for a in active_alerts(am.url, site="site-north")
            if a["labels"]["sensor_id"] in (firing["sensor_id"], old["sensor_id"])] == [
        firing["incident_id"]
    ]  # fmt: skip


def test_a_critical_overheat_inhibits_the_same_sensors_sustained_warning(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    lake, sid = tmp_path / "lake", sensor()
    critical = incident(sid, rule="overheat_reading")
    upsert_incidents(lake, [critical])
    notifier(lake, am.url).sync()
    webhook.wait_for("firing", incident_id=critical["incident_id"])
    # As the job raises them: a closed 5-minute window comes after the hot reading.
    warning = incident(sid, rule="sustained_high", peak_value=38.2, threshold=35.0)
    upsert_incidents(lake, [warning])

    notifier(lake, am.url).sync()

    inhibited = wait_until(
        lambda: [a for a in active_alerts(am.url, sensor_id=sid, alertname="sustained_high")
                 if a["status"]["inhibitedBy"]],
        10, "the sustained_high alert inhibited",
    )  # fmt: skip
    assert inhibited[0]["status"]["state"] == "suppressed"
    quiet_period(webhook)
    assert webhook.count("firing", incident_id=warning["incident_id"]) == 0


@pytest.mark.slow  # a drill: Alertmanager stopped, then started again
def test_an_alertmanager_outage_delays_notifications_and_loses_none(
    webhook: Webhook, tmp_path: Path
) -> None:
    require_alertmanager()
    lake, am_dir, port = tmp_path / "lake", tmp_path / "am", free_port()
    ends, keeps = incident(sensor()), incident(sensor(), rule="sustained_high")
    upsert_incidents(lake, [ends, keeps])
    lines: list[str] = []
    stop_notifier = threading.Event()
    info = start(am_dir, port, webhook_url=webhook.url, timings=FAST)
    metrics = NotifierMetrics()
    loop = notifier(lake, info.url, lines, max_backoff=1.0, metrics=metrics)

    def failed_syncs() -> float:
        return metrics.registry.get_sample_value("sensorwatch_notifier_sync_failures_total")

    thread = threading.Thread(target=loop.run, args=(stop_notifier,), daemon=True)
    thread.start()
    try:
        webhook.wait_for("firing", incident_id=ends["incident_id"])
        webhook.wait_for("firing", incident_id=keeps["incident_id"])
        # The webhook holds a notification before Alertmanager has its answer, and
        # Alertmanager logs it as sent (the log its restart reads) only once it has:
        # stopped in between, it sent the firing again after the restart (CI saw 2).
        wait_until(
            lambda: delivered(info.url) >= 2, 60,
            "Alertmanager to count both firing notifications delivered",
            detail=lambda: f"{delivered(info.url):.0f} delivered",
        )  # fmt: skip

        stop(am_dir)  # a clean stop: Alertmanager writes its notification log
        wait_until(lambda: any("not reachable" in line for line in lines), 60, "the warning")
        upsert_incidents(lake, [resolved(ends)])  # resolves while Alertmanager is down
        # Several retries fail with the resolved incident waiting (the backoff is 1 s here).
        retried_from = failed_syncs()
        wait_until(
            lambda: failed_syncs() >= retried_from + 3, 60,
            "three more syncs to fail while Alertmanager is down",
            detail=lambda: f"{failed_syncs() - retried_from:.0f} failed",
        )  # fmt: skip
        start(am_dir, port, webhook_url=webhook.url, timings=FAST)

        webhook.wait_for("resolved", incident_id=ends["incident_id"])
        wait_until(lambda: any("answers again" in line for line in lines), 60, "back line")
        quiet_period(webhook)
    finally:
        stop_notifier.set()
        thread.join(timeout=15)
        stop(am_dir)
    assert not thread.is_alive()
    assert webhook.count("firing", incident_id=ends["incident_id"]) == 1
    assert webhook.count("resolved", incident_id=ends["incident_id"]) == 1
    # Still firing across the restart: the persisted notification log knows it was sent.
    assert webhook.count("firing", incident_id=keeps["incident_id"]) == 1
    assert sum("not reachable" in line for line in lines) == 1, lines
    assert sum("answers again" in line for line in lines) == 1, lines


def test_without_lake_table_or_rows_there_is_nothing_to_send(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # never asked: nothing to send

    no_lake = notify_once(tmp_path / "missing", nowhere)
    (tmp_path / "lake").mkdir()
    no_table = notify_once(tmp_path / "lake", nowhere)

    assert (no_lake.returncode, no_table.returncode) == (0, 0), no_lake.stderr + no_table.stderr
    assert "no lake at" in no_lake.stdout and "nothing to send" in no_lake.stdout
    assert "no incidents table" in no_table.stdout
    # A table with only old resolved incidents: nothing to post either.
    old = datetime.now(UTC) - timedelta(days=2)
    upsert_incidents(tmp_path / "lake", [resolved(incident(sensor()), updated_at=old)])
    lines: list[str] = []
    assert notifier(tmp_path / "lake", nowhere, lines).run_once(threading.Event()) == 0
    assert lines == ["notify: no firing or recently resolved incidents: nothing to send"]


def test_once_gives_up_when_alertmanager_does_not_answer(tmp_path: Path) -> None:
    lake, lines = tmp_path / "lake", []
    upsert_incidents(lake, [incident(sensor())])
    nowhere = f"http://127.0.0.1:{free_port()}"

    code = notifier(lake, nowhere, lines, once_timeout=2.0).run_once(threading.Event())

    assert code == 1
    assert len(lines) == 2, lines
    assert f"Alertmanager at {nowhere} is not reachable" in lines[0] and "retrying" in lines[0]
    assert "did not answer within 2s" in lines[1] and "nothing was sent" in lines[1]


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_notifier_cleanly(
    am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path, how: str
) -> None:
    lake = tmp_path / "lake"
    firing = incident(sensor())
    upsert_incidents(lake, [firing])
    running = Running(
        [sys.executable, "-u", "-m", "ops.notify", "--lake", str(lake),
         "--alertmanager-url", am.url, "--interval", "0.5",
         "--realtime-alerts", "false",  # the incidents' loop alone
         "--notifier-state-dir", str(tmp_path / "state")],
        cwd=PROJECT_ROOT,
    )  # fmt: skip
    try:
        running.wait_for_line(lambda line: line.startswith("notify: 1 firing, 0 resolved"), 120)
        webhook.wait_for("firing", incident_id=firing["incident_id"])
        upsert_incidents(lake, [resolved(firing)])
        running.wait_for_line(lambda line: "0 firing, 1 resolved" in line, 120)
        if how == "SIGTERM":
            running.terminate()
        else:
            running.interrupt_group()

        code = running.finish(timeout=30)
    finally:
        running.kill()

    assert code == 0, running.lines
    assert running.lines[-1] == "notify: stopped"
    assert not any("Traceback" in line for line in running.lines), running.lines
    # Quiet between changes: where its metrics are, the start line, one line per change,
    # the stop line.
    assert running.lines[0].startswith("notify: metrics at http://127.0.0.1:"), running.lines
    assert len(running.lines) == 5, running.lines


def test_alert_times_follow_the_wall_clock_whatever_the_event_clock() -> None:
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    future = incident("s-1", started_at=now + timedelta(days=30), updated_at=now)
    past = incident("s-1", started_at=now - timedelta(days=300), updated_at=now)

    firing = incident_alert(future, now, interval=600.0)
    assert firing["startsAt"] == "2026-11-23T12:00:00.000Z"  # never in the future
    assert firing["endsAt"] == "2026-11-23T12:40:00.000Z"  # 4 x interval > 15 minutes
    assert incident_alert(past, now, interval=10.0)["endsAt"] == "2026-11-23T12:15:00.000Z"

    done = resolved(past, updated_at=now - timedelta(minutes=3))
    alert = incident_alert(done, now, interval=10.0)
    assert alert["startsAt"] == "2026-01-27T12:00:00.000Z"
    assert alert["endsAt"] == "2026-11-23T11:57:00.000Z"  # when the job resolved it
    later = resolved(future, updated_at=now + timedelta(minutes=3))
    assert incident_alert(later, now, 10.0)["endsAt"] == "2026-11-23T12:00:00.000Z"
    assert "dashboard_url" not in alert["annotations"] and "generatorURL" not in alert


# A receiver of the test's own: every alert of one rule and sensor in one group, both
# statuses sent, the way a team routes by sensor.
OWN_GROUPING = """
route:
  receiver: team
  group_by: [alertname, sensor_id]
  group_wait: ${GROUP_WAIT}
  group_interval: ${GROUP_INTERVAL}
  repeat_interval: ${REPEAT_INTERVAL}
receivers:
  - name: team
    webhook_configs: ${WEBHOOK_CONFIGS}
"""


@pytest.fixture
def grouped_am(tmp_path: Path, webhook: Webhook) -> Iterator[AlertmanagerInfo]:
    require_alertmanager()
    config = tmp_path / "own-grouping.yml"
    config.write_text(OWN_GROUPING, encoding="utf-8")
    info = start(tmp_path / "am", free_port(), webhook_url=webhook.url, config=config,
                 timings=FAST)  # fmt: skip
    try:
        yield info
    finally:
        stop(tmp_path / "am")


def each_status_once(webhook: Webhook, *incident_ids: str) -> dict[str, list[str]]:
    """Per incident, the statuses it was notified with, in the order received."""
    return {i: [status for status, _ in webhook.notified(incident_id=i)] for i in incident_ids}


def end_the_second_and_check(
    lake: Path, url: str, webhook: Webhook, first: dict[str, Any], second: dict[str, Any]
) -> None:
    """Resolve the second episode, sync on, and check that the receiver got each
    episode's firing and resolution exactly once."""
    syncs(lake, url)
    upsert_incidents(lake, [resolved(second)])
    syncs(lake, url)
    webhook.wait_for("resolved", incident_id=second["incident_id"])
    syncs(lake, url)
    quiet_period(webhook)
    assert each_status_once(webhook, first["incident_id"], second["incident_id"]) == {
        first["incident_id"]: ["firing", "resolved"],
        second["incident_id"]: ["firing", "resolved"],
    }


def syncs(lake: Path, url: str, n: int = 3) -> None:
    """``n`` notifier passes, each a fresh process's worth of state (none)."""
    for _ in range(n):
        notifier(lake, url).sync()


def test_a_second_episode_within_the_lookback_notifies_each_status_once(
    grouped_am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    """The earlier episode's resolution is not sent again with the later one's firing,
    and the later one fires once, though both lie within resolved_lookback."""
    lake, sid = tmp_path / "lake", sensor()
    first = incident(sid, created_at=datetime.now(UTC))  # the job writes it now
    upsert_incidents(lake, [first])
    syncs(lake, grouped_am.url)
    webhook.wait_for("firing", incident_id=first["incident_id"])
    upsert_incidents(lake, [resolved(first)])
    syncs(lake, grouped_am.url)
    webhook.wait_for("resolved", incident_id=first["incident_id"])
    syncs(lake, grouped_am.url)  # the first one is still within the lookback

    second = incident(sid, created_at=datetime.now(UTC))
    upsert_incidents(lake, [second])
    syncs(lake, grouped_am.url)
    webhook.wait_for("firing", incident_id=second["incident_id"])
    end_the_second_and_check(lake, grouped_am.url, webhook, first, second)


def test_an_episode_that_ends_as_the_next_begins_notifies_each_status_once(
    grouped_am: AlertmanagerInfo, webhook: Webhook, tmp_path: Path
) -> None:
    """The job resolves an episode in the batch that opens the next one: one sync posts
    both, and the receiver hears of each change once."""
    lake, sid = tmp_path / "lake", sensor()
    first = incident(sid, created_at=datetime.now(UTC))  # the job writes it now
    upsert_incidents(lake, [first])
    syncs(lake, grouped_am.url)
    webhook.wait_for("firing", incident_id=first["incident_id"])

    second = incident(sid, created_at=datetime.now(UTC))
    upsert_incidents(lake, [resolved(first), second])
    syncs(lake, grouped_am.url)
    webhook.wait_for("firing", incident_id=second["incident_id"])
    webhook.wait_for("resolved", incident_id=first["incident_id"])
    end_the_second_and_check(lake, grouped_am.url, webhook, first, second)


def test_a_rule_s_annotations_and_unit_come_from_the_rules_file() -> None:
    """battery_low (the default file's example) has a summary of its own and values in
    %; overheat_reading keeps SensorWatch's summary and gains its runbook_url."""
    rules = read_rules(RULES_FILE)
    now = datetime.now(UTC)
    battery = incident("sensor-0007", rule="battery_low", peak_value=9.5, threshold=15.0)
    hot = incident("sensor-0008")

    notes = incident_alert(battery, now, 10, rules=rules)["annotations"]
    assert notes["summary"] == "sensor-0007 at site-north: battery at 9.5 % (threshold 15.0 %)"
    assert (notes["peak_value"], notes["threshold"]) == ("9.5 %", "15.0 %")
    assert "runbook_url" not in notes
    notes = incident_alert(hot, now, 10, rules=rules)["annotations"]
    assert notes["summary"].startswith("sensor-0008 @ site-north: overheat_reading (critical)")
    assert notes["runbook_url"] == "docs/alerting.md#rules"


def test_an_edit_of_the_rules_file_reaches_the_next_sync_and_the_real_time_holds(
    am: AlertmanagerInfo, tmp_path: Path
) -> None:
    """The notifier follows the rules file as the job does: an edited summary is what the
    next sync posts, an edited resolve_after what the real-time lane holds an incident
    for; a bad edit is refused in one line and the last good rules go on."""
    lake, sid = tmp_path / "lake", sensor()
    path = tmp_path / "rules.toml"
    text = RULES_FILE.read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    lines: list[str] = []
    given = Notifier(
        settings(lake, am.url, rules=path), log=lines.append, warn=lines.append,
        episodes=Episodes(timedelta(minutes=5)),
    )  # fmt: skip
    first = given.rules()

    def refused() -> bool:
        given.rules()
        return any("the edit is refused" in line for line in lines)

    row = incident(sid, rule="battery_low", peak_value=9.5, threshold=15.0)
    upsert_incidents(lake, [row])

    path.write_text("[[rule]]\nname = 'broken'\n", encoding="utf-8")
    wait_until(refused, 30, "the bad edit refused")
    assert given.rules() is first
    edited = text.replace(
        'summary = "{sensor_id} at {site}: battery at {value} (threshold {threshold})"',
        'summary = "replace the battery of {sensor_id}"',
    ).replace('resolve_after = "30 minutes"', 'resolve_after = "2 hours"')
    path.write_text(edited, encoding="utf-8")
    wait_until(lambda: given.rules() is not first or None, 30, "the edit taken up")

    assert given.sync().state == "posted"
    [alert] = active_alerts(am.url, incident_id=row["incident_id"])
    assert alert["annotations"]["summary"] == f"replace the battery of {sid}"
    assert given.episodes is not None
    assert given.episodes.holds["battery_low"] == timedelta(hours=2)
    assert next(line for line in lines if "the edit is refused" in line).startswith(
        f"rules file {path}: rule 'broken': "
    )
    assert sum("rules " in line and " -> " in line for line in lines) == 1


def test_a_deviation_incident_says_the_sensor_s_own_normal(tmp_path: Path) -> None:
    """Issue 69: the alert says what the baseline was. temperature_off_normal (3
    deviations, at least 0.8 °C): the notifier names the newest baseline of the windows
    query's current writer, which learned nothing since the breach began."""
    import json

    from lake.reader import LakeReader
    from ops.baselines import baseline_notes
    from ops.notifier.incident_alerts import BASELINE
    from tests.support.ops_lake import append_rows

    lake = tmp_path / "lake"
    learned = {"rule": "temperature_off_normal", "sensor_id": "s-1", "var": 1.0,
               "params": json.dumps(["temperature_c", 3600.0, 900.0]), "learned_s": 3600.0,
               "taught": 60, "breach_since": datetime(2026, 1, 1, 0, 50, tzinfo=UTC),
               "last_pane": datetime(2026, 1, 1, 1, 0, tzinfo=UTC)}  # fmt: skip
    append_rows(lake, "_baselines", [
        {**learned, "writer": "windows-now", "batch_id": 4, "mean": 21.0},
        {**learned, "writer": "windows-now", "batch_id": 2, "mean": 5.0},  # older
        {**learned, "writer": "windows-old", "batch_id": 9, "mean": 9.0},  # an old checkpoint's
    ])  # fmt: skip
    checkpoint = lake / "_checkpoints" / "windows"
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"now"}\n', encoding="utf-8")
    rules = read_rules(RULES_FILE)
    rows = [
        incident("s-1", "temperature_off_normal", peak_value=26.0, threshold=24.0),
        incident("s-2", "temperature_off_normal"),  # nothing learned: nothing said
        incident("s-1", "overheat_reading"),
    ]
    notes = baseline_notes(LakeReader(lake), rows, rules.rules)
    said = (
        "mean 21.00 °C, deviation 1.00 °C, band 18.00 to 24.00 °C (3 deviations), "
        "learned from 60 panes"
    )
    assert notes == {("s-1", "temperature_off_normal"): said}
    # Resolved, or back in band (the baseline learns again): no longer what was compared.
    resolved = {**rows[0], "status": "resolved"}
    assert baseline_notes(LakeReader(lake), [resolved], rules.rules) == {}

    row = {**rows[0], BASELINE: notes[("s-1", "temperature_off_normal")]}
    alert = incident_alert(row, datetime.now(UTC), 5.0, None, rules)
    assert alert["annotations"][BASELINE] == said
    assert alert["annotations"]["description"].endswith(
        f"Its own normal, which the alerts were compared with: {said}."
    )
    assert (
        BASELINE not in incident_alert(rows[2], datetime.now(UTC), 5.0, None, rules)["annotations"]
    )
    # No lake to read: the incidents go without it.
    assert baseline_notes(LakeReader(tmp_path / "none"), rows, rules.rules) == {}
