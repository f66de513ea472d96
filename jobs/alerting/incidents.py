"""Incidents: the alerts of one rule on one sensor, grouped into episodes (pure functions).

The alerts table is the evidence: one row per rule hit (a sensor hot for an hour has 60
overheat_reading rows). An incident is what ops act on: one row per episode, ``firing``
while the rule keeps hitting, ``resolved`` once it has stopped. Everything here is a
function of the alerts, the incidents already written and an event-time clock, so a
replayed micro-batch computes the same rows again and one availableNow batch computes
what many small batches would.

Episodes (reading, window and stuck rules): the alerts of one (sensor, rule) in order of
window_start; an alert at least the rule's ``resolve_after`` (its hold) after the previous
one starts a new episode. An episode resolves ``hold`` after its newest alert
(``resolved_at``), as soon as that is certain: when a later episode has started, or when
the event-time clock shows that no alert can still come before ``resolved_at`` (see
:func:`horizon`).

Absence rules (sensor_silent): each silence alert is its own incident (a second silence
needs readings in between, which ended the first); it resolves at the first reading after
the silence.

Written incidents keep their identity: a resolved incident's span
``[started_at, resolved_at)`` and a firing incident's start never move. A very late alert
(beyond the watermark) inside a resolved span counts into it, and so does one that arrives
out of order before a written incident's start, within the hold of it (the notifier's
real-time lane, which saw the later alert first, named and paged the episode by it: one
id, one notification); one earlier still opens an incident of its own, ended at the next
one's start at the latest. The hold's boundary is :func:`contract.alerts.same_episode`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import groupby
from typing import Literal

from contract.alerts import FIRING, RESOLVED, incident_id, same_episode
from contract.rules.model import (
    AbsenceRule,
    DeviationRule,
    RateRule,
    ReadingRule,
    Rule,
    RuleSet,
    WindowRule,
)
from contract.times import interval_seconds, utc_now

# The windows a window or stuck rule reads (jobs/windows/panes.py): its alert is raised when the
# watermark passes a window's end, so its window_start trails the watermark by this much.
WINDOW_LENGTH = {"1m": timedelta(minutes=1), "5m": timedelta(minutes=5)}


@dataclass(frozen=True)
class RuleTraits:
    """What incidents need to know of a rule."""

    hold: timedelta  # event time an episode stays free of alerts before it resolves
    # How far a new alert's window_start can trail the watermark (0: a reading's minute);
    # None: an absence rule, whose incidents end when readings resume.
    lag: timedelta | None
    unit: str = ""  # of the peak value, for people
    # Which alert's value is the episode's peak: the highest ("max"), the lowest ("min":
    # a rule looking down, as below 5 °C or falling), or the farthest beyond its threshold
    # ("farthest": a deviation either side, whose band edge moves).
    peak: Literal["max", "min", "farthest"] = "max"

    @property
    def absence(self) -> bool:
        """Whether incidents of the rule end when readings resume."""
        return self.lag is None


# A rule taken out of the rules file: its incidents still end, as a reading rule's.
FALLBACK = RuleTraits(timedelta(minutes=5), timedelta(0))


def rule_traits(rules: RuleSet) -> dict[str, RuleTraits]:
    """Each rule's traits, by name."""
    traits = {}
    for rule in rules.rules:
        hold = timedelta(seconds=interval_seconds(rule.resolve_after))
        if isinstance(rule, AbsenceRule):
            lag = None
        elif isinstance(rule, ReadingRule):
            lag = timedelta(0)
        elif isinstance(rule, RateRule | DeviationRule):
            lag = timedelta(minutes=1)  # judged as a pane closes, like a 1-minute window
        else:
            lag = WINDOW_LENGTH[rule.window]
        traits[rule.name] = RuleTraits(hold, lag, rule.unit, _peak(rule))
    return traits


def _peak(rule: Rule) -> Literal["max", "min", "farthest"]:
    """Which alert of an episode is its worst (:attr:`RuleTraits.peak`)."""
    if isinstance(rule, ReadingRule | WindowRule) and rule.op in ("<", "<="):
        return "min"
    if isinstance(rule, RateRule) and rule.trend == "falling":
        return "min"  # a falling rate is negative: the steepest fall is the lowest
    if isinstance(rule, DeviationRule):
        return {"above": "max", "below": "min"}.get(rule.direction, "farthest")  # type: ignore[return-value]
    return "max"


def _peak_value(alerts: Sequence[Evidence], peak: str) -> float:
    """The episode's peak value (:attr:`RuleTraits.peak`)."""
    values = [a.observed_value for a in alerts]
    if peak == "min":
        return min(values)
    if peak == "farthest":
        return max(alerts, key=lambda a: abs(a.observed_value - a.threshold)).observed_value
    return max(values)


