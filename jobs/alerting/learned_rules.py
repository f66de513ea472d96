"""The rules that learn from a sensor's own history, ``rate`` and ``deviation``, on the
panes the windows query closes: DataFrame functions, the per-sensor work in plain Python
on the executors, one pass over each partition sorted by sensor (jobs/alerting/rate.py
and jobs/alerting/baseline.py decide).

Both judge a pane by the average of the rule's field in it (its sum over its readings).

- ``rate`` is a function of the panes alone: the batch's panes and, read back from
  ``_panes``, ``window + for`` of the sensor's panes before them (:func:`rate_reach`).
- ``deviation`` keeps each (sensor, rule) baseline in the ``_baselines`` table: every
  batch appends the baselines it moved, tagged with its batch id, in the batch's own
  transaction (jobs/writer/delta_io.BatchWriter), and starts from the newest rows of
  earlier batches. A replayed batch therefore starts from the same baselines, whether or
  not its own rows were written before the crash, and writes nothing twice. A baseline
  learned with other parameters (an edited rule) starts again.

Only the alert rows reach the driver; the baselines go from executors to the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    StringType,
    StructField,
    StructType,
)
from pyspark.sql.window import Window

from contract.registry import Entry
from contract.rules.model import DeviationRule, RateRule, RuleSet
from contract.times import interval_seconds
from jobs.alerting.alert_columns import as_alerts
from jobs.alerting.baseline import Baseline, BaselineParams, learned_with, params_of, run
from jobs.alerting.rate import RateParams, hits
from jobs.alerting.window_rules import scope_sensors
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALERTS_SCHEMA, BASELINES_SCHEMA, columns

LEARNED_KINDS = ("rate", "deviation")
PANE = timedelta(minutes=1)

# What the per-sensor functions return: alerts (kind "alert") and baselines ("state").
_OUT = StructType(
    [
        StructField("kind", StringType()),
        *columns(
            ALERTS_SCHEMA, "sensor_id rule severity window_start observed_value threshold readings"
        ),
        *(
            f
            for f in BASELINES_SCHEMA.fields
            if f.name not in ("sensor_id", "rule", "writer", "batch_id")
        ),
    ]
)


@dataclass(frozen=True)
class Learned:
    """One rate or deviation rule as the executors need it (picklable, small)."""

    name: str
    kind: str
    severity: str
    field: str
    sensors: frozenset[str] | None  # its scope (None: every sensor)
    rate: RateParams | None = None
    baseline: BaselineParams | None = None

    @property
    def params(self) -> str:
        """What a baseline was learned with: another value starts it again."""
        return "" if self.baseline is None else learned_with(self.field, self.baseline)

    def covers(self, sensor_id: str) -> bool:
        """Whether the rule judges this sensor."""
        return self.sensors is None or sensor_id in self.sensors


def _seconds(text: str) -> timedelta:
    return timedelta(seconds=interval_seconds(text))


def learned_rules(rules: RuleSet, sensors: Mapping[str, Entry]) -> tuple[Learned, ...]:
    """The rate and deviation rules of ``rules``, scopes resolved with the registry."""
    found = []
    for rule in rules.rules:
        if isinstance(rule, RateRule):
            params = RateParams(
                rule.per_minute, _seconds(rule.window), _seconds(rule.for_), rule.trend
            )
            found.append(
                Learned(rule.name, rule.kind, rule.severity, rule.field,
                        scope_sensors(rule, sensors), rate=params)
            )  # fmt: skip
        elif isinstance(rule, DeviationRule):
            baseline = params_of(rule)
            found.append(
                Learned(rule.name, rule.kind, rule.severity, rule.field,
                        scope_sensors(rule, sensors), baseline=baseline)
            )  # fmt: skip
    return tuple(found)


def rate_reach(rules: Sequence[Learned]) -> timedelta:
    """How far before a batch's panes the rate rules read (0 without one)."""
    return max((r.rate.reach for r in rules if r.rate is not None), default=timedelta(0))


