"""The rules file's window, stuck and absence rules on what the windows query closed: pure
DataFrame functions, with the rules as data joined to the statistics.

The rules and their thresholds are two small DataFrames (:class:`RuleFrames`), made on
the driver when the rules or the registry change: one row per window rule (what it
compares, how, its default threshold for sensors the registry lacks) and one row per
rule and sensor it covers with that sensor's threshold (overrides and the registry
resolved, jobs/alerting/reading_rules.py). Every window rule of a window is then one cross join
of the closed windows with the rules and one equi-join with the thresholds, whatever
the number of rules: a rule is rows, not a Spark job or a new query plan, so an edited
rules file changes no checkpoint. A stuck rule is a window rule: the range (max - min)
of its field at most 0.

Absence rules are few and each has its own timeout: each finds its silences in the
panes (jobs/windows/panes.py) and keeps the sensors of its scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from contract.registry import Entry
from contract.rules.model import COMPUTED, AbsenceRule, Rule, RuleSet, StuckRule, WindowRule
from contract.times import interval_seconds
from jobs.alerting.alert_columns import as_alerts, breached, threshold_of, thresholds_frame
from jobs.alerting.reading_rules import compile_rules
from jobs.spark.local_frames import local_frame
from jobs.spark.sql_text import sql_text
from jobs.windows.panes import silences

# One row per window rule.
WINDOW_RULES = StructType(
    [
        StructField("rule", StringType()),
        StructField("window", StringType()),
        StructField("measure", StringType()),  # "<aggregate>|<field>": see measured()
        StructField("op", StringType()),
        StructField("min_readings", LongType()),
        StructField("severity", StringType()),
        # The threshold of a sensor the registry lacks (null: the rule does not cover it).
        StructField("default_threshold", DoubleType()),
    ]
)


def measure_key(aggregate: str, field: str | None) -> str:
    """How a window rule's measure is named in :data:`WINDOW_RULES`."""
    return f"{aggregate}|{field or ''}"


def _stat(aggregate: str, field: str | None) -> str:
    """A window's measure (jobs/windows/panes.py's measures columns) as a window rule
    takes it, in SQL."""
    if aggregate == "count":
        return "CAST(`readings` AS DOUBLE)"
    if aggregate == "range":
        return f"`max_{field}` - `min_{field}`"
    return f"`{aggregate}_{field}`"


def measured() -> Column:
    """The value each row's rule compares: its measure of the row's window.

    SQL text, parsed in the JVM at once: built of ``Column`` objects, this CASE took
    1,500 Py4J round trips in every windows batch."""
    cases = " ".join(
        f"WHEN `measure` = {sql_text(measure_key(aggregate, field))} THEN {_stat(aggregate, field)}"
        for aggregate, field in sorted(COMPUTED, key=lambda p: (p[0], p[1] or ""))
    )
    return F.expr(f"CASE {cases} ELSE CAST(NULL AS DOUBLE) END")


def as_window_rule(rule: WindowRule | StuckRule) -> WindowRule:
    """A stuck rule as the window rule it is: the range of its field at most 0."""
    if isinstance(rule, WindowRule):
        return rule
    return WindowRule.model_validate(
        {"name": rule.name, "kind": "window", "severity": rule.severity,
         "resolve_after": rule.resolve_after, "scope": rule.scope.model_dump(),
         "window": rule.window, "aggregate": "range", "field": rule.field, "op": "<=",
         "threshold": 0.0, "min_readings": rule.min_readings}
    )  # fmt: skip


