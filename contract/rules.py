"""Alert rules as data: the one definition of the rules file's format (docs/alerting.md).

A rules file is TOML, one ``[[rule]]`` table per rule. Every rule has a name (its
``alertname`` in Alertmanager, its ``rule`` in the tables), a kind, a severity, a resolve
hold, a scope and annotations; the kind says what it watches:

- ``reading``: each reading's ``field`` compared with a threshold (``op``, ``threshold``);
- ``window``: an ``aggregate`` of a window the job computes (``1m`` tumbling, ``5m``
  sliding) compared with a threshold, with at least ``min_readings`` readings;
- ``absence``: a sensor with no reading for ``after`` (event time);
- ``stuck``: a sensor whose ``field`` read one value all through a window (max - min = 0).

Thresholds can differ by scope: ``[[rule.override]]`` entries for sites, device models or
sensors, the most specific winning (sensor, then model, then site), and a sensor's own
threshold in the device registry above all where the rule names its key
(``registry_threshold``). :func:`read_rules` validates a file and names the file, the
rule and the problem; nothing here needs a JVM (``scripts/rules check FILE``).

A file with no rule is refused (a file caught half-written may hold only its opening
comments) unless it says ``alerting = "off"``: then no rule runs, whatever it lists.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
import threading
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

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


class RulesError(ValueError):
    """A rules file cannot be used: ``source`` (the file) and each problem, naming its rule."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source, self.problems = source, problems
        super().__init__(f"{source}: " + "; ".join(problems))


def _where(rules: list[Any], loc: tuple[Any, ...]) -> str:
    """'rule 'battery_low' (the 4th [[rule]]), threshold' for a pydantic error location."""
    if len(loc) < 2 or loc[0] != "rule" or not isinstance(loc[1], int):
        return ".".join(str(part) for part in loc) or "the file"
    index = loc[1]
    given = rules[index] if index < len(rules) else None
    name = given.get("name") if isinstance(given, dict) else None
    # The kind's union tag (e.g. "reading") is pydantic's, not the file's: leave it out.
    rest = [str(p) for p in loc[2:]]
    if rest[:1] and rest[0] in KINDS:
        rest = rest[1:]
    if rest[:1] == ["override"] and len(rest) > 1:
        rest = [f"override {int(rest[1]) + 1}", *rest[2:]]
    who = f"rule {name!r}" if isinstance(name, str) else f"[[rule]] number {index + 1}"
    return who + (f": {'.'.join(rest)}" if rest else "")


