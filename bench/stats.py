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
