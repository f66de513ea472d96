"""Scoring one rule's incidents against labelled anomaly windows, as the Numenta Anomaly
Benchmark (NAB) frames it (pure: no Spark, no Kafka; ``scripts/bench --anomaly``).

A labelled window is detected when an incident of the rule *opens* (its ``started_at``)
inside it, from its start to its end inclusive, or within ``lead`` before its start. The
lead is 0 by default: NAB's windows already hold the lead time NAB allows (each is a
tenth of the recording's length divided by the number of anomalies, centred on the
labelled anomaly), so a detection from the window's start on counts, and one before it
does not. Only the first incident of a window counts (NAB's "first detection"); later
ones inside the same window are neither detections nor false.

A false incident is one that opens outside every window and outside every window's lead:
each is a page an operator would have read for nothing. An incident that opened before a
window (outside its lead) and was still firing when the window began is false, and does
not detect the window: an operator acts on an incident when it opens.

The delay of a detected window is its first incident's start minus the window's start
(negative: within the lead, before the window); the median is over the detected windows.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from contract.times import as_utc


@dataclass(frozen=True)
class LabelledWindow:
    """One labelled anomaly window, UTC instants, both ends inclusive (as NAB's)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"a window ends before it starts: {self.start} .. {self.end}")

    def holds(self, instant: datetime, lead: timedelta) -> bool:
        """Whether an incident opening at ``instant`` detects this window."""
        return self.start - lead <= instant <= self.end


@dataclass(frozen=True)
class WindowResult:
    """How one window fared: its first incident's start and the delay from its start."""

    window: LabelledWindow
    first_started_at: datetime | None
    incidents: int  # incidents opening in the window (or its lead), the first included

    @property
    def detected(self) -> bool:
        """Whether an incident opened in the window (or its lead)."""
        return self.first_started_at is not None

    @property
    def delay(self) -> timedelta | None:
        """The first incident's start minus the window's start (None: not detected)."""
        return None if self.first_started_at is None else self.first_started_at - self.window.start


@dataclass(frozen=True)
class Score:
    """One rule's incidents scored against the windows."""

    windows: tuple[WindowResult, ...]
    false_started_at: tuple[datetime, ...]  # the false incidents' starts, in order
    incidents: int  # every incident scored
    lead: timedelta

    @property
    def detected(self) -> int:
        """Windows detected."""
        return sum(result.detected for result in self.windows)

    @property
    def false_incidents(self) -> int:
        """Incidents opening outside every window and its lead."""
        return len(self.false_started_at)

    @property
    def median_delay(self) -> timedelta | None:
        """The median delay over the detected windows (None: none detected)."""
        delays = [r.delay for r in self.windows if r.delay is not None]
        if not delays:
            return None
        return timedelta(seconds=statistics.median(d.total_seconds() for d in delays))

    def as_json(self) -> dict[str, Any]:
        """Plain JSON values for the report (delays in minutes)."""
        median = self.median_delay
        return {
            "windows": len(self.windows),
            "detected": self.detected,
            "false_incidents": self.false_incidents,
            "incidents": self.incidents,
            "median_delay_min": None if median is None else _minutes(median),
            "lead_min": _minutes(self.lead),
            "per_window": [
                {
                    "start": r.window.start.isoformat(),
                    "end": r.window.end.isoformat(),
                    "first_started_at": r.first_started_at and r.first_started_at.isoformat(),
                    "delay_min": None if r.delay is None else _minutes(r.delay),
                    "incidents": r.incidents,
                }
                for r in self.windows
            ],
            "false_started_at": [t.isoformat() for t in self.false_started_at],
        }


def _minutes(span: timedelta) -> float:
    return round(span.total_seconds() / 60, 1)


def instant(value: datetime | str) -> datetime:
    """An aware UTC instant from a datetime or ISO-8601 text (naive: UTC, as NAB's times
    and as the replay takes them)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    utc = as_utc(value)
    assert utc is not None
    return utc


def score(
    incidents: Iterable[Mapping[str, Any] | datetime | str],
    windows: Sequence[LabelledWindow],
    lead: timedelta = timedelta(0),
) -> Score:
    """Score one rule's incidents (rows of the ``incidents`` table with ``started_at``,
    or their starts: datetimes or ISO-8601 text) against ``windows``; ``lead``: how long
    before a window's start an incident still detects it (not negative).

    An incident opening where two windows' spans (with their leads) overlap counts for
    the earlier window.
    """
    if lead < timedelta(0):
        raise ValueError(f"lead must not be negative, got {lead}")
    ordered = sorted(windows, key=lambda w: w.start)
    starts = sorted(
        instant(row if isinstance(row, datetime | str) else row["started_at"]) for row in incidents
    )
    first: dict[int, datetime] = {}
    counts = [0] * len(ordered)
    false = []
    for started in starts:
        index = next((i for i, w in enumerate(ordered) if w.holds(started, lead)), None)
        if index is None:
            false.append(started)
            continue
        counts[index] += 1
        first.setdefault(index, started)
    results = tuple(
        WindowResult(window, first.get(i), counts[i]) for i, window in enumerate(ordered)
    )
    return Score(results, tuple(false), len(starts), lead)


def best_within(scores: Mapping[str, Score], most_false: int) -> str | None:
    """The name of the best-scoring rule with at most ``most_false`` false incidents:
    the most windows detected, then the earliest median delay, then the fewest false
    incidents, then the name (None: none qualifies or none detects a window)."""
    qualified = [
        (name, s) for name, s in scores.items() if s.false_incidents <= most_false and s.detected
    ]
    if not qualified:
        return None
    far = timedelta.max

    def rank(item: tuple[str, Score]) -> tuple[int, timedelta, int, str]:
        name, s = item
        return (-s.detected, s.median_delay or far, s.false_incidents, name)

    return min(qualified, key=rank)[0]
