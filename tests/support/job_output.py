"""Reading what ``python -m jobs.stream`` prints: noise that a clean run never shows, and
the table counts of its closing summary."""

from __future__ import annotations

import re

# What a clean run never prints: Spark's warnings and errors, the JVM's start-up warning
# ("WARNING: Using incubator modules"; an alert's severity is "ALERT WARNING  <rule>"),
# Python tracebacks, Java exceptions and errors (StackOverflowError included).
NOISE = (" WARN ", " ERROR ", "WARNING:", "Traceback", "Exception", "Error")


def noise(lines: list[str]) -> list[str]:
    """The lines of a job's output that a clean run does not print."""
    return [line for line in lines if any(word in line for word in NOISE)]


def summary(lines: list[str]) -> dict[str, int]:
    """The row counts of the job's closing summary (its ``name 1,234`` pairs)."""
    start = next(i for i, line in enumerate(lines) if line.endswith(" holds:"))
    counts: dict[str, int] = {}
    for line in lines[start + 1 :]:
        if "look at it" in line:
            break
        for name, rows in re.findall(r"(\w+) ([\d,]+)(?=,|:|$)", line):
            counts.setdefault(name, int(rows.replace(",", "")))
    return counts
