"""Incidents as the alerts the notifier posts to Alertmanager (pure functions): labels,
annotations, ``endsAt``, an episode reported late, the order critical first
(docs/alerting.md#notifications-prometheus-alertmanager)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from contract.alerts import (
    CRITICAL,
    FIRING,
    OVERHEAT,
    RESOLVED,
    SILENT,
    SUSTAINED,
    incident_labels,
)
from contract.rules.model import RuleSet
from contract.times import as_utc, iso, parse_instant, readable
from ops.alert_reader import describe_peak, rule_annotations

# A firing alert's endsAt lies at least this far ahead: a notifier run with --once between
# two stages of a job (or one that is briefly down) must not let Alertmanager end it.
MIN_FIRING_TTL = timedelta(minutes=15)
# The label of an episode reported late: it ended before any notification could say it
# fired (the notifier, Alertmanager or the lake was out, or it began and ended between
# two updates of the table). A route can match it (late="true") to send it elsewhere than
# a live page; its annotations say when it ended and why it comes late.
LATE_LABEL = "late"

RULE_DETAIL = {
    OVERHEAT: "a reading reached {peak}, at or above the critical threshold {thr}",
    SUSTAINED: "the 5-minute average reached {peak}, at or above the warning threshold {thr}",
    SILENT: "no reading for {peak} (allowed: {thr})",
}


# The annotation (and row key) of a deviation incident's baseline in words (ops/baselines.py).
BASELINE = "baseline"


# --- incidents -> Alertmanager alerts --------------------------------------------------


def summary(row: dict[str, Any], units: Mapping[str, str] | None = None) -> str:
    """One readable line: sensor @ site, rule, peak and threshold, since when."""
    where = f"{row['sensor_id']} @ {row['site'] or 'unknown site'}"
    peak, thr = describe_peak(row, "peak_value", units), describe_peak(row, "threshold", units)
    measure = (
        f"silent for {peak} (threshold {thr})"
        if row["rule"] == SILENT
        else f"peak {peak} (threshold {thr})"
    )
    if row["status"] == RESOLVED:
        span = f"from {readable(row['started_at'])} to {readable(row['resolved_at'])}, resolved"
    else:
        span = f"since {readable(row['started_at'])}"
    return f"{where}: {row['rule']} ({row['severity']}), {measure}, {span}"


def description(row: dict[str, Any], units: Mapping[str, str] | None = None) -> str:
    """A few sentences with everything the incident row says."""
    detail = RULE_DETAIL.get(row["rule"], "peak {peak}, threshold {thr}").format(
        peak=describe_peak(row, "peak_value", units), thr=describe_peak(row, "threshold", units)
    )
    count = row["alert_count"]
    text = (
        f"{row['severity'].capitalize()} incident {row['incident_id']}: on sensor "
        f"{row['sensor_id']} at {row['site'] or 'an unknown site'}, {detail}. "
        f"{count} alert{'' if count == 1 else 's'} from {readable(row['started_at'])} to "
        f"{readable(row['last_seen_at'])} (event time)."
    )
    if row["status"] == RESOLVED:
        text += f" Resolved at {readable(row['resolved_at'])} (event time)."
    if row.get(BASELINE):
        text += f" Its own normal, which the alerts were compared with: {row[BASELINE]}."
    return text


# A row's key for the incident id the real-time lane posted its episode under, when that
# differs from the job's (posted_as); incident_alert labels the alert with it.
POSTED_AS = "posted_as"
INCIDENT_LABEL = "incident_id"


def posted_as(row: dict[str, Any], held: Sequence[dict[str, Any]], made: set[str]) -> str | None:
    """The incident id Alertmanager holds ``row``'s episode under when it is not the job's.

    The real-time lane names an episode by the first alert it sees. When hot readings of a
    new episode arrive out of order and one micro-batch of the job brings them all, the job
    names the episode by its earliest minute, which the lane saw after the first: the same
    episode then has two ids. The sync posts the row under the lane's: an alert of the
    same rule and sensor, not a late report, whose id is none of ``made`` (the ids of the
    rows read) and whose start lies within the row's span. Alertmanager then holds one
    alert and pages once; the job's id stays in the alert's description.
    """
    start, last = as_utc(row["started_at"]), as_utc(row["last_seen_at"]) or row["started_at"]
    for alert in held:
        labels = alert.get("labels", {})
        ours = labels.get(INCIDENT_LABEL)
        if (
            ours is None
            or ours in made
            or labels.get(LATE_LABEL) == "true"
            or labels != incident_labels({**row, INCIDENT_LABEL: ours})
        ):
            continue
        try:
            posted = parse_instant(alert.get("annotations", {}).get("started_at", ""))
        except ValueError:
            continue
        if start <= posted <= last:
            return ours
    return None


def incident_alert(
    row: dict[str, Any],
    now: datetime,
    interval: float,
    dashboard_url: str | None = None,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """The Alertmanager alert (API v2 ``postableAlert``) of one incident row; its rule's
    summary, description and runbook_url from ``rules`` win over the built-in texts.
    (An episode that ended before it was notified: :func:`late_alert`.)

    ``incident_id`` is a label: two episodes of one sensor and rule are two alerts, so the
    second one fires anew instead of merging into the first one's resolved state.
    Timestamps: event time may be a simulated clock far from now, so ``startsAt`` is never
    in the future and a resolved alert's ``endsAt`` never in the future either.
    """
    labels = incident_labels({**row, INCIDENT_LABEL: row.get(POSTED_AS) or row["incident_id"]})
    units = None if rules is None else rules.units()
    annotations = {
        "summary": summary(row, units),
        "description": description(row, units),
        "peak_value": describe_peak(row, "peak_value", units),
        "threshold": describe_peak(row, "threshold", units),
        "started_at": iso(row["started_at"]),
        "last_seen_at": iso(row["last_seen_at"]),
        "resolved_at": iso(row["resolved_at"]),
        "alert_count": None if row["alert_count"] is None else str(row["alert_count"]),
        BASELINE: row.get(BASELINE),
        "dashboard_url": dashboard_url,
        **rule_annotations(row, rules, "peak_value", row["started_at"], row["last_seen_at"]),
    }
    started = as_utc(row["started_at"]) or now
    starts_at = min(started, now)
    changed = as_utc(row["updated_at"]) or now
    if row["status"] == FIRING:
        ends_at = now + max(MIN_FIRING_TTL, timedelta(seconds=4 * interval))
    else:
        ends_at = max(starts_at, min(changed, now))
    alert: dict[str, Any] = {
        # A label or annotation without a value is left out (Alertmanager drops empty ones).
        "labels": labels,
        "annotations": {k: v for k, v in annotations.items() if v},
        "startsAt": iso(starts_at),
        "endsAt": iso(ends_at),
    }
    if dashboard_url:
        alert["generatorURL"] = dashboard_url
    return alert


def late_alert(
    row: dict[str, Any],
    now: datetime,
    why: str,
    late_firing: timedelta,
    dashboard_url: str | None = None,
    rules: RuleSet | None = None,
) -> dict[str, Any]:
    """The alert that reports a resolved incident no notification said was firing.

    Alertmanager notifies nobody of the end of an alert it never notified firing, so the
    alert fires from now until ``late_firing`` from now, then ends by itself: one firing
    notification, then its resolution. It can never pass for a live page: the label
    ``late="true"`` (routes can match it) and the annotations ``late`` (when it ended and
    why it comes late, ``why``), ``ended_at`` and a summary that starts with "ENDED"; its
    other labels are the incident's, ``incident_id`` the job's.
    """
    alert = incident_alert(row, now, 0.0, dashboard_url, rules)
    ended = readable(row["resolved_at"])
    notes = alert["annotations"]
    notes["summary"] = f"ENDED at {ended}, reported late: {notes['summary']}"
    notes["late"] = (
        f"This episode already ended (at {ended}, event time): it is not a live problem. "
        f"It is reported late because {why}."
    )
    notes["ended_at"] = iso(row["resolved_at"])
    alert["labels"] = {**alert["labels"], LATE_LABEL: "true"}
    alert["endsAt"] = iso(now + late_firing)
    return alert


def inhibition_order(
    alerts: list[dict[str, Any]], now: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The alerts in two requests, so that the inhibition of conf/alertmanager.yml (a
    sensor's critical alert mutes its warnings) holds: first the critical alerts that
    fire and the warnings that end, then the warnings that fire and the critical alerts
    that end.

    Alertmanager mutes a warning only if it already knows the critical alert when the
    warning's group is flushed: posted together, a new pair often races past the
    inhibition (Alertmanager issue 2229), and a critical alert ending before its warning
    would let the warning be notified in between.
    """
    first: list[dict[str, Any]] = []
    second: list[dict[str, Any]] = []
    for alert in alerts:
        critical = alert["labels"].get("severity") == CRITICAL
        firing = alert["endsAt"] > iso(now)
        (first if critical == firing else second).append(alert)
    return first, second
