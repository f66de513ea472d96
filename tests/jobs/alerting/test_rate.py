"""The rate rule (jobs/alerting/rate.py), on made-up panes, against numpy's own fit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from jobs.alerting.rate import RateParams, hits, rates, slope

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RISING = RateParams(per_minute=2.0, window=timedelta(minutes=5), for_=timedelta(minutes=3))
EVER = (T0 - timedelta(days=1), T0 + timedelta(days=1))


def minutes(values: list[float], every: int = 1) -> list[tuple[datetime, float]]:
    return [(T0 + i * every * MINUTE, v) for i, v in enumerate(values)]


def test_the_rate_is_the_least_squares_slope_per_minute() -> None:
    panes = minutes([20.0, 21.5, 22.0, 24.5, 25.0, 27.5])
    x = np.arange(6, dtype=float)
    assert slope(panes) == pytest.approx(np.polyfit(x, [v for _, v in panes], 1)[0])


def test_too_few_panes_give_no_rate() -> None:
    """Three panes spanning half the window at least (2.5 of 5 minutes): before, none."""
    found = rates(minutes([20.0, 30.0, 40.0, 50.0]), timedelta(minutes=5))
    assert [r is None for _, r in found] == [True, True, True, False]


def test_a_rise_alerts_once_it_held_for_the_minimum_time() -> None:
    # Flat, then +3 °C a minute from minute 5 on.
    values = [20.0] * 5 + [20.0 + 3 * i for i in range(1, 11)]
    found = hits(minutes(values), EVER, RISING)
    passed = [p for p, r in rates(minutes(values), RISING.window) if r is not None and r >= 2]
    # Alerts from the first passed pane + 3 minutes on, at every pane after.
    assert [h.pane for h in found] == [p for p in passed if p - passed[0] >= RISING.for_]
    assert found and all(h.rate >= 2.0 and h.threshold == 2.0 for h in found)


def test_a_falling_rule_ignores_a_rise_and_sees_a_fall() -> None:
    falling = RateParams(2.0, timedelta(minutes=5), timedelta(0), "falling")
    assert hits(minutes([20.0 + 3 * i for i in range(10)]), EVER, falling) == []
    found = hits(minutes([50.0 - 3 * i for i in range(10)]), EVER, falling)
    assert found and all(h.rate <= -2.0 and h.threshold == -2.0 for h in found)


def test_a_pane_is_judged_alike_in_any_batch() -> None:
    """Batches judge their own panes from the panes before them: the same alerts."""
    values = [20.0] * 5 + [20.0 + 3 * i for i in range(1, 11)] + [50.0] * 5
    panes = minutes(values)
    whole = hits(panes, EVER, RISING)
    cut = []
    for start in range(0, len(panes), 4):
        after = panes[start][0] - MINUTE
        until = panes[min(start + 3, len(panes) - 1)][0]
        seen = [p for p in panes if p[0] > after - RISING.reach and p[0] <= until]
        cut += hits(seen, (after, until), RISING)
    assert cut == whole and whole


def test_slow_panes_measure_per_minute_too() -> None:
    """A sensor read every 5 minutes rising 10 °C a pane rises 2 °C a minute."""
    window = RateParams(2.0, timedelta(minutes=20), timedelta(0))
    found = hits(minutes([20.0 + 10 * i for i in range(8)], every=5), EVER, window)
    assert found and all(h.rate == pytest.approx(2.0) for h in found)
