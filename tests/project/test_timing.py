"""The run's closing summary (tests/support/timing.py): seconds per worker and group, and the
test session's Spark cold start that says how fast the machine was."""

from __future__ import annotations

import pytest

from tests.support.timing import SPARK_START, Timing


def report(nodeid: str, duration: float, *properties: tuple[str, object]) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid, ("x.py", 0, "t"), {}, "passed", None, "setup",
        duration=duration, user_properties=list(properties),
    )  # fmt: skip


def test_the_summary_adds_seconds_by_group_and_names_the_spark_start() -> None:
    timing = Timing(lambda nodeid: nodeid.split("::")[0])
    timing.add(report("a.py::one", 10.0, (SPARK_START, 12.34)))
    timing.add(report("a.py::two", 5.0))
    timing.add(report("b.py::one", 2.0))

    assert timing.lines() == [
        "seconds in tests, by worker: main 17 s",
        "the test session's Spark, cold start (the machine's pace): main 12.3 s",
        "the 2 longest groups of 2:",
        "       15 s  a.py",
        "        2 s  b.py",
    ]


def test_without_a_spark_start_the_summary_says_nothing_of_it() -> None:
    timing = Timing(lambda nodeid: nodeid)
    timing.add(report("a.py::one", 1.0))

    assert not any("Spark" in line for line in timing.lines())