@dataclass
class RuleFrames:
    """The window rules and their thresholds as small DataFrames (their rows in the plan)."""

    rules: DataFrame
    thresholds: DataFrame
    absence: tuple[AbsenceRule, ...]
    covered: Mapping[str, frozenset[str] | None]  # absence rule -> its sensors (None: all)

    @classmethod
    def of(cls, spark: SparkSession, rule_set: RuleSet, sensors: Mapping[str, Entry]) -> RuleFrames:
        """The frames for ``rule_set`` with the registry's ``sensors``."""
        windowed = [
            as_window_rule(r) for r in rule_set.rules if isinstance(r, WindowRule | StuckRule)
        ]
        compiled = compile_rules(windowed, sensors)
        rules = [
            (r.name, r.window, measure_key(r.aggregate, r.field), r.op, r.min_readings,
             r.severity, c.unregistered)
            for r, c in zip(windowed, compiled, strict=True)
        ]  # fmt: skip
        absence = tuple(r for r in rule_set.rules if isinstance(r, AbsenceRule))
        covered = {r.name: scope_sensors(r, sensors) for r in absence}
        return cls(
            local_frame(spark, rules, WINDOW_RULES),
            thresholds_frame(spark, compiled),
            absence,
            covered,
        )


def scope_sensors(rule: Rule, sensors: Mapping[str, Entry]) -> frozenset[str] | None:
    """The sensors of ``rule``'s scope, by the registry's ``sensors`` and the ids the
    scope names (None: every sensor)."""
    if rule.scope.everyone:
        return None
    found = {
        s.sensor_id for s in sensors.values() if rule.scope.covers(s.sensor_id, s.site, s.model)
    }
    return frozenset(found | set(rule.scope.sensors))


def window_alerts(
    stats: DataFrame,
    window: str,
    frames: RuleFrames,
    registry: DataFrame,
    detected_at: Column,
) -> DataFrame:
    """The alerts of the window rules of ``window`` ("1m" or "5m") over closed windows
    ``stats`` (jobs/windows/panes.py's measures: avg, min and max of every measured field)."""
    rules = F.broadcast(frames.rules.filter(F.col("window") == window))
    paired = stats.crossJoin(rules).join(
        F.broadcast(frames.thresholds), ["rule", "sensor_id"], "left"
    )
    found = (
        paired.withColumn("threshold", threshold_of(F.col("default_threshold")))
        .withColumn("observed_value", measured())
        .filter(
            F.col("threshold").isNotNull()
            & (F.col("readings") >= F.col("min_readings"))
            & breached(F.col("op"), F.col("observed_value"), F.col("threshold"))
        )
        .join(F.broadcast(registry.select("sensor_id", "site")), "sensor_id", "left")
    )
    return as_alerts(found, detected_at)


def absence_alerts(
    panes_df: DataFrame,
    frames: RuleFrames,
    registry: DataFrame,
    registry_enabled: bool,
    after: datetime | None,
    until: datetime,
    detected_at: Column,
) -> DataFrame | None:
    """The alerts of the absence rules: each one's silences decided when the watermark
    moved from ``after`` to ``until`` (jobs/windows/panes.py), in its scope; None without
    absence rules. ``registered_only`` applies where a registry is in use."""
    parts = []
    sites = F.broadcast(registry.select("sensor_id", "site", F.lit(True).alias("registered")))
    for rule in frames.absence:
        timeout = interval_seconds(rule.after)
        found = silences(panes_df, timeout, after, until).join(sites, "sensor_id", "left")
        if rule.registered_only and registry_enabled:
            found = found.filter(F.col("registered").isNotNull())
        covered = frames.covered[rule.name]
        if covered is not None:
            found = found.filter(F.col("sensor_id").isin(sorted(covered)))
        parts.append(
            found.withColumn("rule", F.lit(rule.name))
            .withColumn("severity", F.lit(rule.severity))
            .withColumn("threshold", F.lit(float(timeout)))
            .withColumn("readings", F.lit(0).cast("long"))
        )
    if not parts:
        return None
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    return as_alerts(union, detected_at)


def longest_absence(rules: Sequence[Rule]) -> float:
    """The longest timeout of the absence rules, in seconds (0 without one)."""
    return max(
        (interval_seconds(r.after) for r in rules if isinstance(r, AbsenceRule)), default=0.0
    )
