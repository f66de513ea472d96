"""Where a test run's time goes: seconds per group of tests (tests/conftest.py's groups:
a module, or the modules that share a lake or a stack) and per worker, printed at the end
of the run, so that docs/testing.md's figures come from every run, CI's included."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest

SHOWN = 20  # the longest groups in the summary
# A worker's first test that set up the test session's Spark (the ``spark`` fixture)
# carries the seconds that cold start took, as a user property of its report: the same
# work in every run, so it says how fast the machine was (docs/testing.md compares runs
# of different days by it).
SPARK_START = "spark_session_start_s"


class Timing:
    """Seconds (set-up, call and tear-down) by group and by worker."""

    def __init__(self, group_of: Callable[[str], str]) -> None:
        self._group_of = group_of
        self.by_group: dict[str, float] = defaultdict(float)
        self.by_worker: dict[str, float] = defaultdict(float)
        self.spark_starts: dict[str, float] = {}

    def add(self, report: pytest.TestReport) -> None:
        """Count one phase of one test (a report a worker sent, or this process's)."""
        node = getattr(report, "node", None)  # pytest-xdist: the worker that ran it
        worker = node.gateway.id if node is not None else "main"
        self.by_group[self._group_of(report.nodeid)] += report.duration
        self.by_worker[worker] += report.duration
        for name, value in report.user_properties:
            if name == SPARK_START:
                self.spark_starts[worker] = float(value)

    def lines(self) -> list[str]:
        """The summary: each worker's busy seconds, then the longest groups."""
        if not self.by_group:
            return []
        workers = ", ".join(f"{w} {s:,.0f} s" for w, s in sorted(self.by_worker.items()))
        longest = sorted(self.by_group.items(), key=lambda kv: -kv[1])[:SHOWN]
        starts = ", ".join(f"{w} {s:.1f} s" for w, s in sorted(self.spark_starts.items()))
        pace = [f"the test session's Spark, cold start (the machine's pace): {starts}"]
        return [
            f"seconds in tests, by worker: {workers}",
            *(pace if starts else []),
            f"the {len(longest)} longest groups of {len(self.by_group)}:",
            *(f"  {seconds:7,.0f} s  {group}" for group, seconds in longest),
        ]
