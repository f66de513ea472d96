"""The programs a benchmark starts (dashboard, notifier, job): waiting for them with a
deadline, and ending them. No heavy imports: ``scripts/bench --help`` loads this."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Callable
from contextlib import suppress

from common.waiting import poll_until


def wait_for(
    what: str, ready: Callable[[], bool], timeout: float, alive: Callable[[], None]
) -> None:
    """Poll ``ready`` every half second until it is true; ``alive`` raises when a process
    it watches has ended.

    Raises:
        RuntimeError: still not ready after ``timeout`` seconds.
    """

    def check() -> bool:
        if ready():
            return True
        alive()
        return False

    if not poll_until(check, timeout, 0.5):
        raise RuntimeError(f"{what}: not ready after {timeout:.0f} s")


def answers(url: str) -> bool:
    """True when ``url`` answers a GET with a success status."""
    with suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=5):
        return True
    return False


def end_process(proc: subprocess.Popen[bytes] | None, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not stopped within ``timeout`` seconds."""
    if proc is None:
        return
    proc.terminate()
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
