"""The rules file's ``reading`` rules on one ingest micro-batch held as Arrow, for any
number of rules, fields, comparisons, scopes and thresholds (``overheat_reading``,
jobs/overheat.py, is one such rule).

The driver compiles the rules with the registry once per change (:func:`compile_rules`):
per rule, each registered sensor's threshold (or none, outside the rule's scope) and the
threshold of sensors the registry does not know. Each ingest task then reduces the
readings it holds to one row per rule, sensor and 1-minute bucket in which a reading
breached its threshold (:func:`rule_buckets`), with the bucket's worst value (the highest
for ``>``/``>=``, the lowest for ``<``/``<=``) and how many distinct readings breached.
A rule costs a few vectorised passes over the batch, not a Spark job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from contract.registry import Entry
from contract.rules import ReadingRule

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
    field: str
    op: str
    sensor_ids: tuple[str, ...]  # registered sensors the rule covers ...
    thresholds: tuple[float, ...]  # ... and their thresholds, in the same order
    unregistered: float | None  # the threshold of a sensor the registry lacks (None: out)

    @property
    def high(self) -> bool:
        """Whether breaching means above (the bucket keeps its highest value)."""
        return self.op in (">", ">=")


def compile_rules(
    rules: Sequence[ReadingRule], sensors: Mapping[str, Entry]
) -> tuple[CompiledRule, ...]:
    """Each rule's threshold per sensor it covers, by :meth:`ReadingRule.threshold_for`.
    A sensor the registry lacks is covered by a rule for every sensor (the rule's own
    threshold) or by one that names its id (its sensor override, else the rule's)."""
    compiled = []
    for rule in rules:
        covered: dict[str, float] = {}
        for sensor in sensors.values():
            if rule.scope.covers(sensor.sensor_id, sensor.site, sensor.model):
                own = None if sensor.max_temp_c is None else {"max_temp_c": sensor.max_temp_c}
                covered[sensor.sensor_id] = rule.threshold_for(
                    sensor.sensor_id, sensor.site, sensor.model, own
                )[0]
        for sensor_id in rule.scope.sensors:
            if sensor_id not in sensors:
                covered[sensor_id] = rule.threshold_for(sensor_id, None, None)[0]
        unregistered = rule.threshold if rule.scope.everyone else None
        compiled.append(
            CompiledRule(rule.name, rule.field, rule.op, tuple(covered),
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
        worst = "max" if rule.high else "min"
        grouped = rows.group_by(["sensor_id", "window_start"]).aggregate(
            [("value", worst), ("event_id", "count_distinct"), ("threshold", "max"),
             ("kafka_timestamp", "min")]
        )  # fmt: skip
        grouped = grouped.rename_columns(
            {f"value_{worst}": "observed_value", "event_id_count_distinct": "readings",
             "threshold_max": "threshold", "kafka_timestamp_min": "first_reading_at"}
        )  # fmt: skip
        grouped = grouped.append_column("rule", pa.array([rule.name] * grouped.num_rows))
        parts.append(grouped.select(RULE_BUCKET.names).cast(RULE_BUCKET))
    if not parts:
        return RULE_BUCKET.empty_table()
    return pa.concat_tables(parts)
