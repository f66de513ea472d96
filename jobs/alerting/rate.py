"""The ``rate`` rule: a field changing faster than a limit per minute (pure).

At each closed pane of a sensor the rate is the least-squares slope of the pane averages
within ``window`` before it, the pane included (in units per minute), taken only when at
least ``MIN_PANES`` panes spanning half the window are there. The rule alerts at a pane
when the rate has passed the limit in the rule's direction (rising: at or above
``per_minute``; falling: at or below ``-per_minute``) at every pane of the last ``for_``
of event time, the pane included, and at at least one pane ``for_`` or more before it.

Everything is a function of the panes alone, so a pane is judged the same whichever
micro-batch closes it, and a replayed batch judges it again the same: the job keeps the
panes (the ``_panes`` table), and reads back ``window + for_`` of them before a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

Trend = Literal["rising", "falling"]
MIN_PANES = 3


@dataclass(frozen=True)
class RateParams:
    """The parameters of one rate rule (contract/rules/model.py RateRule)."""

    per_minute: float  # the limit, a positive change per minute
    window: timedelta
    for_: timedelta
    trend: Trend = "rising"

    @property
    def reach(self) -> timedelta:
        """How much event time before a pane its judgement reads."""
        return self.window + self.for_


@dataclass(frozen=True)
class RateHit:
    """An alert of a rate rule at ``pane`` (its window_start)."""

    pane: datetime
    rate: float  # per minute, signed
    threshold: float  # the limit passed, signed like the trend


def slope(panes: Sequence[tuple[datetime, float]]) -> float:
    """The least-squares slope of (time, value) points, per minute."""
    origin = panes[0][0]
    xs = [(t - origin).total_seconds() / 60.0 for t, _ in panes]
    ys = [v for _, v in panes]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def rates(
    panes: Sequence[tuple[datetime, float]], window: timedelta
) -> list[tuple[datetime, float | None]]:
    """Each pane's rate (None where too few panes are within ``window`` before it);
    ``panes`` in event-time order, one sensor's."""
    found: list[tuple[datetime, float | None]] = []
    first = 0
    for i, (pane, _) in enumerate(panes):
        while panes[first][0] <= pane - window:
            first += 1
        within = panes[first : i + 1]
        enough = len(within) >= MIN_PANES and pane - within[0][0] >= window / 2
        found.append((pane, slope(within) if enough else None))
    return found


def _passed(rate: float, params: RateParams) -> bool:
    return rate >= params.per_minute if params.trend == "rising" else rate <= -params.per_minute


def hits(
    panes: Sequence[tuple[datetime, float]],
    judged: tuple[datetime, datetime],
    params: RateParams,
) -> list[RateHit]:
    """The alerts at the panes whose window_start lies in ``judged`` = (after, until],
    from one sensor's ``panes`` in event-time order, which must reach ``params.reach``
    before ``after`` (fewer only where the sensor has no older panes)."""
    after, until = judged
    limit = params.per_minute if params.trend == "rising" else -params.per_minute
    found: list[RateHit] = []
    run_since: datetime | None = None  # first pane of the current run of passed panes
    for pane, rate in rates(panes, params.window):
        if rate is None or not _passed(rate, params):
            run_since = None
            continue
        run_since = run_since or pane
        if after < pane <= until and pane - run_since >= params.for_:
            found.append(RateHit(pane, rate, limit))
    return found
