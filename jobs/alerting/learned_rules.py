"""The rules that learn from a sensor's own history, ``rate`` and ``deviation``, on the
panes the windows query closes: DataFrame functions, the per-sensor work in pandas on
the executors (jobs/alerting/rate.py and jobs/alerting/baseline.py decide).

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

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.sql.window import Window

from contract.registry import Entry
from contract.rules import DeviationRule, RateRule, RuleSet
from contract.times import interval_seconds
from jobs.alerting.alerts import as_alerts
from jobs.alerting.baseline import Baseline, BaselineParams, run
from jobs.alerting.rate import RateParams, hits
from jobs.alerting.window_rules import scope_sensors
from jobs.writer.tables import BASELINES

LEARNED_KINDS = ("rate", "deviation")
PANE = timedelta(minutes=1)

# What the per-sensor functions return: alerts (kind "alert") and baselines ("state").
_OUT = StructType(
    [
        StructField("kind", StringType()),
        StructField("sensor_id", StringType()),
        StructField("rule", StringType()),
        StructField("severity", StringType()),
        StructField("window_start", TimestampType()),
        StructField("observed_value", DoubleType()),
        StructField("threshold", DoubleType()),
        StructField("readings", LongType()),
        *(f for f in BASELINES.fields if f.name not in ("sensor_id", "rule", "writer", "batch_id")),
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
        b = self.baseline
        if b is None:
            return ""
        return json.dumps([self.field, b.horizon.total_seconds(), b.max_step.total_seconds()])

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
            baseline = BaselineParams(
                horizon=_seconds(rule.horizon),
                deviations=rule.deviations,
                for_=_seconds(rule.for_),
                warm_up=timedelta(seconds=rule.warm_up_seconds),
                direction=rule.direction,
                min_sd=rule.min_sd,
            )
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


def _utc(value: object) -> datetime:
    moment = pd.Timestamp(value)
    moment = moment.tz_localize(UTC) if moment.tzinfo is None else moment.tz_convert(UTC)
    return moment.to_pydatetime()


def _alert(rule: Learned, sensor: str, pane: datetime, value: float, threshold: float,
           readings: int) -> dict:  # fmt: skip
    return {
        "kind": "alert", "sensor_id": sensor, "rule": rule.name, "severity": rule.severity,
        "window_start": pane, "observed_value": float(value), "threshold": float(threshold),
        "readings": int(readings),
    }  # fmt: skip


def _judge(rules: Sequence[Learned], panes: pd.DataFrame, state: pd.DataFrame) -> list[dict]:
    """One sensor's alerts and moved baselines, from its panes (``judged``: closed in
    this batch) and its baselines before the batch."""
    sensor = str(panes["sensor_id"].iloc[0])
    panes = panes.sort_values("window_start")
    times = [_utc(t) for t in panes["window_start"]]
    readings = dict(zip(times, panes["readings"], strict=True))
    judged = [t for t, j in zip(times, panes["judged"], strict=True) if j]
    out: list[dict] = []
    for rule in rules:
        if not rule.covers(sensor) or not judged:
            continue
        values = list(zip(times, panes[f"avg_{rule.field}"].astype(float), strict=True))
        if rule.rate is not None:
            span = (judged[0] - PANE / 2, judged[-1])
            for hit in hits(values, span, rule.rate):
                if hit.pane in set(judged):
                    out.append(_alert(rule, sensor, hit.pane, hit.rate, hit.threshold,
                                      readings[hit.pane]))  # fmt: skip
            continue
        assert rule.baseline is not None  # a deviation rule
        mine = (
            state[(state["rule"] == rule.name) & (state["params"] == rule.params)]
            if len(state)
            else state
        )
        before = _baseline(mine.iloc[0]) if len(mine) else None
        fresh = [(t, v) for t, v in values if t in set(judged)]
        after, breaches = run(before, fresh, rule.baseline)
        for b in breaches:
            out.append(_alert(rule, sensor, b.pane, b.value, b.threshold, readings[b.pane]))
        if after is not None and after != before:
            out.append(_state_row(rule, sensor, after))
    return out


def _baseline(row: pd.Series) -> Baseline:
    since = row["breach_since"]
    return Baseline(
        mean=float(row["mean"]),
        var=float(row["var"]),
        learned=timedelta(seconds=float(row["learned_s"])),
        taught=int(row["taught"]),
        last_pane=_utc(row["last_pane"]),
        breach_since=None if pd.isna(since) else _utc(since),
    )


def _state_row(rule: Learned, sensor: str, state: Baseline) -> dict:
    return {
        "kind": "state", "sensor_id": sensor, "rule": rule.name, "params": rule.params,
        "mean": state.mean, "var": state.var, "learned_s": state.learned.total_seconds(),
        "taught": state.taught, "last_pane": state.last_pane,
        "breach_since": state.breach_since,
    }  # fmt: skip


def _frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=_OUT.fieldNames())
    # An alert row has no baseline, a baseline row no readings (0 there: each kind's rows
    # keep only their own columns), and instants are typed even where all are missing.
    for f in _OUT.fields:
        column = frame[f.name]
        if isinstance(f.dataType, TimestampType):
            frame[f.name] = pd.to_datetime(column, utc=True)
        elif isinstance(f.dataType, LongType):
            frame[f.name] = column.fillna(0).astype("int64")
        elif isinstance(f.dataType, DoubleType):
            frame[f.name] = column.astype("float64")
        else:  # text: None where missing (a column of NaN alone would be a float one)
            frame[f.name] = column.astype("object").where(column.notna(), None)
    return frame


def judge_sensors(
    rules: Sequence[Learned],
) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    """The cogroup function: (panes, baselines) of one sensor -> alert and state rows."""

    def judge(panes: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        if panes.empty:
            return _frame([])
        return _frame(_judge(rules, panes, state))

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
    """A batch's learned-rule results: alert rows (ALERTS) and baseline rows (BASELINES)."""

    alerts: DataFrame
    baselines: DataFrame


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
    out = (
        panes.groupBy("sensor_id")
        .cogroup(state.groupBy("sensor_id"))
        .applyInPandas(judge_sensors(rules), _OUT)
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
    return Judged(as_alerts(alerts, detected_at), moved.select(*BASELINES.fieldNames()))
