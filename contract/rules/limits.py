"""What a rule set means for one sensor's temperature: the limits the simulator scripts
its incidents around and the dashboard draws."""

from __future__ import annotations

from dataclasses import dataclass

from contract.rules.model import ReadingRule, RuleSet, WindowRule


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