def _averages(panes: DataFrame, fields: Sequence[str], judged: bool) -> DataFrame:
    return panes.select(
        "sensor_id",
        "window_start",
        "readings",
        *((F.col(f"sum_{f}") / F.col("readings")).alias(f"avg_{f}") for f in sorted(set(fields))),
        F.lit(judged).alias("judged"),
    )


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _alert(rule: Learned, sensor: str, pane: datetime, value: float, threshold: float,
           readings: int) -> dict:  # fmt: skip
    return {
        "kind": "alert", "sensor_id": sensor, "rule": rule.name, "severity": rule.severity,
        "window_start": pane, "observed_value": float(value), "threshold": float(threshold),
        "readings": int(readings),
    }  # fmt: skip


def _value(value: float | None) -> float:
    return math.nan if value is None else float(value)


def judge_sensor(
    rules: Sequence[Learned], sensor: str, panes: list[dict], states: list[dict]
) -> list[dict]:
    """One sensor's alerts and moved baselines (rows of ``_OUT``), from its panes (rows
    with ``window_start``, ``readings``, ``avg_<field>`` and ``judged``: closed in this
    batch) and its baselines before the batch (rows of ``_baselines``)."""
    panes = sorted(panes, key=lambda p: p["window_start"])
    times = [_utc(p["window_start"]) for p in panes]
    readings = {t: p["readings"] for t, p in zip(times, panes, strict=True)}
    judged = [t for t, p in zip(times, panes, strict=True) if p["judged"]]
    if not judged:
        return []
    closed = set(judged)
    out: list[dict] = []
    for rule in rules:
        if not rule.covers(sensor):
            continue
        values = [(t, _value(p[f"avg_{rule.field}"])) for t, p in zip(times, panes, strict=True)]
        if rule.rate is not None:
            span = (judged[0] - PANE / 2, judged[-1])
            for hit in hits(values, span, rule.rate):
                if hit.pane in closed:
                    out.append(_alert(rule, sensor, hit.pane, hit.rate, hit.threshold,
                                      readings[hit.pane]))  # fmt: skip
            continue
        assert rule.baseline is not None  # a deviation rule
        mine = next(
            (s for s in states if s["rule"] == rule.name and s["params"] == rule.params), None
        )
        before = None if mine is None else _baseline(mine)
        after, breaches = run(before, [(t, v) for t, v in values if t in closed], rule.baseline)
        for b in breaches:
            out.append(_alert(rule, sensor, b.pane, b.value, b.threshold, readings[b.pane]))
        if after is not None and after != before:
            out.append(_state_row(rule, sensor, after))
    return out


def _baseline(row: Mapping) -> Baseline:
    since = row["breach_since"]
    return Baseline(
        mean=float(row["mean"]),
        var=float(row["var"]),
        learned=timedelta(seconds=float(row["learned_s"])),
        taught=int(row["taught"]),
        last_pane=_utc(row["last_pane"]),
        breach_since=None if since is None else _utc(since),
    )


def _state_row(rule: Learned, sensor: str, state: Baseline) -> dict:
    return {
        "kind": "state", "sensor_id": sensor, "rule": rule.name, "params": rule.params,
        "mean": state.mean, "var": state.var, "learned_s": state.learned.total_seconds(),
        "taught": state.taught, "last_pane": state.last_pane,
        "breach_since": state.breach_since, "readings": 0,
    }  # fmt: skip


