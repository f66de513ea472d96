"""Alert rules as data: the one definition of the rules file's format (docs/alerting.md).

A rules file is TOML, one ``[[rule]]`` table per rule. Every rule has a name (its
``alertname`` in Alertmanager, its ``rule`` in the tables), a kind, a severity, a resolve
hold, a scope and annotations; the kind says what it watches:

- ``reading``: each reading's ``field`` compared with a threshold (``op``, ``threshold``);
- ``window``: an ``aggregate`` of a window the job computes (``1m`` tumbling, ``5m``
  sliding) compared with a threshold, with at least ``min_readings`` readings;
- ``absence``: a sensor with no reading for ``after`` (event time);
- ``stuck``: a sensor whose ``field`` read one value all through a window (max - min = 0);
- ``rate`` and ``deviation``: learned rules on the closed panes (docs/alerting.md).

Thresholds can differ by scope: ``[[rule.override]]`` entries for sites, device models or
sensors, the most specific winning (sensor, then model, then site), and a sensor's own
threshold in the device registry above all where the rule names its key
(``registry_threshold``). Reading and validating a file is parsing.py.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from contract.alerts import RULES, SEVERITIES
from contract.times import interval_seconds, parse_interval

KINDS = ("reading", "window", "absence", "stuck", "rate", "deviation")
# The measured fields of an event (contract/event.py) a rule may watch.
Measured = Literal["temperature_c", "humidity_pct", "battery_pct"]
FIELDS: tuple[str, ...] = get_args(Measured)
Op = Literal[">", ">=", "<", "<="]
OPS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda value, limit: value > limit,
    ">=": lambda value, limit: value >= limit,
    "<": lambda value, limit: value < limit,
    "<=": lambda value, limit: value <= limit,
}
# The windows the job computes (jobs/queries/windows.py): 1-minute tumbling, 5-minute sliding.
WindowName = Literal["1m", "5m"]
WINDOWS: tuple[str, ...] = get_args(WindowName)
Aggregate = Literal["avg", "min", "max", "count", "range"]
AGGREGATES: tuple[str, ...] = get_args(Aggregate)
# The unit of each measured field, for people (logs, notifications, the dashboard).
UNITS = {"temperature_c": "°C", "humidity_pct": "%", "battery_pct": "%"}
# The (aggregate, field) pairs the job's windows compute (jobs/windows/panes.py), count without a
# field: every aggregate of every measured field.
COMPUTED = frozenset(
    {("count", None)} | {(a, f) for a in AGGREGATES if a != "count" for f in FIELDS}
)


# What an annotation may name, filled in per alert.
PLACEHOLDERS = frozenset(
    {"rule", "sensor_id", "site", "value", "threshold", "field", "window_start", "window_end"}
)
# A sensor's own threshold may come from these keys of its registry line.
RegistryThreshold = Literal["max_temp_c"]

NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]


def known_rules(rules: RuleSet) -> tuple[str, ...]:
    """The rule names a filter or a silence may use: those of ``rules`` and the first three
    rules' (whose alerts a lake keeps when a rules file drops them)."""
    return tuple(dict.fromkeys([*(rule.name for rule in rules.rules), *RULES]))


def is_rule_name(text: object) -> bool:
    """Whether ``text`` can name a rule (the alerts table may hold rules a file no longer
    has, so a filter or a silence takes any such name)."""
    return isinstance(text, str) and re.fullmatch(NAME_PATTERN, text) is not None


Interval = Annotated[str, AfterValidator(parse_interval)]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


Threshold = Annotated[float, AfterValidator(_finite)]


def _template(text: str) -> str:
    """An annotation whose ``{placeholders}`` are all known."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as exc:
        raise ValueError(f"not a template: {exc}") from None
    unknown = sorted(names - PLACEHOLDERS)
    if unknown:
        raise ValueError(
            f"unknown placeholder {{{unknown[0]}}}; known: "
            + ", ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS))
        )
    return text


def _url(text: str) -> str:
    """A link people follow from the page: a URL, or a path such as docs/runbooks.md#<section>."""
    if not text or any(c.isspace() for c in text):
        raise ValueError("expected a URL or a path, without spaces")
    return text


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Scope(_Strict):
    """Which sensors: those of these sites, device models or ids (empty: every sensor)."""

    sites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    sensors: tuple[str, ...] = ()

    @property
    def everyone(self) -> bool:
        """True when the scope names nothing, so every sensor is in it."""
        return not (self.sites or self.models or self.sensors)

    def covers(self, sensor_id: str, site: str | None, model: str | None) -> bool:
        """Whether a sensor is in the scope (in any of the lists it names)."""
        return (
            self.everyone
            or sensor_id in self.sensors
            or (model is not None and model in self.models)
            or (site is not None and site in self.sites)
        )


