"""The rules file's ``reading`` rules on one ingest micro-batch held as Arrow, for any
number of rules, fields, comparisons, scopes and thresholds (``overheat_reading`` of
conf/rules.toml is one such rule).

The driver compiles the rules with the registry for each batch (:func:`compile_rules`):
per rule, each registered sensor's threshold (or none, outside the rule's scope) and the
threshold of sensors the registry does not know. Each ingest task then reduces the
readings it holds to one row per rule, sensor and 1-minute bucket in which a reading
breached its threshold (:func:`rule_buckets`), with the bucket's worst value (the highest
for ``>``/``>=``, the lowest for ``<``/``<=``) and how many distinct readings breached.
A rule costs a few vectorised passes over the batch, not a Spark job. The driver merges
the tasks' rows (:func:`merge_buckets`) and makes them alerts (:func:`reading_alerts`):
one per rule, sensor and bucket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row

from contract.alerts import UNREGISTERED, alert_id
from contract.registry import Entry
from contract.rules.model import ReadingRule, WindowRule
from jobs.writer.tables import ALERTS_SCHEMA

BUCKET = timedelta(minutes=1)

# One row per rule, sensor and bucket with a breach: what a task hands the driver.
RULE_BUCKET = pa.schema(
    [
        ("rule", pa.string()),
        ("sensor_id", pa.string()),
        ("window_start", pa.timestamp("us", tz="UTC")),
        ("observed_value", pa.float64()),
        ("readings", pa.int64()),
        ("threshold", pa.float64()),
        # When the bucket's first breaching reading of the batch reached Kafka.
        ("first_reading_at", pa.timestamp("us", tz="UTC")),
    ]
)
_COMPARE = {">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}


@dataclass(frozen=True)
class CompiledRule:
    """A reading rule with its thresholds resolved for the registry's sensors: small,
    picklable, sent to the tasks with each batch."""

    name: str
    field: str | None  # None: a window rule that counts readings
    op: str
    severity: str
    sensor_ids: tuple[str, ...]  # registered sensors the rule covers ...
    thresholds: tuple[float, ...]  # ... and their thresholds, in the same order
    unregistered: float | None  # the threshold of a sensor the registry lacks (None: out)

    @property
    def high(self) -> bool:
        """Whether breaching means above (the bucket keeps its highest value)."""
        return self.op in (">", ">=")


def compile_rules(
    rules: Sequence[ReadingRule | WindowRule], sensors: Mapping[str, Entry]
) -> tuple[CompiledRule, ...]:
    """Each rule's threshold per sensor it covers, by :meth:`ReadingRule.threshold_for`.
    A sensor the registry lacks is covered by a rule for every sensor (the rule's own
    threshold, or an override naming its id) or by one that names its id."""
    compiled = []
    for rule in rules:
        covered: dict[str, float] = {}
        for sensor in sensors.values():
            if rule.scope.covers(sensor.sensor_id, sensor.site, sensor.model):
                own = None if sensor.max_temp_c is None else {"max_temp_c": sensor.max_temp_c}
                covered[sensor.sensor_id] = rule.threshold_for(
                    sensor.sensor_id, sensor.site, sensor.model, own
                )[0]
        named = [*rule.scope.sensors]
        if rule.scope.everyone:
            named += [sensor_id for o in rule.overrides for sensor_id in o.sensors]
        for sensor_id in named:
            if sensor_id not in sensors:
                covered[sensor_id] = rule.threshold_for(sensor_id, None, None)[0]
        unregistered = rule.threshold if rule.scope.everyone else None
        compiled.append(
            CompiledRule(rule.name, rule.field, rule.op, rule.severity, tuple(covered),
                         tuple(covered.values()), unregistered)
        )  # fmt: skip
    return tuple(compiled)


def rule_thresholds(sensor_ids: pa.ChunkedArray | pa.Array, rule: CompiledRule) -> pa.Array:
    """Each reading's threshold under ``rule``: its sensor's, else (a sensor the registry
    lacks) ``unregistered``; null where the rule does not cover the sensor. (A rule with
    an ``unregistered`` threshold is for every sensor: it lists every registered one.)"""
    listed = pa.array(rule.sensor_ids, pa.string())
    found = pc.take(pa.array(rule.thresholds, pa.float64()), pc.index_in(sensor_ids, listed))
    if rule.unregistered is None:
        return found
    return pc.fill_null(found, float(rule.unregistered))


def _per_bucket(rows: pa.Table, columns: Mapping[str, tuple[str, str]]) -> pa.Table:
    """``rows`` grouped by rule, sensor and bucket into :data:`RULE_BUCKET` rows;
    ``columns`` gives each other column as (the column of ``rows``, the aggregation)."""
    grouped = rows.group_by(["rule", "sensor_id", "window_start"]).aggregate(list(columns.values()))
    grouped = grouped.rename_columns(
        {f"{source}_{how}": name for name, (source, how) in columns.items()}
    )
    return grouped.select(RULE_BUCKET.names).cast(RULE_BUCKET)


def rule_buckets(readings: pa.Table, rules: Sequence[CompiledRule]) -> pa.Table:
    """The readings that breach a rule, one row per rule, sensor and 1-minute bucket
    (:data:`RULE_BUCKET`): the worst value, how many distinct readings breached, the
    threshold, the first breaching reading's Kafka timestamp."""
    parts = []
    for rule in rules:
        limit = rule_thresholds(readings["sensor_id"], rule)
        rows = pa.table(
            {
                "event_id": readings["event_id"],
                "sensor_id": readings["sensor_id"],
                "event_time": readings["event_time"],
                "value": readings[rule.field],
                "threshold": limit,
                "kafka_timestamp": readings["kafka_timestamp"],
            }
        )
        breached = _COMPARE[rule.op](rows["value"], rows["threshold"])
        rows = rows.filter(pc.fill_null(breached, False))
        if rows.num_rows == 0:
            continue
        rows = rows.append_column(
            "window_start", pc.floor_temporal(rows["event_time"], unit="minute")
        )
        rows = rows.append_column("rule", pa.array([rule.name] * rows.num_rows, pa.string()))
        worst = "max" if rule.high else "min"
        parts.append(
            _per_bucket(rows, {"observed_value": ("value", worst),
                               "readings": ("event_id", "count_distinct"),
                               "threshold": ("threshold", "max"),
                               "first_reading_at": ("kafka_timestamp", "min")})
        )  # fmt: skip
    if not parts:
        return RULE_BUCKET.empty_table()
    return pa.concat_tables(parts)


