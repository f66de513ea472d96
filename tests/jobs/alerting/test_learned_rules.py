"""The rate and deviation rules on panes as the windows query closes them
(jobs/alerting/learned_rules.py), on real Spark with static DataFrames: batches cut
anywhere, and a replayed batch, raise what the pure functions raise over all the panes."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from pyspark.sql import functions as F

from contract.rules.parsing import parse_rules
from jobs.alerting.baseline import run
from jobs.alerting.learned_rules import learned_results, learned_rules
from jobs.alerting.rate import hits
from jobs.writer.tables import BASELINES_SCHEMA, PANES_SCHEMA

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RULES = parse_rules({"rule": [
    {"name": "warming_fast", "kind": "rate", "severity": "warning", "field": "temperature_c",
     "per_minute": 2.0, "window": "5 minutes", "for": "2 minutes"},
    {"name": "off_normal", "kind": "deviation", "severity": "warning",
     "field": "temperature_c", "horizon": "30 minutes", "warm_up": "20 minutes",
     "for": "2 minutes", "deviations": 3.0},
]})  # fmt: skip
LEARNED = learned_rules(RULES, {})


def series() -> dict[str, list[float]]:
    """Per sensor, one pane average a minute for 100 minutes."""
    rng = random.Random(3)
    steady = [20 + rng.uniform(-0.3, 0.3) for _ in range(100)]
    jump = [*steady[:70], *([26.0] * 10), *steady[80:]]
    ramp = [20.0] * 60 + [20.0 + 3 * i for i in range(1, 11)] + [50.0] * 30
    return {"sensor-a": jump, "sensor-b": ramp}


def pane_rows(values: dict[str, list[float]], minutes: range) -> list[tuple]:
    rows = []
    for sensor, series_ in values.items():
        for m in minutes:
            start, x = T0 + m * MINUTE, series_[m]
            # Two readings of value x: sum 2x (the pane's average is x).
            rows.append((sensor, start, start + MINUTE, 2, 2 * x, x, x, 80.0, start,
                         start + timedelta(seconds=30), 40.0, 40.0, 180.0, 90.0, 90.0))  # fmt: skip
    return rows


def expected(values: dict[str, list[float]]) -> set[tuple[str, str, datetime]]:
    """The pure functions over every pane of each sensor."""
    found = set()
    ever = (T0 - timedelta(days=1), T0 + timedelta(days=1))
    for sensor, xs in values.items():
        panes = [(T0 + m * MINUTE, x) for m, x in enumerate(xs)]
        rate, deviation = LEARNED
        found |= {(sensor, rate.name, h.pane) for h in hits(panes, ever, rate.rate)}  # type: ignore[arg-type]
        _, breaches = run(None, panes, deviation.baseline)  # type: ignore[arg-type]
        found |= {(sensor, deviation.name, b.pane) for b in breaches}
    return found


def utc(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def judge_in_batches(spark, cuts: list[range], replay: int | None = None) -> set:
    values = series()
    frame = lambda rows, schema: spark.createDataFrame(rows, schema)  # noqa: E731
    registry = spark.createDataFrame([], "sensor_id string, site string")
    baselines = frame([], BASELINES_SCHEMA)
    found: set = set()
    for batch_id, minutes in enumerate(cuts):
        new = frame(pane_rows(values, minutes), PANES_SCHEMA)
        earlier = (
            frame(pane_rows(values, range(0, minutes.start)), PANES_SCHEMA)
            if minutes.start
            else None
        )
        for attempt in range(2 if batch_id == replay else 1):
            # A replay after a crash that wrote the batch's baselines already: the same.
            judged = learned_results(
                LEARNED, new, earlier, baselines, registry, F.current_timestamp(), "w", batch_id
            )
            # Instants as UTC text: collect() would give naive local times.
            alerts = judged.alerts.select(
                "sensor_id", "rule", F.date_format("window_start", "yyyy-MM-dd HH:mm").alias("at")
            ).collect()
            moved = judged.baselines.collect()
            if attempt == 0:
                baselines = baselines.unionByName(frame(moved, BASELINES_SCHEMA)).localCheckpoint()
        found |= {(a.sensor_id, a.rule, utc(a.at)) for a in alerts}
    return found


def test_batches_cut_anywhere_and_a_replay_raise_what_the_rules_raise(spark) -> None:
    want = expected(series())
    assert {r for _, r, _ in want} == {"warming_fast", "off_normal"}
    cuts = [range(0, 45), range(45, 71), range(71, 74), range(74, 100)]
    assert judge_in_batches(spark, cuts, replay=2) == want