class Override(Scope):
    """Another threshold for some sensors; the most specific override wins."""

    threshold: Threshold

    @model_validator(mode="after")
    def _names_someone(self) -> Override:
        if self.everyone:
            raise ValueError("an override names sites, models or sensors")
        if sum(bool(x) for x in (self.sites, self.models, self.sensors)) > 1:
            raise ValueError("an override names one of sites, models or sensors (split it)")
        return self


class _Rule(_Strict):
    name: Name
    severity: str
    # How much event time an incident must stay free of new alerts before it resolves.
    resolve_after: Interval = "5 minutes"
    scope: Scope = Scope()
    summary: Annotated[str, AfterValidator(_template)] | None = None
    description: Annotated[str, AfterValidator(_template)] | None = None
    runbook_url: Annotated[str, AfterValidator(_url)] | None = None

    @field_validator("severity")
    @classmethod
    def _known_severity(cls, value: str) -> str:
        if value not in SEVERITIES:
            raise ValueError(f"unknown severity {value!r}; known: {', '.join(SEVERITIES)}")
        return value

    @property
    def unit(self) -> str:
        """The unit of the values the rule compares (empty when they have none)."""
        field = getattr(self, "field", None)
        return UNITS.get(field, "") if field else ""

    def annotations(self, values: dict[str, Any]) -> dict[str, str]:
        """The alert's annotations for Alertmanager, placeholders filled in."""
        given = {
            "summary": self.summary,
            "description": self.description,
            "runbook_url": self.runbook_url,
        }
        filled = {**dict.fromkeys(PLACEHOLDERS, ""), **values, "rule": self.name}
        return {k: v.format_map(filled) for k, v in given.items() if v}


class _Compared(_Rule):
    op: Op
    threshold: Threshold
    overrides: tuple[Override, ...] = Field(default=(), alias="override")
    registry_threshold: RegistryThreshold | None = None

    def threshold_for(
        self,
        sensor_id: str,
        site: str | None,
        model: str | None,
        registry: dict[str, float] | None = None,
    ) -> tuple[float, str]:
        """The threshold for one sensor and where it came from: its registry value (where
        the rule names the key), else the most specific override (sensor, model, site),
        else the rule's. ``registry`` is the sensor's registry line's numbers."""
        if self.registry_threshold and registry and registry.get(self.registry_threshold):
            return registry[self.registry_threshold], f"registry {self.registry_threshold}"
        for names, key, shown in (
            ("sensors", sensor_id, "sensor"),
            ("models", model, "model"),
            ("sites", site, "site"),
        ):
            for override in self.overrides:
                if key is not None and key in getattr(override, names):
                    return override.threshold, f"{shown} {key}"
        return self.threshold, "rule"

    def breached(self, value: float, threshold: float) -> bool:
        """Whether ``value`` breaches ``threshold`` by the rule's comparison."""
        return OPS[self.op](value, threshold)


class ReadingRule(_Compared):
    """A reading's field compared with a threshold (raised on the batch that brings the
    reading, and on the real-time path)."""

    kind: Literal["reading"]
    field: Measured


class WindowRule(_Compared):
    """An aggregate of a computed window compared with a threshold."""

    kind: Literal["window"]
    window: WindowName
    aggregate: Aggregate
    field: Measured | None = None  # not for count: it counts readings
    min_readings: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _field_unless_count(self) -> WindowRule:
        if self.aggregate == "count" and self.field is not None:
            raise ValueError("aggregate 'count' counts readings: give no field")
        if self.aggregate != "count" and self.field is None:
            known = ", ".join(FIELDS)
            raise ValueError(f"aggregate '{self.aggregate}' needs a field: one of {known}")
        return self

    @property
    def unit(self) -> str:
        """The unit of the aggregate (readings for count)."""
        return "readings" if self.aggregate == "count" else super().unit


