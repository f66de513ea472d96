"""The deviation rule's learned baseline (jobs/alerting/baseline.py), on made-up panes."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from jobs.alerting.baseline import MIN_TAUGHT, BaselineParams, band, fresh, run, step

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
PARAMS = BaselineParams(
    horizon=timedelta(hours=1), deviations=3.0, for_=timedelta(minutes=3),
    warm_up=timedelta(minutes=30),
)  # fmt: skip


def minutes(values: list[float], start: int = 0) -> list[tuple[datetime, float]]:
    """One pane a minute from ``start`` minutes after T0."""
    return [(T0 + (start + i) * MINUTE, v) for i, v in enumerate(values)]


def noisy(n: int, mean: float = 20.0, spread: float = 0.5, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [mean + rng.uniform(-spread, spread) for _ in range(n)]


def oracle(panes: list[tuple[datetime, float]], params: BaselineParams) -> tuple[float, float]:
    """Mean and variance the textbook way: the same recurrence, written out once more."""
    mean, var, last = panes[0][1], 0.0, panes[0][0]
    for pane, x in panes[1:]:
        dt = min(pane - last, params.max_step).total_seconds()
        a = 1 - math.exp(-dt / params.horizon.total_seconds())
        mean, var = mean + a * (x - mean), (1 - a) * (var + a * (x - mean) ** 2)
        last = pane
    return mean, var


def test_the_baseline_is_an_exponentially_weighted_mean_and_variance() -> None:
    panes = minutes(noisy(120))
    state, breaches = run(None, panes, PARAMS)
    mean, var = oracle(panes, PARAMS)
    assert state is not None and not breaches
    assert (state.mean, state.var) == (pytest.approx(mean), pytest.approx(var))
    assert (state.taught, state.learned) == (120, 119 * MINUTE)


def test_it_may_fire_only_once_warm() -> None:
    """A jump in the first minutes is learned, not alerted: the warm-up holds."""
    panes = minutes([20.0] * 5 + [40.0] * 20)
    _, breaches = run(None, panes, PARAMS)
    assert breaches == []


def test_an_out_pane_alerts_after_for_and_says_what_it_compared() -> None:
    normal = minutes(noisy(60))
    state, _ = run(None, normal, PARAMS)
    assert state is not None and state.warm(PARAMS)
    low, high = band(state, PARAMS)
    hot = minutes([30.0] * 6, start=60)
    after, breaches = run(state, hot, PARAMS)
    # Out from minute 60; for = 3 minutes: alerts at minutes 63, 64, 65.
    assert [b.pane for b in breaches] == [T0 + m * MINUTE for m in (63, 64, 65)]
    first = breaches[0]
    assert (first.value, first.threshold) == (30.0, pytest.approx(high))
    assert first.mean == pytest.approx(state.mean) and first.sd == pytest.approx(state.sd)
    # Out panes never teach: the normal is the one before the breach.
    assert after is not None and after.mean == state.mean and after.var == state.var
    assert after.breach_since == T0 + 60 * MINUTE and low < 20.0 < high


def test_a_pane_back_inside_ends_the_breach_and_teaches_again() -> None:
    state, _ = run(None, minutes(noisy(60)), PARAMS)
    panes = minutes([30.0, 30.0, state.mean, 30.0, 30.0, 30.0], start=60)  # type: ignore[union-attr]
    after, breaches = run(state, panes, PARAMS)
    assert breaches == []  # never out for 3 minutes in a row
    assert after is not None and after.taught == state.taught + 1  # type: ignore[union-attr]


@pytest.mark.parametrize(("direction", "fires"), [("above", True), ("below", False)])
def test_a_one_sided_rule_ignores_the_other_side(direction: str, fires: bool) -> None:
    params = BaselineParams(**{**PARAMS.__dict__, "direction": direction})
    state, _ = run(None, minutes(noisy(60)), params)
    _, breaches = run(state, minutes([30.0] * 6, start=60), params)
    assert bool(breaches) is fires


def test_many_batches_give_what_one_batch_gives() -> None:
    """The job's batches cut the panes anywhere: the state and the alerts do not change."""
    panes = minutes(noisy(90) + [27.0] * 10 + noisy(30, seed=2))
    whole, all_at_once = run(None, panes, PARAMS)
    state, alerts = None, []
    for cut in range(0, len(panes), 7):
        state, found = run(state, panes[cut : cut + 7], PARAMS)
        alerts += found
    assert state == whole and alerts == all_at_once and all_at_once


def test_a_replayed_pane_changes_nothing() -> None:
    panes = minutes(noisy(40))
    state, _ = run(None, panes, PARAMS)
    assert state is not None
    again, breaches = run(state, panes[-5:], PARAMS)
    assert again == state and breaches == []


def test_a_long_gap_forgets_and_warms_up_again() -> None:
    state, _ = run(None, minutes(noisy(60)), PARAMS)
    later = T0 + timedelta(hours=5)
    after, breach = step(state, later, 35.0, PARAMS)
    assert after == fresh(later, 35.0) and breach is None


def test_a_breach_lasting_two_horizons_becomes_the_new_normal() -> None:
    state, _ = run(None, minutes(noisy(60)), PARAMS)
    moved = minutes([30.0] * 130, start=60)
    after, breaches = run(state, moved, PARAMS)
    assert breaches and breaches[-1].pane < T0 + (60 + 120) * MINUTE
    assert (
        after is not None and after.mean == pytest.approx(30.0) and after.taught < MIN_TAUGHT + 10
    )


def test_a_sensor_read_every_five_minutes_learns_over_the_same_horizon() -> None:
    """dt weighs each pane: after one horizon, slow and fast sensors have moved alike."""
    fast = minutes([20.0] + [30.0] * 60)
    slow = [(T0 + i * 5 * MINUTE, 20.0 if i == 0 else 30.0) for i in range(13)]
    fast_state, _ = run(None, fast, PARAMS)
    slow_state, _ = run(None, slow, PARAMS)
    assert fast_state is not None and slow_state is not None
    assert fast_state.mean == pytest.approx(slow_state.mean, abs=0.05)
