"""Pure arithmetic of the benchmarks: percentiles and rates."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (q a whole number, 0..100) with linear interpolation between
    ranks: ``statistics.quantiles``' inclusive method, with 0 and 100 the min and max.

    Raises:
        ValueError: no values, or q outside 0..100 or not a whole number.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    if q != int(q):
        raise ValueError(f"percentile must be a whole number, got {q}")
    if q == 0:
        return float(min(values))
    if q == 100:
        return float(max(values))
    if len(values) == 1:  # Python 3.11's quantiles wants two values; one is every percentile
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, min, p50, p95, p99, max (None when there are no values)."""
    if not values:
        return {"count": 0, "min": None, "p50": None, "p95": None, "p99": None, "max": None}
    return {
        "count": len(values),
        "min": min(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


def rate(count: int, seconds: float) -> float:
    """count per second (0 when no time passed)."""
    return count / seconds if seconds > 0 else 0.0


# The phases of a burst run's tail (issue 71): the first seconds of load, the moments
# around each real-time batch boundary, and the rest.
FIRST = "first_10s"
BOUNDARIES = "boundaries"
STEADY = "steady"


def tail_by_phase(
    latencies: Sequence[float],
    read_at: Sequence[float],
    load_start: float,
    boundaries: Sequence[float],
    first_s: float = 10.0,
    around: tuple[float, float] = (0.5, 2.0),
) -> dict[str, dict[str, float | int | None]]:
    """:func:`summarize` of ``latencies`` by phase, each latency's reading at ``read_at``
    (the same clock as ``load_start`` and ``boundaries``): ``first_10s``, readings in
    the first ``first_s`` seconds of load; ``boundaries``, readings from ``around[0]``
    seconds before a real-time batch boundary to ``around[1]`` after it; ``steady``, the
    rest. A reading in both of the first two counts as the first's."""
    phases: dict[str, list[float]] = {FIRST: [], BOUNDARIES: [], STEADY: []}
    before, after = around
    for latency, at in zip(latencies, read_at, strict=True):
        if at - load_start < first_s:
            phases[FIRST].append(latency)
        elif any(b - before <= at <= b + after for b in boundaries):
            phases[BOUNDARIES].append(latency)
        else:
            phases[STEADY].append(latency)
    return {name: summarize(values) for name, values in phases.items()}