def _problem(error: dict[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "union_tag_invalid":
        given = error.get("input")
        kind = given.get("kind") if isinstance(given, dict) else ""
        return f"unknown kind {kind!r}; known: {', '.join(KINDS)}"
    if error["type"] == "union_tag_not_found":
        return f"no kind; one of {', '.join(KINDS)}"
    if error["type"] == "string_pattern_mismatch" and error["loc"][-1:] == ("name",):
        return "lower-case letters, digits and _, from a letter (it is the alertname)"
    if error["type"] == "literal_error":
        return f"{message} (got {error.get('input')!r})"
    return message


def _duplicates(given: list[Any]) -> list[str]:
    names = [r.get("name") for r in given if isinstance(r, dict)]
    twice = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    return [f"rule {name!r}: defined more than once" for name in twice]


# Why a file without rules is refused, and what says "no alerting" on purpose.
NO_RULES = (
    "no [[rule]]: a file without rules is refused (one caught while being written may hold "
    'only its opening comments); to run without alerting on purpose, say alerting = "off"'
)


def parse_rules(data: dict[str, Any], source: str = "the rules") -> RuleSet:
    """A rule set from a parsed TOML document; RulesError names ``source``, and the rule
    of every problem found. A document without rules is refused unless it says
    ``alerting = "off"``, which gives a rule set of no rules."""
    given = data.get("rule") if isinstance(data.get("rule"), list) else []
    problems = _duplicates(given)
    try:
        rules = RuleSet.model_validate(data)
    except ValidationError as exc:
        problems += [f"{_where(given, e['loc'])}: {_problem(e)}" for e in exc.errors()]
    else:
        if not rules.rules and not rules.off:
            problems.append(NO_RULES)
    if problems:
        raise RulesError(source, problems)
    return rules.model_copy(update={"rules": ()}) if rules.off else rules


def rules_from_json(text: str, source: str = "the rules") -> RuleSet:
    """A rule set from the JSON of its rules (a ``rule_changes`` row's ``rules``; an empty
    list is a file that turned alerting off)."""
    given = json.loads(text)
    return parse_rules({"rule": given} if given else {"alerting": "off"}, source)


def read_rules(path: Path) -> RuleSet:
    """The rules file at ``path``, validated.

    Raises:
        RulesError: the file cannot be read, is not TOML, or a rule is wrong.
    """
    source = f"rules file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise RulesError(source, [reason]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(source, [f"not TOML: {exc}"]) from None
    return parse_rules(data, source)


# How long a followed file must stay unchanged before an edit is taken (a program's own
# setting may say otherwise: the job's is ``rules_settle``). A file written in place is
# read while it is being written; a half that is valid TOML (cut after a whole rule, or
# ``threshold = 4`` cut from ``45.0``) would otherwise be taken.
SETTLE_S = 2.0


_State = tuple[int, int, int, str] | None
_UNSEEN: _State = (-1, -1, -1, "")


def _fingerprint(path: Path) -> _State:
    """What tells one state of a file from another: inode, modification time, size and a
    hash of the bytes (an mtime may be coarse; the file is small). None: no file."""
    try:
        stat = path.stat()
        data = path.read_bytes()
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size, hashlib.sha256(data).hexdigest())


class RulesFile:
    """A rules file followed while a program runs: an edit is taken once the file has
    stayed unchanged for ``settle_seconds`` and validates; a bad edit is refused with one
    line (per edit) and the last good rules keep running.

    ``first`` is what the program read, strictly, at start (a bad file stops it there).
    The file is looked at every ``check_seconds`` at most. Writing a temporary file and
    renaming it over the rules file (docs/alerting.md) is the way to edit it: a rename is
    atomic, so no reader ever sees half a file; the settle time covers the writes in place.
    """

    def __init__(
        self,
        path: Path,
        first: RuleSet,
        log: Callable[[str], None] | None = None,
        check_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[RuleSet], None] | None = None,
        settle_seconds: float = SETTLE_S,
    ) -> None:
        """``on_change``: called with each new rule set before it is taken up and said;
        if it raises, the edit is not taken, and is tried again at the next look."""
        self.path, self.log, self.check_seconds, self.clock = path, log, check_seconds, clock
        self.on_change, self.settle_seconds = on_change, settle_seconds
        self._rules = first
        self._lock = threading.Lock()  # a program's threads may ask at once (the notifier's)
        # The state last taken or refused: none yet, so the first look judges the file as
        # it is then (it may have changed since the program read it at start).
        self._judged: _State = _UNSEEN
        self._seen: _State = _UNSEEN  # the newest state seen, and since when
        self._seen_at = clock()
        self._checked_at = clock()
        self.changes = 0  # how many edits were taken up

    def current(self) -> RuleSet:
        """The rules as the file says now, or the last good ones."""
        with self._lock:
            return self._current()

    def _current(self) -> RuleSet:
        now = self.clock()
        if now - self._checked_at < self.check_seconds:
            return self._rules
        self._checked_at = now
        state = _fingerprint(self.path)
        if state != self._seen:  # changed since the last look: wait for it to settle
            self._seen, self._seen_at = state, now
        if state == self._judged or now - self._seen_at < self.settle_seconds:
            return self._rules
        try:
            rules = read_rules(self.path)
        except RulesError as exc:
            self._judged = state
            if self.log is not None:
                self.log(f"{exc}; the edit is refused, rules {self._rules.version()} keep running")
            return self._rules
        if rules.version() == self._rules.version():
            self._judged = state
            return self._rules
        if self.on_change is not None:
            self.on_change(rules)  # before the rules are taken: a failure takes nothing
        if self.log is not None:
            count = "alerting off" if rules.off else f"{len(rules.rules)} rule(s)"
            change = f"{self._rules.version()} -> {rules.version()}"
            self.log(f"rules {change} from {self.path}: {count}")
        self._judged, self._rules = state, rules
        self.changes += 1
        return rules


@dataclass(frozen=True)
class TemperatureLimits:
    """A sensor's temperature thresholds under a rule set, as people draw them and the
    producer scripts incidents over them (None: no such rule covers the sensor)."""

    critical_c: float | None  # the highest upward reading rule on temperature
    critical_source: str | None  # where that threshold came from (threshold_for)
    warning_c: float | None  # the highest upward window rule averaging temperature


