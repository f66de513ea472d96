"""Waiting for something to happen: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from common.waiting import poll_until

STUCK = 300.0
"""Seconds a wait on the job's progress (a batch, an alert line, a takeover, a stop)
gets: long enough that only a stuck job runs out, on CI's slowest machine too
(docs/testing.md#no-wall-clock-promises-in-tests)."""


def wait_until(
    check: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.1,
    detail: Callable[[], str] | None = None,
) -> Any:
    """Poll ``check`` every ``every`` seconds until it returns something truthy, and
    return that; fail saying ``what`` at the deadline, and what ``detail`` tells then
    (what was seen instead: a drill that runs once an hour in CI must say why it failed)."""
    result = poll_until(check, timeout, every)
    if not result:
        seen = f"\n{detail()}" if detail is not None else ""
        raise AssertionError(f"not within {timeout:g}s: {what}{seen}")
    return result