def merge_buckets(buckets: pa.Table, rules: Sequence[CompiledRule]) -> pa.Table:
    """The tasks' :func:`rule_buckets` rows, one per rule, sensor and bucket: the worst
    value by the rule's direction, the counts added up.

    Counts add up: a reading and its re-sent copies share their Kafka key, the sensor id,
    so they reach the same Kafka partition and with it the same task (Spark's Kafka
    source reads a topic partition in one task, and the job merges only whole ones).
    """
    parts = []
    for high in (True, False):
        names = pa.array([r.name for r in rules if r.high == high], pa.string())
        part = buckets.filter(pc.is_in(buckets["rule"], names))
        if part.num_rows == 0:
            continue
        worst = "max" if high else "min"
        parts.append(
            _per_bucket(part, {"observed_value": ("observed_value", worst),
                               "readings": ("readings", "sum"),
                               "threshold": ("threshold", "max"),
                               "first_reading_at": ("first_reading_at", "min")})
        )  # fmt: skip
    return pa.concat_tables(parts) if parts else RULE_BUCKET.empty_table()


def reading_hits(readings: pa.Table, rules: Sequence[CompiledRule]) -> pa.Table:
    """:func:`merge_buckets` of :func:`rule_buckets` for readings held in one place (tests,
    tools)."""
    return merge_buckets(rule_buckets(readings, rules), rules)


def reading_alerts(
    hits: pa.Table,
    rules: Sequence[CompiledRule],
    sensors: Mapping[str, Entry],
    detected_at: datetime,
) -> list[Row]:
    """The alerts table's rows for merged :func:`rule_buckets` rows, detected at
    ``detected_at``: the rule's name and severity, the bucket's minute as the window."""
    severity = {rule.name: rule.severity for rule in rules}
    alerts = []
    for hit in hits.to_pylist():
        sensor = sensors.get(hit["sensor_id"])
        start = hit["window_start"]
        values = {
            **hit,
            "alert_id": alert_id(hit["sensor_id"], hit["rule"], start),
            "site": sensor.site if sensor is not None and sensor.site is not None else UNREGISTERED,
            "severity": severity[hit["rule"]],
            "window_end": start + BUCKET,
            "detected_at": detected_at,
        }
        alerts.append(Row(**{name: values[name] for name in ALERTS_SCHEMA.fieldNames()}))
    return alerts