class AbsenceRule(_Rule):
    """A sensor silent for ``after`` (event time); it resolves when readings resume."""

    kind: Literal["absence"]
    after: Interval
    registered_only: bool = True

    @field_validator("after")
    @classmethod
    def _at_least_a_pane(cls, value: str) -> str:
        # Silences are found from 1-minute panes: a shorter one could not be told.
        if interval_seconds(value) < 60:
            raise ValueError("must be at least '1 minute'")
        return value

    @property
    def unit(self) -> str:
        """Seconds without a reading."""
        return "s"


class StuckRule(_Rule):
    """A sensor whose field read one value all through a window (max - min = 0) over at
    least ``min_readings`` readings."""

    kind: Literal["stuck"]
    field: Measured
    window: WindowName
    min_readings: int = Field(3, ge=2)


def _positive(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError("must be a number above 0")
    return value


Positive = Annotated[float, AfterValidator(_positive)]


def _at_least(minimum: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if interval_seconds(value) < interval_seconds(minimum):
            raise ValueError(f"must be at least {minimum!r}")
        return value

    return check


class _Learned(_Rule):
    """A rule judged on a sensor's closed 1-minute panes (the average of ``field`` in
    each), in the windows query. Its episodes end after ``resolve_after`` without an
    alert: longer by default than a threshold's, since a sensor read every few minutes
    has a pane only every few minutes."""

    field: Measured
    for_: Interval = Field("0 minutes", alias="for")
    resolve_after: Interval = "30 minutes"

    @property
    def unit(self) -> str:
        """The unit of the values compared."""
        return UNITS[self.field]


class RateRule(_Learned):
    """``field`` changing faster than ``per_minute`` (rising or falling), as the
    least-squares slope of the panes within ``window`` (jobs/alerting/rate.py), for at
    least ``for``."""

    kind: Literal["rate"]
    trend: Literal["rising", "falling"] = "rising"
    per_minute: Positive
    window: Annotated[Interval, AfterValidator(_at_least("3 minutes"))] = "10 minutes"
    for_: Interval = Field("3 minutes", alias="for")

    @property
    def unit(self) -> str:
        """Per minute."""
        return f"{UNITS[self.field]}/min"


class DeviationRule(_Learned):
    """``field`` more than ``deviations`` standard deviations from the sensor's own
    baseline (an exponentially weighted mean and variance over ``horizon``, learned
    only from panes inside the band: jobs/alerting/baseline.py) for at least ``for``;
    silent until it learned for ``warm_up`` (default: one ``horizon``)."""

    kind: Literal["deviation"]
    direction: Literal["above", "below", "both"] = "both"
    deviations: Positive = 3.0
    horizon: Annotated[Interval, AfterValidator(_at_least("10 minutes"))] = "24 hours"
    warm_up: Interval | None = None
    for_: Interval = Field("7 hours", alias="for")
    min_sd: float = Field(0.0, ge=0)

    @property
    def warm_up_seconds(self) -> float:
        """The warm-up in seconds (one horizon unless the rule says otherwise)."""
        return interval_seconds(self.warm_up or self.horizon)


Rule = Annotated[
    ReadingRule | WindowRule | AbsenceRule | StuckRule | RateRule | DeviationRule,
    Field(discriminator="kind"),
]


class RuleSet(_Strict):
    """The rules of one file, in its order (names unique: :func:`parse_rules` checks them
    with every other problem, so that a file's mistakes are all named at once).

    ``alerting`` is the file's top-level statement: "off" runs no rule (the file's rules
    are still checked, so that turning it on again cannot fail)."""

    alerting: Literal["on", "off"] = "on"
    rules: tuple[Rule, ...] = Field(default=(), alias="rule")

    @property
    def off(self) -> bool:
        """Whether the file turned alerting off on purpose."""
        return self.alerting == "off"

    def by_name(self) -> dict[str, Rule]:
        """The rules by name."""
        return {rule.name: rule for rule in self.rules}

    def of_kind(self, *kinds: str) -> list[Rule]:
        """The rules of these kinds, in the file's order."""
        return [rule for rule in self.rules if rule.kind in kinds]

    def units(self) -> dict[str, str]:
        """Each rule's unit by name (:attr:`_Rule.unit`)."""
        return {rule.name: rule.unit for rule in self.rules}

    def version(self, *kinds: str) -> str:
        """A short hash of what the rules say (not how the file spells it): the same rules
        give the same version, any change another. ``kinds``: of those rules only."""
        chosen = self.of_kind(*kinds) if kinds else self.rules
        text = json.dumps(
            [rule.model_dump(mode="json", by_alias=True) for rule in chosen], sort_keys=True
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