@dataclass(frozen=True)
class Evidence:
    """An alert, as an incident needs it (times are UTC instants)."""

    alert_id: str
    sensor_id: str
    site: str
    rule: str
    severity: str
    window_start: datetime
    observed_value: float
    threshold: float


@dataclass(frozen=True)
class Incident:
    """A row of the incidents table (jobs/writer/tables.py INCIDENTS_SCHEMA); times are UTC
    instants."""

    incident_id: str
    sensor_id: str
    site: str
    rule: str
    severity: str
    status: str
    started_at: datetime
    last_seen_at: datetime
    resolved_at: datetime | None
    peak_value: float
    threshold: float
    alert_count: int
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> tuple[str, str]:
        """(sensor_id, rule): an incident's episodes never overlap within one key."""
        return (self.sensor_id, self.rule)

    def same_as(self, other: Incident) -> bool:
        """Equal in everything but ``updated_at`` (a rewrite would change nothing)."""
        return replace(self, updated_at=other.updated_at) == other


def horizon(traits: RuleTraits, watermark: datetime) -> datetime | None:
    """The window_start before which no new alert of a rule can come any more, given the
    windows query's event-time ``watermark`` (None: an absence rule, not ended by it).

    A reading rule's alerts come from readings, which are at or after the watermark unless
    late beyond it; a window rule's come when the watermark closes a window, so a new one
    starts later than ``watermark - window``. (A reading later than the watermark can
    still add an alert before it; it then counts into the episode it falls in, see the
    module docstring.)
    """
    if traits.lag is None:
        return None
    if not traits.lag:
        # An alert's window_start is its minute: a reading just after the watermark can
        # still bring one that starts at the watermark's minute.
        return watermark.replace(second=0, microsecond=0)
    return watermark - traits.lag


@dataclass
class _Episode:
    """Alerts being grouped; ``written`` is the incident they extend, if any."""

    alerts: list[Evidence]
    written: Incident | None = None

    @property
    def start(self) -> datetime:
        return self.written.started_at if self.written else self.alerts[0].window_start

    @property
    def last(self) -> datetime:
        return max(a.window_start for a in self.alerts)


def _containing(incidents: Sequence[Incident], moment: datetime) -> Incident | None:
    for incident in incidents:
        end = incident.resolved_at
        if incident.status == RESOLVED and end is not None and incident.started_at <= moment < end:
            return incident
    return None


def _ahead(incidents: Sequence[Incident], moment: datetime, hold: timedelta) -> Incident | None:
    """The written incident an alert at ``moment`` precedes within the hold, if any: an
    alert that arrived out of order, after the episode had opened at a later minute."""
    later = [i for i in incidents if i.started_at > moment]
    first = min(later, key=lambda i: i.started_at, default=None)
    return first if first is not None and same_episode(moment, first.started_at, hold) else None


def _group(
    alerts: Sequence[Evidence], written: Sequence[Incident], hold: timedelta
) -> list[_Episode]:
    """One key's alerts (window_start order) grouped into episodes, written ones kept."""
    starts = {i.started_at: i for i in written if i.status == FIRING}
    episodes: list[_Episode] = []
    closed: dict[str, _Episode] = {}  # resolved incidents: their span is fixed
    current: _Episode | None = None

    def into_resolved(incident: Incident, alert: Evidence) -> None:
        episode = closed.setdefault(incident.incident_id, _Episode([], incident))
        if not episode.alerts:
            episodes.append(episode)
        episode.alerts.append(alert)

    for alert in alerts:
        moment = alert.window_start
        resolved = _containing(written, moment)
        if resolved is not None:
            into_resolved(resolved, alert)
            current = None  # nothing carries on across a resolved incident
        elif moment in starts:
            current = _Episode([alert], starts.pop(moment))
            episodes.append(current)
        elif current is not None and same_episode(current.last, moment, hold):
            current.alerts.append(alert)
        elif (ahead := _ahead(written, moment, hold)) is not None:
            # Out of order: the episode already opened (and was named, and maybe paged)
            # at a later minute. It keeps its start and id, as the notifier's real-time
            # lane keeps the id it posted, and counts this alert.
            if ahead.status == RESOLVED:
                into_resolved(ahead, alert)
                current = None
            else:
                current = _Episode([alert], starts.pop(ahead.started_at, ahead))
                episodes.append(current)
        else:
            current = _Episode([alert])
            episodes.append(current)
    return episodes


def _as_incident(
    episode: _Episode, status: str, resolved_at: datetime | None, now: datetime, peak: str = "max"
) -> Incident:
    newest = max(episode.alerts, key=lambda a: (a.window_start, a.alert_id))
    written = episode.written
    if written is not None and written.status == RESOLVED:
        status, resolved_at = RESOLVED, written.resolved_at  # resolved is final
    start = episode.start
    return Incident(
        incident_id=written.incident_id if written else incident_id(*_key(newest), start),
        sensor_id=newest.sensor_id,
        site=newest.site,
        rule=newest.rule,
        severity=newest.severity,
        status=status,
        started_at=start,
        last_seen_at=episode.last,
        resolved_at=resolved_at,
        peak_value=_peak_value(episode.alerts, peak),
        threshold=newest.threshold,
        alert_count=len({a.alert_id for a in episode.alerts}),
        created_at=written.created_at if written else now,
        updated_at=now,
    )


