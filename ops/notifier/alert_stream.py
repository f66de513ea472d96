"""The notifier's fast lane: each alert of the real-time path (Kafka ``alerts_topic``) is
posted to Alertmanager as it arrives, as the incident it opens or extends.

Alertmanager identifies an alert by its labels, and the incidents sync (ops/notifier/loop.py)
posts an incident with ``incident_id`` among them. A real-time alert is posted with the
labels its incident will have, so Alertmanager sees one alert that the sync then keeps
(annotations, re-posts, the resolution): one firing notification per episode, whichever
lane was first. :class:`Episodes` decides which incident an alert belongs to as the job
does (jobs/alerting/incidents.py, with the same hold boundary,
:func:`contract.alerts.same_episode`), from the incidents the last sync read and the
episodes this lane posted since: an alert continues the episode before it when the gap is
shorter than the rule's hold, joins the one after it when it came out of order less than a
hold before that one's start (whose id stays), and else opens a new one, named by its own
bucket (contract.alerts.incident_id), as the job names it.

Nothing that already ended is paged as live: an alert inside (or just before) an incident
the table already resolved is not posted (the job counts it into that incident), and the
topic is read from its end at every start (ops/alert_topic.py): what was sent while the
lane was not reading reaches Alertmanager through the incidents sync alone (still firing:
as firing; already ended: reported late). A message seen before (the path is at least
once; every reading of a hot minute repeats the alert_id) is not posted again.

The lane runs supervised (:meth:`AlertStream.run`): a failure is said once, the lane
starts again from the topic's end after a doubling delay, and the gauge
``sensorwatch_notifier_lane_up`` says whether it is reading.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from common.stop_signal import Stop
from conf.settings.notifier import NotifierSettings
from contract.alerts import RESOLVED, incident_id, incident_labels, same_episode
from contract.rules.model import RuleSet
from contract.times import as_utc, interval_seconds, iso, parse_instant, readable
from ops.alert_reader import describe_peak, rule_annotations
from ops.alert_topic import TopicReader
from ops.alertmanager_api import Alertmanager, AlertmanagerRefused, AlertmanagerUnavailable
from ops.notifier.metrics import STREAM, NotifierMetrics

# A firing alert posted by this lane lasts this long unless the sync takes it over (it
# does within one notify_interval; this only bounds a notifier that stops meanwhile).
FIRING_TTL = timedelta(minutes=15)
# alert_ids remembered as posted (a hot minute's repeats, the replays of the real-time path).
SEEN = 10_000
# Restarts of a failed lane: doubling from the first delay up to the cap.
FIRST_RESTART = 1.0
MAX_RESTART = 30.0


@dataclass(frozen=True)
class Span:
    """An episode as the lane knows it: its id, the bucket it was named by (which never
    moves), its newest alert's bucket, and its end once the table resolved it."""

    incident_id: str
    start: datetime
    last: datetime
    end: datetime | None = None


@dataclass
class Episodes:
    """Which incident a real-time alert belongs to (see the module's docstring)."""

    hold: timedelta  # of a rule not in ``holds``
    holds: Mapping[str, timedelta] = field(default_factory=dict)  # each rule's resolve_after
    # The last sync's incidents (firing and recently resolved), by (sensor_id, rule).
    written: dict[tuple[str, str], list[Span]] = field(default_factory=dict)
    # The newest episode this lane posted, by (sensor_id, rule).
    posted: dict[tuple[str, str], Span] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, incidents: Iterable[dict[str, Any]]) -> None:
        """The incidents a sync read (rows of the table: firing and recently resolved)."""
        written: dict[tuple[str, str], list[Span]] = {}
        for r in incidents:
            start, last = as_utc(r["started_at"]), as_utc(r["last_seen_at"]) or r["started_at"]
            end = as_utc(r["resolved_at"]) if r["status"] == RESOLVED else None
            span = Span(r["incident_id"], start, last, end)
            written.setdefault((r["sensor_id"], r["rule"]), []).append(span)
        with self._lock:
            self.written = written

    def set_holds(self, holds: Mapping[str, timedelta]) -> None:
        """Each rule's resolve_after, as the rules file says now."""
        with self._lock:
            self.holds = holds

    def incident_for(self, sensor_id: str, rule: str, window_start: datetime) -> str | None:
        """The incident id of an alert of ``sensor_id`` and ``rule`` in the bucket that
        starts at ``window_start``; None when the table already resolved that episode
        (nothing to page: the job counts the alert into it)."""
        key, moment = (sensor_id, rule), as_utc(window_start)
        with self._lock:
            hold = self.holds.get(rule, self.hold)
            spans = self._spans(key)
            before = max((s for s in spans if s.start <= moment), key=_start, default=None)
            after = min((s for s in spans if s.start > moment), key=_start, default=None)
            if before is not None and before.end is not None and moment < before.end:
                return None  # inside a resolved episode
            if (
                before is not None
                and before.end is None
                and (moment <= before.last or same_episode(before.last, moment, hold))
            ):
                chosen = before
            elif after is not None and same_episode(moment, after.start, hold):
                if after.end is not None:
                    return None  # just before a resolved episode: counted into it
                chosen = after  # out of order: the episode keeps the id it was posted by
            else:
                chosen = Span(incident_id(sensor_id, rule, moment), moment, moment)
            self.posted[key] = Span(chosen.incident_id, chosen.start, max(chosen.last, moment))
            return chosen.incident_id

    def _spans(self, key: tuple[str, str]) -> list[Span]:
        """The key's episodes: the table's, and the one this lane posted (merged by id:
        the table's end wins, the newest alert of either counts)."""
        spans = {s.incident_id: s for s in self.written.get(key, [])}
        mine = self.posted.get(key)
        if mine is not None:
            known = spans.get(mine.incident_id)
            if known is None:
                spans[mine.incident_id] = mine
            else:
                spans[mine.incident_id] = Span(
                    known.incident_id, known.start, max(known.last, mine.last), known.end
                )
        return list(spans.values())


