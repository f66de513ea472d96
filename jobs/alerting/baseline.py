"""A sensor's own normal, learned from its panes: the ``deviation`` rule's state (pure).

Each closed pane (one sensor's readings of one event-time minute, jobs/windows/panes.py)
gives one value: the pane's average of the rule's field. The baseline is an exponentially
weighted mean and variance of those values, with a weight that depends on the event time
between two panes, so that a sensor read every 5 minutes and one read every 10 seconds
learn over the same ``horizon``:

    a = 1 - exp(-dt / horizon),   dt = min(pane - previous pane, max_step)
    d = x - mean;  mean += a * d;  var = (1 - a) * (var + a * d * d)

A pane is *out* when, once the baseline is warm, it lies more than ``deviations``
standard deviations (at least ``min_sd``) beyond the mean in the rule's direction. An out
pane never teaches the baseline, so a slow failure cannot drag the normal along with it;
the rule alerts on every out pane once the panes have been out for ``for_`` of event
time without a pane in between, and every such alert says what it compared: the pane's
value, the band's edge (its threshold) and the mean.

Warm-up: the baseline may fire only once it has learned for ``warm_up`` of event time and
from ``MIN_TAUGHT`` panes. A gap longer than ``horizon`` (a sensor switched off for a day)
forgets it and warms up again, and so does a breach that lasts ``RELEARN`` horizons (a
sensor moved to another room: after alerting that long, its new normal is learned).

The state of one (sensor, rule) is a few numbers (:class:`Baseline`); stepping it over the
panes in event-time order is deterministic, so one batch of many panes and many batches of
one pane give the same state and the same alerts: the job keeps the state in a table and
replays a batch from the state before it, exactly once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from contract.rules.model import DeviationRule
from contract.times import interval_seconds

Direction = Literal["above", "below", "both"]

# Fewest panes the baseline must have learned from before it may fire, however long the
# warm-up: a variance of two or three values means nothing.
MIN_TAUGHT = 10
# A breach lasting this many horizons ends the warm baseline: the sensor's normal moved.
RELEARN = 2


@dataclass(frozen=True)
class BaselineParams:
    """The parameters of one deviation rule (contract/rules/model.py DeviationRule)."""

    horizon: timedelta
    deviations: float
    for_: timedelta
    warm_up: timedelta
    direction: Direction = "both"
    max_step: timedelta = timedelta(minutes=15)
    min_sd: float = 0.0


def params_of(rule: DeviationRule) -> BaselineParams:
    """The parameters a deviation rule's baselines are learned and judged with."""
    return BaselineParams(
        horizon=timedelta(seconds=interval_seconds(rule.horizon)),
        deviations=rule.deviations,
        for_=timedelta(seconds=interval_seconds(rule.for_)),
        warm_up=timedelta(seconds=rule.warm_up_seconds),
        direction=rule.direction,
        min_sd=rule.min_sd,
    )


def learned_with(field: str, params: BaselineParams) -> str:
    """What a baseline was learned with (the ``params`` column of ``_baselines``): a row
    learned with another field, horizon or step (an edited rule) is not the rule's now."""
    return json.dumps([field, params.horizon.total_seconds(), params.max_step.total_seconds()])


@dataclass(frozen=True)
class Baseline:
    """The learned normal of one sensor for one rule, after the pane ``last_pane``."""

    mean: float
    var: float
    learned: timedelta  # event time learned from since the last (re)start
    taught: int  # panes learned from since the last (re)start
    last_pane: datetime  # the newest pane stepped over, taught or not
    breach_since: datetime | None = None  # first pane of the current run of out panes

    @property
    def sd(self) -> float:
        """The standard deviation (never negative: rounding can make var -0.0)."""
        return math.sqrt(max(self.var, 0.0))

    def warm(self, params: BaselineParams) -> bool:
        """Whether the baseline may fire."""
        return self.learned >= params.warm_up and self.taught >= MIN_TAUGHT


@dataclass(frozen=True)
class Breach:
    """An out pane past ``for_``: an alert of the rule at ``pane`` (its window_start)."""

    pane: datetime
    value: float
    threshold: float  # the band's edge the value passed
    mean: float
    sd: float


def fresh(pane: datetime, value: float) -> Baseline:
    """A baseline that starts learning from one pane."""
    return Baseline(value, 0.0, timedelta(0), 1, pane)


def band(state: Baseline, params: BaselineParams) -> tuple[float, float]:
    """The (low, high) edges of the normal band: mean -/+ deviations * sd."""
    width = params.deviations * max(state.sd, params.min_sd)
    return state.mean - width, state.mean + width


def _outside(value: float, low: float, high: float, direction: Direction) -> float | None:
    """The edge ``value`` lies beyond in ``direction``, or None when it is inside."""
    if direction in ("above", "both") and value > high:
        return high
    if direction in ("below", "both") and value < low:
        return low
    return None


def _taught(state: Baseline, pane: datetime, value: float, params: BaselineParams) -> Baseline:
    step = min(pane - state.last_pane, params.max_step)
    a = 1.0 - math.exp(-step / params.horizon)
    d = value - state.mean
    return Baseline(
        mean=state.mean + a * d,
        var=(1.0 - a) * (state.var + a * d * d),
        learned=state.learned + step,
        taught=state.taught + 1,
        last_pane=pane,
    )


def step(
    state: Baseline | None, pane: datetime, value: float, params: BaselineParams
) -> tuple[Baseline, Breach | None]:
    """The baseline after one more pane (its window_start and value), and the alert that
    pane raises, if any. Panes must come in event-time order; one at or before
    ``state.last_pane`` (a replay of what the state already holds) changes nothing."""
    if state is None or pane - state.last_pane > params.horizon:
        return fresh(pane, value), None  # never seen, or gone long enough to forget
    if pane <= state.last_pane:
        return state, None
    low, high = band(state, params)
    edge = _outside(value, low, high, params.direction) if state.warm(params) else None
    if edge is None:
        return _taught(state, pane, value, params), None
    since = state.breach_since or pane
    if pane - since >= RELEARN * params.horizon:
        return fresh(pane, value), None  # out for so long that this is the new normal
    held = replace(state, last_pane=pane, breach_since=since)
    if pane - since < params.for_:
        return held, None
    return held, Breach(pane, value, edge, state.mean, state.sd)


def run(
    state: Baseline | None, panes: Iterable[tuple[datetime, float]], params: BaselineParams
) -> tuple[Baseline | None, list[Breach]]:
    """:func:`step` over ``panes`` in event-time order: the state after them and their
    alerts."""
    breaches: list[Breach] = []
    for pane, value in panes:
        state, breach = step(state, pane, value, params)
        if breach is not None:
            breaches.append(breach)
    return state, breaches


def ordered(panes: Iterable[tuple[datetime, float]]) -> Iterator[tuple[datetime, float]]:
    """Panes in event-time order (a batch's panes come in any order)."""
    return iter(sorted(panes, key=lambda p: p[0]))
