"""Silences from the dashboard: Alertmanager's API v2, called by the dashboard server.

The page cannot rely on Alertmanager's web UI (Debian's ``prometheus-alertmanager``, what
``scripts/run-local`` runs, ships without it), so the dashboard silences an incident
itself: ``POST /api/silences`` on the dashboard validates the request and creates the
silence with ``POST /api/v2/silences``. It also reads the active silences
(``GET /api/v2/silences``) to mark the incidents they silence.

A silence matches an incident by the labels the notifier posts it with
(``ops.notifier.incident_alerts.incident_alert``): alertname = rule, severity, sensor_id,
site, incident_id.
The requests go through ``ops.alertmanager_api``, the notifier's client too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contract.alerts import RULES, rule_on_sensor
from contract.times import iso

CREATED_BY = "sensorwatch dashboard"
DEFAULT_COMMENT = "acknowledged from the SensorWatch dashboard"
MAX_SENSOR_ID = 128
MAX_COMMENT = 500
MIN_HOURS = 1 / 60  # a minute
MAX_HOURS = 24 * 7
# Creating a silence may wait a little; reading them must not hold up the incidents table.
CREATE_TIMEOUT = 10.0
READ_TIMEOUT = 2.0
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class InvalidSilence(ValueError):
    """The silence request is invalid; the message names the field."""


@dataclass(frozen=True)
class SilenceRequest:
    """A validated request to silence one rule on one sensor for ``hours``."""

    sensor_id: str
    rule: str
    hours: float
    comment: str

    def matchers(self) -> list[dict[str, Any]]:
        """Equality (non-regex) matchers on the labels the notifier posts."""
        return [
            {"name": name, "value": value, "isRegex": False, "isEqual": True}
            for name, value in rule_on_sensor(self.rule, self.sensor_id).items()
        ]

    def body(self, now: datetime) -> dict[str, Any]:
        """Alertmanager's ``postableSilence``, from ``now`` for ``hours``."""
        return {
            "matchers": self.matchers(),
            "startsAt": iso(now),
            "endsAt": iso(now + timedelta(hours=self.hours)),
            "createdBy": CREATED_BY,
            "comment": self.comment,
        }


def parse_request(data: Any, rules: Sequence[str] = RULES) -> SilenceRequest:
    """Validate the JSON body ``{sensor_id, rule, hours, comment?}``; ``rules``: the rule
    names it may name (contract.rules.model.known_rules).

    Raises:
        InvalidSilence: naming the first bad field.
    """
    if not isinstance(data, dict):
        raise InvalidSilence("expected a JSON object {sensor_id, rule, hours, comment?}")
    unknown = sorted(set(data) - {"sensor_id", "rule", "hours", "comment"})
    if unknown:
        raise InvalidSilence(f"unknown field(s) {unknown}")
    sensor_id = data.get("sensor_id")
    if not isinstance(sensor_id, str) or not sensor_id.strip():
        raise InvalidSilence("sensor_id: expected a non-empty string")
    if len(sensor_id) > MAX_SENSOR_ID or _CONTROL.search(sensor_id):
        raise InvalidSilence(
            f"sensor_id: expected at most {MAX_SENSOR_ID} characters, no control characters"
        )
    rule = data.get("rule")
    if rule not in rules:
        raise InvalidSilence(f"rule: expected one of {list(rules)}, got {rule!r}")
    hours = data.get("hours")
    if isinstance(hours, bool) or not isinstance(hours, int | float):
        raise InvalidSilence(f"hours: expected a number, got {hours!r}")
    if not MIN_HOURS <= hours <= MAX_HOURS:
        raise InvalidSilence(f"hours: expected 1/60 (a minute) to {MAX_HOURS}, got {hours!r}")
    comment = data.get("comment")
    if comment is None or (isinstance(comment, str) and not comment.strip()):
        comment = DEFAULT_COMMENT
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise InvalidSilence(f"comment: expected a string of at most {MAX_COMMENT} characters")
    return SilenceRequest(sensor_id=sensor_id, rule=rule, hours=float(hours), comment=comment)


def _matches(matcher: dict[str, Any], labels: dict[str, str]) -> bool:
    """One matcher as Alertmanager applies it: a missing label is "", a regex is
    anchored at both ends; ``isEqual`` false negates (=~ becomes !~, = becomes !=)."""
    value = labels.get(str(matcher.get("name")), "")
    wanted = str(matcher.get("value", ""))
    if matcher.get("isRegex"):
        try:
            hit = re.fullmatch(wanted, value) is not None
        except re.error:
            return False  # a pattern Python cannot read: do not claim the incident silenced
    else:
        hit = value == wanted
    return hit if matcher.get("isEqual", True) else not hit


def silencing(silences: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any] | None:
    """Of the active ``silences``, the one that lasts longest among those matching
    ``labels``, as the page shows it; None if none matches."""
    found = [
        s for s in silences if s.get("matchers") and all(_matches(m, labels) for m in s["matchers"])
    ]
    if not found:
        return None
    best = max(found, key=lambda s: str(s.get("endsAt", "")))
    return {
        "id": best.get("id"),
        "ends_at": best.get("endsAt"),
        "created_by": best.get("createdBy"),
        "comment": best.get("comment"),
        "count": len(found),
    }
