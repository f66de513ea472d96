"""A stop a signal handler may ask for: :class:`StopEvent`, threading.Event's interface
(``set``, ``is_set``, ``wait``) on a queue.SimpleQueue.

threading.Event cannot be set from a signal handler safely: the handler runs in the main
thread between two bytecodes, and when those are inside the main thread's own
``event.wait()`` (holding the event's lock, before or after the wait proper),
``event.set()`` waits for that lock for ever. A loaded machine makes the moment likely
enough to be seen (the notifier hung on SIGINT in a test run). SimpleQueue's ``put`` is
reentrant: it may interrupt a ``get`` in the same thread.
"""

from __future__ import annotations

import queue
from typing import Protocol


class Stop(Protocol):
    """What a loop that stops on request looks at: a StopEvent or a threading.Event."""

    def is_set(self) -> bool:
        """Whether the stop was asked for."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Until the stop is asked for or ``timeout`` seconds passed; whether it was."""
        ...


class StopEvent:
    """Set once (from a signal handler too); waiters wake at once."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._set = False

    def set(self) -> None:
        """Ask for the stop: safe in a signal handler."""
        self._set = True
        self._queue.put(None)

    def is_set(self) -> bool:
        """Whether the stop was asked for."""
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        """Until the stop is asked for or ``timeout`` seconds passed; whether it was."""
        if self._set:
            return True
        try:
            self._queue.get(timeout=timeout)
        except queue.Empty:
            return self._set
        self._queue.put(None)  # the next waiter wakes too
        return True
