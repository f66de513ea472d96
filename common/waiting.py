"""Waiting for something to happen: poll with a deadline, never sleep a fixed time.

The one readiness poll of SensorWatch: the job (progress events, executors registering),
the producer (a new topic's leaders), the local servers and the benchmarks all wait this
way. Each caller says what it waited for when the deadline passes, in its own error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll_until(
    check: Callable[[], T],
    timeout: float,
    every: float,
    done: Callable[[T], object] = bool,
) -> T:
    """Call ``check`` every ``every`` seconds until ``done`` holds for what it returns
    (by default: it is truthy), or ``timeout`` seconds have passed; return its last result.

    The caller tells the deadline from success by that result (``done`` does not hold).
    An exception from ``check`` ends the wait at once: that is how a check says waiting
    will not help (the process it waits for has exited).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        left = deadline - time.monotonic()
        if done(result) or left <= 0:
            return result
        time.sleep(min(every, left))  # a poll interval, not a synchronisation: it has a deadline
