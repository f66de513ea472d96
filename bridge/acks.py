"""What the bridge received from MQTT and has not acknowledged yet, in arrival order.

A message is acknowledged once Kafka confirmed it *and* every message received before it
was acknowledged: MQTT wants the PUBACKs of one session in the order of its PUBLISHes,
while Kafka confirms partitions independently. So a message that waits (Kafka is away, a
delivery is retried) holds back the acknowledgements of those after it, and the broker,
once the bridge's Receive Maximum is reached, sends no more: it queues them.

Each MQTT connection is a generation. When one is lost, the broker sends its
unacknowledged messages again on the next (same session), so the book forgets them: an
acknowledgement never goes out on a later connection for a message of an earlier one.

Thread-safe: the MQTT network thread adds messages, the thread that serves Kafka's
delivery reports settles them; ``ack`` is called under the book's lock, so a lost
connection (:meth:`AckBook.connection_lost`, also under it) cannot fall between deciding
an acknowledgement and sending it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from bridge.records import Record


@dataclass
class Pending:
    """One message received and not yet acknowledged."""

    seq: int  # the bridge's own number, in arrival order
    mid: int  # MQTT's packet id (reused by the broker once acknowledged)
    qos: int
    record: Record
    received: float  # time.monotonic() at arrival
    delivered: bool = False
    attempts: int = field(default=1)


class AckBook:
    """The messages in flight, by arrival; see the module's docstring."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: OrderedDict[int, Pending] = OrderedDict()
        self._next_seq = 0
        self.generation = 0

    def received(self, mid: int, qos: int, record: Record) -> Pending:
        """Note a message just received on the current connection."""
        with self._lock:
            entry = Pending(self._next_seq, mid, qos, record, self._clock())
            self._next_seq += 1
            self._pending[entry.seq] = entry
            return entry

    def pending(self, seq: int) -> Pending | None:
        """The entry ``seq`` while it waits, None once acknowledged or forgotten."""
        with self._lock:
            return self._pending.get(seq)

    def delivered(self, seq: int, ack: Callable[[int, int], object]) -> list[Pending]:
        """Kafka confirmed ``seq``: acknowledge (``ack(mid, qos)``, QoS 1 and 2 only) every
        message from the oldest on that is confirmed, in order. Returns them; nothing
        when ``seq`` was already forgotten (its connection was lost)."""
        with self._lock:
            entry = self._pending.get(seq)
            if entry is None:
                return []
            entry.delivered = True
            done = []
            while self._pending:
                first = next(iter(self._pending.values()))
                if not first.delivered:
                    break
                del self._pending[first.seq]
                if first.qos > 0:
                    ack(first.mid, first.qos)
                done.append(first)
            return done

    def connection_lost(self) -> int:
        """The connection ended: forget its messages (the broker sends them again on the
        next). Returns how many were forgotten."""
        with self._lock:
            forgotten = len(self._pending)
            self._pending.clear()
            self.generation += 1
            return forgotten

    @property
    def in_flight(self) -> int:
        """Messages received and not yet acknowledged."""
        return len(self._pending)

    def oldest_age(self) -> float:
        """Seconds the oldest unacknowledged message has waited (0 when none)."""
        with self._lock:
            if not self._pending:
                return 0.0
            return max(0.0, self._clock() - next(iter(self._pending.values())).received)
