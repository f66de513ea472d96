"""Labelled recordings for ``scripts/bench --anomaly`` (pure): what a recording holds (its
times, its values' spread, its step), its labelled windows (a labels file of our own or
NAB's ``labels/combined_windows.json``), and the copy the job is fed when its values do
not fit the field the bench replays them as.

The bench replays every recording as ``temperature_c`` (the event's range is -60 to 125,
contract/event.py). A recording outside that range (NAB's taxi counts, request
latencies, CPU percentages times ten) is mapped linearly onto 0 to 100 first: a linear
map changes neither which readings a ``deviation`` rule finds out of band (its band is
in deviations) nor the order of the fixed thresholds (taken at the recording's quantiles,
:func:`quantile`), so the scores are the recording's own.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from pathlib import Path

from bench.anomaly_score import LabelledWindow, instant
from contract.event import RANGES

FIELD = "temperature_c"
# A rule's incidents stay open this many of the recording's steps without a new alert
# (six 5-minute steps: half an hour), and never less than half an hour.
HOLD_STEPS = 6
MIN_HOLD = timedelta(minutes=30)
# Where a recording outside the field's range is mapped to.
MAPPED = (0.0, 100.0)


class RecordingError(ValueError):
    """A recording or its labels cannot be scored (the message says which file and why)."""


@dataclass(frozen=True)
class Recording:
    """One ``timestamp,value`` recording: its readings, in the file's order."""

    path: Path
    times: tuple[str, ...]
    values: tuple[float, ...]

    @property
    def step(self) -> timedelta:
        """The median time between two readings (one minute if it cannot be told)."""
        seconds = sorted(
            (instant(b) - instant(a)).total_seconds()
            for a, b in zip(self.times, self.times[1:], strict=False)
        )
        positive = [s for s in seconds if s > 0]
        return timedelta(seconds=statistics.median(positive)) if positive else timedelta(minutes=1)

    @property
    def hold(self) -> timedelta:
        """How long the bench holds a rule's incidents open (:data:`HOLD_STEPS` steps)."""
        return max(MIN_HOLD, HOLD_STEPS * self.step)

    @cached_property
    def span(self) -> tuple[float, float]:
        """The smallest and the largest value."""
        return min(self.values), max(self.values)

    @cached_property
    def fits(self) -> bool:
        """Whether every value lies within :data:`FIELD`'s range as it is."""
        low, high = RANGES[FIELD]
        return low <= self.span[0] and self.span[1] <= high

    def mapped(self, value: float) -> float:
        """``value`` as it is replayed: itself when the recording fits, else mapped
        linearly from the recording's (min, max) onto :data:`MAPPED`."""
        if self.fits:
            return value
        low, high = self.span
        if high == low:
            return MAPPED[0]
        return MAPPED[0] + (value - low) * (MAPPED[1] - MAPPED[0]) / (high - low)

    @cached_property
    def _ordered(self) -> list[float]:
        return sorted(self.mapped(v) for v in self.values)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0 to 1) of the replayed values, rounded to 2 decimals."""
        ordered = self._ordered
        index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return round(ordered[index], 2)

    def change_quantile(self, q: float) -> float:
        """The ``q`` quantile of the replayed values' change per minute between two
        readings (absolute, steps of zero time left out), rounded to 3 decimals."""
        changes = sorted(
            abs(self.mapped(b) - self.mapped(a)) / minutes
            for (ta, a), (tb, b) in zip(
                zip(self.times, self.values, strict=True),
                zip(self.times[1:], self.values[1:], strict=True),
                strict=False,
            )
            if (minutes := (instant(tb) - instant(ta)).total_seconds() / 60) > 0
        )
        if not changes:
            return 1.0
        index = min(len(changes) - 1, round(q * (len(changes) - 1)))
        return max(round(changes[index], 3), 0.001)


def read_recording(path: Path) -> Recording:
    """A NAB-style CSV recording (a ``timestamp,value`` header, then a row a line).

    Raises:
        RecordingError: no such file, no such columns, no rows or a value not a number.
    """
    try:
        with path.open(encoding="utf-8", newline="") as given:
            reader = csv.DictReader(given)
            if not {"timestamp", "value"} <= set(reader.fieldnames or ()):
                raise RecordingError(f"{path}: needs the columns timestamp and value")
            rows = [(row["timestamp"], row["value"]) for row in reader]
    except OSError as exc:
        raise RecordingError(f"{path}: {exc.strerror or exc}") from None
    if not rows:
        raise RecordingError(f"{path}: no rows")
    try:
        values = tuple(float(v) for _, v in rows)
    except ValueError as exc:
        raise RecordingError(f"{path}: a value is not a number ({exc})") from None
    return Recording(path, tuple(t for t, _ in rows), values)


def write_mapped(recording: Recording, target: Path) -> Path:
    """The recording as it is replayed (values mapped when they do not fit), at ``target``."""
    with target.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("timestamp", "value"))
        for time, value in zip(recording.times, recording.values, strict=True):
            writer.writerow((time, repr(recording.mapped(value))))
    return target


def labels_for(recording: Path, labels: Path | None) -> Path:
    """The labels file of ``recording``: ``labels`` when given, else
    ``<name>.labels.json`` beside it.

    Raises:
        RecordingError: none given and none beside it.
    """
    if labels is not None:
        return labels
    beside = recording.with_name(recording.stem + ".labels.json")
    if not beside.is_file():
        raise RecordingError(
            f"{recording}: no labels: give --anomaly-labels (a labels file, or NAB's "
            f"labels/combined_windows.json), or put {beside.name} beside it"
        )
    return beside


def read_windows(labels: Path, recording: Path) -> tuple[LabelledWindow, ...]:
    """The labelled windows of ``recording`` in ``labels``: a file of our own
    (``{"windows": [{"start", "end"}, ...]}``, bench/data/nab) or NAB's
    ``combined_windows.json`` (``{"<folder>/<file>.csv": [[start, end], ...]}``, the entry
    whose file name is the recording's). NAB's naive times are taken as UTC, as the
    replay takes the recording's.

    Raises:
        RecordingError: unreadable, or no entry for the recording.
    """
    try:
        data = json.loads(labels.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{labels}: {exc}") from None
    if isinstance(data, dict) and "windows" in data:
        pairs: Sequence = [(w["start"], w["end"]) for w in data["windows"]]
    else:
        found = [v for k, v in data.items() if Path(k).name == recording.name]
        if len(found) != 1:
            raise RecordingError(f"{labels}: no single entry for {recording.name}")
        pairs = found[0]
    return tuple(LabelledWindow(instant(start), instant(end)) for start, end in pairs)