def _start(span: Span) -> datetime:
    return span.start


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
    first_restart: float = FIRST_RESTART
    max_restart: float = MAX_RESTART
    posted: int = 0
    _seen: OrderedDict[str, None] = field(default_factory=OrderedDict)
    # Whether the lane read the topic since it last started: its delay starts over.
    _was_up: bool = field(default=False, init=False)

    def _new(self, alert_id: str) -> bool:
        if alert_id in self._seen:
            return False
        self._seen[alert_id] = None
        if len(self._seen) > SEEN:
            self._seen.popitem(last=False)
        return True

    def handle(self, value: bytes, alertmanager: Alertmanager) -> bool:
        """Post one message's alert unless it was seen or its episode already ended; True
        when posted. A message that is not an alert is said and skipped."""
        try:
            message = json.loads(value)
            key = message["alert_id"]
            start = parse_instant(message["window_start"])
            sensor_id, rule = message["sensor_id"], message["rule"]
        except (ValueError, KeyError, TypeError) as exc:
            self.warn(f"notify: skipped a message of {self.settings.alerts_topic}: {exc!r}")
            return False
        if not self._new(key):
            return False
        now = self.now()
        if self.metrics is not None:
            self.metrics.received(message, now)
        incident = self.episodes.incident_for(sensor_id, rule, start)
        if incident is None:
            return False  # an episode the table already resolved: not a live problem
        try:
            rules = self.settings.alert_rules if self.rules is None else self.rules()
            alert = stream_alert(message, incident, now, self.dashboard_url, rules)
            alertmanager.post_alerts([alert])
        except AlertmanagerUnavailable as exc:
            if self.metrics is not None:
                self.metrics.failed(STREAM, isinstance(exc, AlertmanagerRefused))
            self._seen.pop(key, None)  # the next repeat, or the incidents sync, brings it
            return False
        except BaseException:
            self._seen.pop(key, None)  # not posted: a repeat after the restart may be
            raise
        if self.metrics is not None:
            self.metrics.posted(STREAM)
        self.posted += 1
        return True

    def run(self, stop: Stop) -> None:
        """Follow the topic from its end until ``stop`` is set, supervised: any failure
        is said once (the same one again is only counted), and the lane starts again from
        the topic's end after a delay that doubles up to ``max_restart`` (and starts over
        once the lane has read again)."""
        delay, said = self.first_restart, set[str]()
        while not stop.is_set():
            try:
                self._follow(stop)
            except Exception as exc:  # the lane outlives any failure, said below
                self._health(False)
                if self.metrics is not None:
                    self.metrics.lane_restarted()
                if self._was_up:
                    delay = self.first_restart
                what = failure(exc)
                if what not in said:
                    self.warn(
                        f"notify: the real-time lane failed: {what}; it starts again from the "
                        f"topic's end (retrying every {self.max_restart:g}s at most), the "
                        "incidents still go out"
                    )
                    said.add(what)
                stop.wait(delay)
                delay = min(delay * 2, self.max_restart)
                continue
            break
        self._health(False)

    def _health(self, up: bool) -> None:
        """The lane reads the topic (True) or does not (False): the gauge."""
        self._was_up = self._was_up or up
        if self.metrics is not None:
            self.metrics.lane(up)

    def _follow(self, stop: Stop) -> None:
        settings = self.settings
        alertmanager = Alertmanager.from_settings(settings)
        self._was_up = False
        reader = TopicReader(
            settings,
            prefix="notify",
            # Its own group, no commits: the lane starts at the topic's end every time.
            group_id=f"sensorwatch-notifier-{uuid.uuid4().hex[:12]}",
            log=self.log,
            warn=self.warn,
            meanwhile="real-time alerts wait for it (the incidents still go out)",
            health=self._health,
        )
        self.log(
            f"notify: posting the real-time alerts of {settings.alerts_topic} at "
            f"{settings.bootstrap_servers} as they arrive (from the topic's end)"
        )
        reader.follow(lambda value: self.handle(value, alertmanager), stop)


def failure(exc: BaseException) -> str:
    """An exception in one line: its type, message and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{''.join(traceback.format_exception_only(exc)).strip()}{where}"