def judge_partitions(
    rules: Sequence[Learned],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function: a partition's rows (panes and baselines, ``_state`` tells
    which), sorted by sensor, to alert and baseline rows. A sensor's rows may span two
    Arrow batches: its group is judged once the next sensor's rows begin."""
    schema = arrow_schema(_OUT)

    pane_columns = ("window_start", "readings", "judged", *{f"avg_{r.field}" for r in rules})
    state_columns = [
        f.name for f in BASELINES_SCHEMA.fields if f.name not in ("writer", "batch_id")
    ]

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sensor: str | None = None
        panes: list[dict] = []
        states: list[dict] = []
        for batch in batches:
            out: list[dict] = []
            # Columns as lists, and per row a dict of its kind's columns alone: a third of
            # the cost of whole rows (batch.to_pylist).
            columns = batch.to_pydict()
            for i, (row_sensor, is_state) in enumerate(
                zip(columns["sensor_id"], columns["_state"], strict=True)
            ):
                if row_sensor != sensor:
                    if sensor is not None:
                        out.extend(judge_sensor(rules, sensor, panes, states))
                    sensor, panes, states = row_sensor, [], []
                if is_state:
                    states.append({c: columns[c][i] for c in state_columns})
                else:
                    panes.append({c: columns[c][i] for c in pane_columns})
            if out:
                yield pa.RecordBatch.from_pylist(out, schema=schema)
        if sensor is not None:
            last = judge_sensor(rules, sensor, panes, states)
            if last:
                yield pa.RecordBatch.from_pylist(last, schema=schema)

    return judge


def newest_baselines(baselines: DataFrame, writer: str, batch_id: int) -> DataFrame:
    """Each (sensor, rule)'s newest baseline ``writer`` wrote before batch ``batch_id``."""
    newest = Window.partitionBy("sensor_id", "rule").orderBy(F.col("batch_id").desc())
    return (
        baselines.filter((F.col("writer") == writer) & (F.col("batch_id") < batch_id))
        .withColumn("_n", F.row_number().over(newest))
        .filter(F.col("_n") == 1)
        .drop("_n", "writer", "batch_id")
    )


@dataclass(frozen=True)
class Judged:
    """A batch's learned-rule results: alert rows (ALERTS_SCHEMA) and baseline rows
    (BASELINES_SCHEMA), both from one cached judgement (:meth:`release` once both are
    written)."""

    alerts: DataFrame
    baselines: DataFrame
    judged: DataFrame

    def release(self) -> None:
        """Drop the cached judgement."""
        self.judged.unpersist()


def learned_results(
    rules: Sequence[Learned],
    new: DataFrame,
    earlier: DataFrame | None,
    baselines: DataFrame,
    registry: DataFrame,
    detected_at: Column,
    writer: str,
    batch_id: int,
) -> Judged:
    """The batch's alerts and moved baselines: ``new`` the panes it closed, ``earlier``
    the panes before them (``rate_reach`` back), ``baselines`` the ``_baselines`` table,
    ``writer`` the windows query's writer id (jobs/writer/delta_io.BatchWriter.app_id)."""
    fields = [r.field for r in rules]
    panes = _averages(new, fields, True)
    if earlier is not None and rate_reach(rules):
        touched = new.select("sensor_id").distinct()
        panes = panes.unionByName(
            _averages(earlier.join(touched, "sensor_id", "left_semi"), fields, False)
        )
    state = newest_baselines(baselines, writer, batch_id).join(
        new.select("sensor_id").distinct(), "sensor_id", "left_semi"
    )
    # One pass over each partition's rows sorted by sensor: a pandas group per sensor
    # (cogroup, applyInPandas) cost 4 ms of Python a sensor, 7 minutes a batch at 100,000.
    rows = panes.withColumn("_state", F.lit(False)).unionByName(
        state.withColumn("_state", F.lit(True)), allowMissingColumns=True
    )
    out = (
        rows.repartition("sensor_id")
        .sortWithinPartitions("sensor_id")
        .mapInArrow(judge_partitions(rules), _OUT)
        .persist()  # read twice: the alerts to the driver, the baselines to the table
    )
    alerts = (
        out.filter(F.col("kind") == "alert")
        .withColumn("window_end", F.col("window_start") + F.expr("INTERVAL 1 MINUTE"))
        .join(F.broadcast(registry.select("sensor_id", "site")), "sensor_id", "left")
    )
    moved = (
        out.filter(F.col("kind") == "state")
        .withColumn("writer", F.lit(writer))
        .withColumn("batch_id", F.lit(batch_id).cast("long"))
    )
    return Judged(as_alerts(alerts, detected_at), moved.select(*BASELINES_SCHEMA.fieldNames()), out)
