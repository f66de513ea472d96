"""Waiting for something to happen: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contract.waiting import poll_until


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll ``check`` every ``every`` seconds until it returns something truthy, and
    return that; fail saying ``what`` at the deadline."""
    result = poll_until(check, timeout, every)
    if not result:
        raise AssertionError(f"not within {timeout:g}s: {what}")
    return result
