"""Alerts and incidents as the contract names them (docs/architecture.md#tables). The one
definition.

The job writes them, the ops views, the notifier and the dashboard read them, and
Alertmanager's config routes on them: rule names, severities, incident statuses, and the
two id schemes, deterministic so that a replay finds the same alert or incident again.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from contract.times import as_utc

OVERHEAT = "overheat_reading"
SUSTAINED = "sustained_high"
SILENT = "sensor_silent"
RULES = (OVERHEAT, SUSTAINED, SILENT)

CRITICAL = "critical"
WARNING = "warning"
# Most urgent first: views sort by this rank, never by the names' spelling.
SEVERITIES = (CRITICAL, WARNING)
SEVERITY = {OVERHEAT: CRITICAL, SUSTAINED: WARNING, SILENT: WARNING}

FIRING = "firing"
RESOLVED = "resolved"
STATUSES = (FIRING, RESOLVED)

# The site of a sensor the registry does not list.
UNREGISTERED = "unregistered"

# The window_start in an id's text, to the microsecond, in UTC. Spark's date_format
# pattern and Python's strftime format write the same text (jobs/alerting/alert_columns.py
# uses the first).
ID_TIME_SPARK = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"
ID_TIME_PYTHON = "%Y-%m-%dT%H:%M:%S.%f"
ID_SEPARATOR = "|"


def _utc_text(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: an id needs an instant")
    return as_utc(moment).strftime(ID_TIME_PYTHON)


def alert_id(sensor_id: str, rule: str, window_start: datetime) -> str:
    """sha256 of ``sensor_id|rule|window_start``: the same alert found again (a replayed
    batch, a duplicate reading, a restart) has the same id."""
    text = ID_SEPARATOR.join((sensor_id, rule, _utc_text(window_start)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def incident_id(sensor_id: str, rule: str, started_at: datetime) -> str:
    """sha256 of ``incident|sensor_id|rule|started_at``: an episode keeps its id across
    replays (``started_at`` is its first alert's window_start)."""
    text = ID_SEPARATOR.join(("incident", sensor_id, rule, _utc_text(started_at)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def same_episode(earlier: datetime, later: datetime, hold: timedelta) -> bool:
    """Whether an alert whose window starts at ``later`` belongs to the episode of one at
    ``earlier`` (the same sensor and rule; ``earlier <= later``): the gap is shorter than
    the rule's hold (resolve_after). An alert a whole hold later opens a new episode: the
    first one resolved at ``earlier + hold``, and its span ends there, exclusive.

    The one definition of the boundary: the job's incidents (jobs/alerting/incidents.py)
    and the notifier's real-time lane (ops/notifier/alert_stream.py) both decide with it, also for
    an alert that arrives out of order, before the episode's start: it joins the episode
    when the start lies within the hold after it.
    """
    return later - earlier < hold


# The Alertmanager labels that name one rule on one sensor: what a silence matches.
RULE_LABEL = "alertname"
SENSOR_LABEL = "sensor_id"


def rule_on_sensor(rule: str, sensor_id: str) -> dict[str, str]:
    """The labels of every incident of ``rule`` on ``sensor_id`` (a silence's matchers)."""
    return {RULE_LABEL: rule, SENSOR_LABEL: sensor_id}


def incident_labels(row: dict[str, Any]) -> dict[str, str]:
    """The labels an incident is posted to Alertmanager with, by the notifier's sync and
    its real-time lane alike (the dashboard's silences match them); an empty one is left
    out, which a matcher sees as the empty string."""
    labels = {
        **rule_on_sensor(row["rule"], row["sensor_id"]),
        "severity": row["severity"],
        "site": row["site"],
        "incident_id": row["incident_id"],
    }
    return {k: v for k, v in labels.items() if v}
