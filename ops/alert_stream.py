"""The notifier's fast lane: each alert of the real-time path (Kafka ``alerts_topic``) is
posted to Alertmanager as it arrives, as the incident it opens or extends.

Alertmanager identifies an alert by its labels, and the incidents sync (ops/notify.py)
posts an incident with ``incident_id`` among them. A real-time alert is posted with the
labels its incident will have, so Alertmanager sees one alert that the sync then keeps
(annotations, re-posts, the resolution): one firing notification per episode, whichever
lane was first. Its incident is (:class:`Episodes`) the one the last sync saw firing for
that sensor and rule; else the one this lane last posted for them, if its last alert is
within the incident hold (event time); else a new one, starting at the alert's bucket,
which is the id the job gives the episode it is about to open (contract.alerts).

The topic is read from its end: what was sent while the notifier was down reaches
Alertmanager through the incidents. A message seen before (the path is at least once;
every reading of a hot minute repeats the alert_id) is not posted again.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from conf.settings import NotifierSettings
from contract.alerts import incident_id, incident_labels
from contract.rules import RuleSet
from contract.times import interval_seconds, iso, parse_instant, readable
from ops.alert_topic import TopicReader
from ops.alertmanager import Alertmanager, AlertmanagerRefused, AlertmanagerUnavailable
from ops.alerts import describe_peak, rule_annotations
from ops.notifier_metrics import STREAM, NotifierMetrics

# A firing alert posted by this lane lasts this long unless the sync takes it over (it
# does within one notify_interval; this only bounds a notifier that stops meanwhile).
FIRING_TTL = timedelta(minutes=15)
# alert_ids remembered as posted (a hot minute's repeats, the replays after a restart).
SEEN = 10_000


@dataclass
class Episodes:
    """Which incident a real-time alert belongs to (see the module's docstring)."""

    hold: timedelta  # of a rule not in ``holds``
    holds: Mapping[str, timedelta] = field(default_factory=dict)  # each rule's resolve_after
    firing: dict[tuple[str, str], str] = field(default_factory=dict)
    posted: dict[tuple[str, str], tuple[str, datetime]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw_firing(self, incidents: Iterable[dict[str, Any]]) -> None:
        """The sync's firing incidents (rows with sensor_id, rule, incident_id)."""
        firing = {(r["sensor_id"], r["rule"]): r["incident_id"] for r in incidents}
        with self._lock:
            self.firing = firing

    def set_holds(self, holds: Mapping[str, timedelta]) -> None:
        """Each rule's resolve_after, as the rules file says now."""
        with self._lock:
            self.holds = holds

    def incident_for(self, sensor_id: str, rule: str, window_start: datetime) -> str:
        """The incident id of an alert of ``sensor_id`` and ``rule`` in the bucket that
        starts at ``window_start``."""
        key = (sensor_id, rule)
        with self._lock:
            known = self.firing.get(key)
            last = self.posted.get(key)
            hold = self.holds.get(rule, self.hold)
            if known is None and last is not None and window_start - last[1] <= hold:
                known = last[0]
            chosen = known or incident_id(sensor_id, rule, window_start)
            newest = max(window_start, last[1]) if last and last[0] == chosen else window_start
            self.posted[key] = (chosen, newest)
            return chosen


def rule_holds(rules: RuleSet) -> dict[str, timedelta]:
    """Each rule's resolve_after."""
    return {r.name: timedelta(seconds=interval_seconds(r.resolve_after)) for r in rules.rules}


def stream_alert(
    message: dict[str, Any],
    incident: str,
    now: datetime,
    dashboard_url: str | None,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """The Alertmanager alert (API v2 ``postableAlert``) of one real-time message: the
    labels of its incident, firing; its rule's annotations from ``rules``."""
    start = parse_instant(message["window_start"])
    # The incident as far as one alert tells it: its first value is its peak so far.
    row = {**message, "incident_id": incident, "peak_value": message["observed_value"]}
    units = None if rules is None else rules.units()
    peak = describe_peak(row, "peak_value", units)
    threshold = describe_peak(row, "threshold", units)
    annotations = {
        "summary": f"{message['sensor_id']} @ {message['site']}: {message['rule']} "
        f"({message['severity']}), {peak} (threshold {threshold}), since {readable(start)}",
        "peak_value": peak,
        "threshold": threshold,
        "started_at": iso(start),
        "dashboard_url": dashboard_url,
        **rule_annotations(row, rules, "peak_value", start, parse_instant(message["window_end"])),
    }
    alert: dict[str, Any] = {
        "labels": incident_labels(row),
        "annotations": {k: v for k, v in annotations.items() if v},
        "startsAt": iso(min(start, now)),
        "endsAt": iso(now + FIRING_TTL),
    }
    if dashboard_url:
        alert["generatorURL"] = dashboard_url
    return alert


@dataclass
class AlertStream:
    """Reads ``alerts_topic`` and posts each new alert; runs on a thread of its own."""

    settings: NotifierSettings
    episodes: Episodes
    now: Callable[[], datetime]
    log: Callable[[str], None]
    warn: Callable[[str], None]
    dashboard_url: str | None = None
    metrics: NotifierMetrics | None = None
    # The rules as the file says now (the notifier follows edits); None: as read at start.
    rules: Callable[[], RuleSet] | None = None
    posted: int = 0
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def _new(self, alert_id: str) -> bool:
        if alert_id in self._seen:
            return False
        self._seen[alert_id] = None
        if len(self._seen) > SEEN:
            self._seen.popitem(last=False)
        return True

    def handle(self, value: bytes, alertmanager: Alertmanager) -> bool:
        """Post one message's alert unless it was seen; True when posted. A message that
        is not an alert is said and skipped."""
        try:
            message = json.loads(value)
            key = message["alert_id"]
            start = parse_instant(message["window_start"])
        except (ValueError, KeyError, TypeError) as exc:
            self.warn(f"notify: skipped a message of {self.settings.alerts_topic}: {exc!r}")
            return False
        if not self._new(key):
            return False
        now = self.now()
        if self.metrics is not None:
            self.metrics.received(message, now)
        incident = self.episodes.incident_for(message["sensor_id"], message["rule"], start)
        try:
            rules = self.settings.alert_rules if self.rules is None else self.rules()
            alert = stream_alert(message, incident, now, self.dashboard_url, rules)
            alertmanager.post_alerts([alert])
        except AlertmanagerUnavailable as exc:
            if self.metrics is not None:
                self.metrics.failed(STREAM, isinstance(exc, AlertmanagerRefused))
            self._seen.pop(key, None)  # the next repeat, or the incidents sync, brings it
            return False
        if self.metrics is not None:
            self.metrics.posted(STREAM)
        self.posted += 1
        return True

    def run(self, stop: threading.Event) -> None:
        """Consume from the topic's end until ``stop`` is set."""
        settings = self.settings
        alertmanager = Alertmanager.from_settings(settings)
        reader = TopicReader(
            settings,
            prefix="notify",
            group_id=f"sensorwatch-notifier-{settings.alerts_topic}",
            commit=True,
            log=self.log,
            warn=self.warn,
            meanwhile="real-time alerts wait for it (the incidents still go out)",
        )
        self.log(
            f"notify: posting the real-time alerts of {settings.alerts_topic} at "
            f"{settings.bootstrap_servers} as they arrive"
        )
        reader.follow(lambda value: self.handle(value, alertmanager), stop)