def _key(alert: Evidence) -> tuple[str, str]:
    return (alert.sensor_id, alert.rule)


def _episodes_of_key(
    alerts: Sequence[Evidence],
    written: Sequence[Incident],
    hold: timedelta,
    horizon: datetime | None,
    now: datetime,
    peak: str = "max",
) -> list[Incident]:
    episodes = _group(alerts, written, hold)
    # Where each episode must end at the latest: the next one's start.
    starts = sorted({e.start for e in episodes} | {i.started_at for i in written})
    result = []
    for episode in episodes:
        later = [s for s in starts if s > episode.start]
        end = episode.last + hold
        if later and later[0] < end:
            end = later[0]
        if later or (horizon is not None and horizon >= end):
            result.append(_as_incident(episode, RESOLVED, end, now, peak))
        else:
            result.append(_as_incident(episode, FIRING, None, now, peak))
    return result


def _silences_of_key(
    alerts: Sequence[Evidence],
    written: Sequence[Incident],
    readings_after: Sequence[datetime],
    now: datetime,
) -> list[Incident]:
    by_start = {i.started_at: i for i in written}
    result = []
    for alert in alerts:
        old = by_start.get(alert.window_start)
        episode = _Episode([alert], old)
        resumed = [t for t in readings_after if t > alert.window_start]
        if resumed:
            result.append(_as_incident(episode, RESOLVED, min(resumed), now))
        else:
            result.append(_as_incident(episode, FIRING, None, now))
    return result


def reconcile(
    written: Iterable[Incident],
    alerts: Iterable[Evidence],
    traits: Mapping[str, RuleTraits],
    watermark: datetime | None,
    readings: Mapping[str, Sequence[datetime]] | None = None,
    now: datetime | None = None,
) -> list[Incident]:
    """The incidents that change, given every alert of the keys concerned from some point
    on and the incidents written for those keys from that point on.

    Args:
        written: incidents already in the table for the keys concerned: every one that
            is firing or that ends after the earliest alert given.
        alerts: every alert of those keys from the earliest start among ``written`` (and
            the new alerts) on; duplicates (same alert_id) count once.
        traits: each rule's :class:`RuleTraits` (a rule not in it: :data:`FALLBACK`).
        watermark: the windows query's event-time clock (UTC), None without one.
        readings: for absence rules, reading times per sensor after the silences
            concerned (only the first after each silence matters).
        now: the wall-clock time stamped on changed rows (default: now).

    Returns:
        new incidents and written ones whose values change, in (sensor, rule, start) order.
    """
    now = now or utc_now()
    by_id = {a.alert_id: a for a in alerts}
    ordered = sorted(by_id.values(), key=lambda a: (a.sensor_id, a.rule, a.window_start))
    old = sorted(written, key=lambda i: (i.sensor_id, i.rule, i.started_at))
    old_by_key = {k: list(g) for k, g in groupby(old, key=lambda i: i.key)}
    new_by_key = {k: list(g) for k, g in groupby(ordered, key=_key)}
    found: list[Incident] = []
    for key in sorted(set(old_by_key) | set(new_by_key)):
        sensor_id, rule = key
        keyed, kept = new_by_key.get(key, []), old_by_key.get(key, [])
        of_rule = traits.get(rule, FALLBACK)
        if of_rule.absence:
            after = (readings or {}).get(sensor_id, [])
            # A firing silence with no alert given still resolves when data resumes.
            given = {a.window_start for a in keyed}
            missing = [i for i in kept if i.started_at not in given]
            found.extend(_silences_of_key(keyed, kept, after, now))
            found.extend(_resume_only(missing, after, now))
        else:
            until = None if watermark is None else horizon(of_rule, watermark)
            found.extend(_episodes_of_key(keyed, kept, of_rule.hold, until, now, of_rule.peak))
    before = {i.incident_id: i for i in old}
    return [i for i in found if i.incident_id not in before or not i.same_as(before[i.incident_id])]


def _resume_only(
    incidents: Sequence[Incident], readings_after: Sequence[datetime], now: datetime
) -> list[Incident]:
    """Firing silences whose alert was not given: resolved at the first reading after."""
    result = []
    for incident in incidents:
        resumed = [t for t in readings_after if t > incident.started_at]
        if incident.status == FIRING and resumed:
            ended = replace(incident, status=RESOLVED, resolved_at=min(resumed), updated_at=now)
            result.append(ended)
    return result