def temperature_limits(
    rules: RuleSet,
    sensor_id: str,
    site: str | None,
    model: str | None,
    registry: dict[str, float] | None = None,
) -> TemperatureLimits:
    """:class:`TemperatureLimits` of one sensor (``registry``: its registry numbers)."""
    critical: tuple[float, str] | None = None
    warning: float | None = None
    for rule in rules.rules:
        if not isinstance(rule, ReadingRule | WindowRule) or rule.field != "temperature_c":
            continue
        if rule.op not in (">", ">=") or not rule.scope.covers(sensor_id, site, model):
            continue
        threshold, source = rule.threshold_for(sensor_id, site, model, registry)
        if isinstance(rule, ReadingRule) and (critical is None or threshold > critical[0]):
            critical = (threshold, f"{rule.name}: {source}")
        elif isinstance(rule, WindowRule) and rule.aggregate == "avg":
            warning = threshold if warning is None else max(warning, threshold)
    return TemperatureLimits(
        None if critical is None else critical[0],
        None if critical is None else critical[1],
        warning,
    )


def breach_level(
    rules: RuleSet,
    field: str,
    upward: bool,
    sensor_id: str,
    site: str | None,
    model: str | None,
) -> float | None:
    """The value a sensor's ``field`` must pass (above when ``upward``, else below) to
    breach every reading rule and every averaging window rule on it that looks that way
    and covers the sensor: what the producer's scripted incidents aim past (None: no such
    rule)."""
    found = []
    for rule in rules.rules:
        if isinstance(rule, WindowRule) and rule.aggregate != "avg":
            continue
        if not isinstance(rule, ReadingRule | WindowRule) or rule.field != field:
            continue
        if (rule.op in (">", ">=")) != upward or not rule.scope.covers(sensor_id, site, model):
            continue
        found.append(rule.threshold_for(sensor_id, site, model)[0])
    if not found:
        return None
    return max(found) if upward else min(found)


def describe(rules: Iterable[Rule]) -> list[str]:
    """One line per rule, for people: what it watches and when it fires."""
    lines = []
    for rule in rules:
        scope = "" if rule.scope.everyone else " in " + _scope_text(rule.scope)
        if isinstance(rule, ReadingRule):
            what = f"a reading's {rule.field} {rule.op} {rule.threshold:g}"
        elif isinstance(rule, WindowRule):
            measured = "readings" if rule.aggregate == "count" else f"{rule.field}"
            what = (
                f"{rule.aggregate} {measured} over {rule.window} {rule.op} {rule.threshold:g} "
                f"(at least {rule.min_readings} readings)"
            )
        elif isinstance(rule, AbsenceRule):
            who = "a registered sensor" if rule.registered_only else "a sensor"
            what = f"{who} silent for {rule.after}"
        elif isinstance(rule, RateRule):
            sign = "+" if rule.trend == "rising" else "-"
            what = (
                f"{rule.field} {rule.trend} {sign}{rule.per_minute:g} {rule.unit} or faster "
                f"(slope over {rule.window}) for {rule.for_}"
            )
        elif isinstance(rule, DeviationRule):
            side = {"both": "either side of", "above": "above", "below": "below"}[rule.direction]
            what = (
                f"{rule.field} {rule.deviations:g} deviations {side} its own baseline "
                f"(over {rule.horizon}, warm after {rule.warm_up or rule.horizon}) "
                f"for {rule.for_}"
            )
        else:
            what = f"{rule.field} unchanged over {rule.window} ({rule.min_readings}+ readings)"
        extra = ""
        if isinstance(rule, ReadingRule | WindowRule):
            if rule.overrides:
                extra += f", {len(rule.overrides)} override(s)"
            if rule.registry_threshold:
                extra += f", the registry's {rule.registry_threshold} wins"
        lines.append(f"{rule.name} ({rule.kind}, {rule.severity}): {what}{scope}{extra}")
    return lines


def _scope_text(scope: Scope) -> str:
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in (("sites", scope.sites), ("models", scope.models),
                             ("sensors", scope.sensors))
        if names
    ]  # fmt: skip
    return "; ".join(parts)


__all__ = [
    "AGGREGATES",
    "COMPUTED",
    "FIELDS",
    "KINDS",
    "SETTLE_S",
    "UNITS",
    "WINDOWS",
    "AbsenceRule",
    "DeviationRule",
    "Override",
    "RateRule",
    "ReadingRule",
    "Rule",
    "RuleSet",
    "RulesError",
    "RulesFile",
    "Scope",
    "StuckRule",
    "TemperatureLimits",
    "WindowRule",
    "breach_level",
    "describe",
    "is_rule_name",
    "known_rules",
    "parse_rules",
    "read_rules",
    "rules_from_json",
    "temperature_limits",
]
