"""A stop a signal handler asks for (common/stop_signal.py): it wakes a wait at once; and
why not threading.Event: its set() in a handler can wait for ever for a lock the
interrupted code holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from common.stop_signal import StopEvent

# The moment that hangs threading.Event: a handler runs while the main thread holds the
# event's own lock (inside its wait, before or after the wait proper).
HANDLER_INSIDE_THE_LOCK = """
import os, signal, threading
{make}
signal.signal(signal.SIGUSR1, lambda *_: stop.set())
with {lock}:
    os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs at the next bytecode
    pass
print("stopped" if stop.is_set() else "not set", flush=True)
"""


def test_a_signal_wakes_a_wait_at_once() -> None:
    stop = StopEvent()
    previous = signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    try:
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1))
        timer.start()
        began = time.monotonic()
        assert stop.wait(30) is True
        assert time.monotonic() - began < 10
        assert stop.is_set() and stop.wait(0) is True  # stays set for every waiter
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_wait_times_out_unset() -> None:
    stop = StopEvent()
    assert stop.wait(0.05) is False and not stop.is_set()


def test_threading_event_hangs_where_a_handler_interrupts_its_lock() -> None:
    # Why StopEvent: threading.Event's set() from a handler that runs while the main
    # thread holds the event's lock waits for ever.
    code = HANDLER_INSIDE_THE_LOCK.format(make="stop = threading.Event()", lock="stop._cond")
    assert _run(code) is None


def _run(code: str, timeout: float = 5.0) -> str | None:
    """What the program printed, or None when it hung (killed after ``timeout`` s)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, check=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    return out.stdout.strip()
