"""Deliver generated messages: confirmed, paced, reported, stoppable.

:class:`Sender` holds what every transport shares: the pacing loop, the summary, the
manifest, progress lines and a clean stop. A transport's subclass only hands messages
over and reports what the broker confirmed: ``producer/kafka_sender.py``'s KafkaSender
(the readings topic), ``producer/mqtt_sender.py``'s MqttSender (devices on MQTT,
docs/devices.md).
Delivery reports are served on the main thread (inside :meth:`Sender._serve`), so the
summary and the manifest need no lock."""

from __future__ import annotations

import json
import math
import signal
import sys
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from producer.generator import Message

# A paced producer sleeps only when it is at least this far ahead of its schedule.
PACING_GRANULARITY_S = 0.002


@dataclass
class Summary:
    """What a run delivered."""

    sent: int = 0
    delivered: int = 0
    failed: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        """Delivered messages per wall-clock second."""
        return self.delivered / self.seconds if self.seconds > 0 else 0.0


class Manifest:
    """JSON lines, one per delivered message, in the order the messages were sent.

    Deliveries complete out of order across partitions; a small reorder buffer writes
    them back in send order, so two runs with the same seed give identical files.
    """

    _LINE = (
        '{"event_id":%s,"sensor_id":"%s","event_time":%s,"temperature_c":%s,'
        '"humidity_pct":%s,"battery_pct":%s,"kind":"%s","partition":%s,"offset":%s'
    )

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._out: TextIO = path.open("w", encoding="utf-8", buffering=1 << 20)
        self._pending: dict[int, str | None] = {}
        self._next = 0

    def _line(
        self, message: Message, partition: int | None, offset: int | None, mqtt_topic: str | None
    ) -> str:
        # Our own ids and timestamps need no escaping; json.dumps only for the rare extras.
        line = self._LINE % (
            f'"{message.event_id}"' if message.event_id is not None else "null",
            message.key,
            f'"{message.event_time}"' if message.event_time is not None else "null",
            "null" if message.temperature_c is None else repr(message.temperature_c),
            "null" if message.humidity_pct is None else repr(message.humidity_pct),
            "null" if message.battery_pct is None else repr(message.battery_pct),
            message.kind,
            "null" if partition is None else partition,
            "null" if offset is None else offset,
        )
        if mqtt_topic is not None:  # where the devices' messages went (no offset yet)
            line += ',"mqtt_topic":' + json.dumps(mqtt_topic)
        if message.detail:
            return line + "," + json.dumps(message.detail)[1:] + "\n"
        return line + "}\n"

    def record(
        self,
        index: int,
        message: Message | None,
        partition: int | None = None,
        offset: int | None = None,
        mqtt_topic: str | None = None,
    ) -> None:
        """Record the outcome of the ``index``-th message sent (None: it failed): where
        it is on Kafka, or (None, None and its topic) on MQTT, before the bridge."""
        self._pending[index] = (
            None if message is None else self._line(message, partition, offset, mqtt_topic)
        )
        while self._next in self._pending:
            line = self._pending.pop(self._next)
            if line is not None:
                self._out.write(line)
            self._next += 1

    def close(self) -> None:
        """Write what was delivered after a message that never got an outcome (still
        queued at the end), in send order, then flush and close the file."""
        for index in sorted(self._pending):
            line = self._pending[index]
            if line is not None:
                self._out.write(line)
        self._pending.clear()
        self._out.close()


class Sender(ABC):
    """Sends messages with delivery confirmation; stops cleanly on SIGINT/SIGTERM.

    A subclass is one transport: :meth:`_send` hands a message over, :meth:`_serve`
    serves the broker's answers (calling :meth:`_delivered` or :meth:`_failed` for each),
    :meth:`_flush` waits for the rest, :meth:`close` lets go of the connections.
    """

    def __init__(
        self,
        manifest: Path | None = None,
        progress_every: float = 5.0,
        log: TextIO = sys.stderr,
    ) -> None:
        self.manifest_path = manifest
        # Opened by run(): a set-up that fails (no broker) leaves an earlier manifest be.
        self.manifest: Manifest | None = None
        self.summary = Summary()
        self.stopping = False
        self.progress_every = progress_every
        self.log = log

    @property
    @abstractmethod
    def target(self) -> str:
        """Where the messages go, for the start-up line (never a secret)."""

    @abstractmethod
    def _send(self, index: int, message: Message) -> None:
        """Hand the ``index``-th message to the transport (waiting while its queue is
        full); its outcome is reported later, from :meth:`_serve`."""

    @abstractmethod
    def _serve(self, timeout: float) -> None:
        """Serve the broker's answers that came, waiting up to ``timeout`` seconds for
        the first (0: only what is there)."""

    @abstractmethod
    def _flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every message handed over to be answered;
        returns how many were not."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the transport's connections (after :meth:`run`, or instead of it);
        a second call does nothing."""

    def request_stop(self, signum: int = 0, _frame: object = None) -> None:
        """Stop after the current message; what was sent is still flushed."""
        self.stopping = True

    def install_signal_handlers(self) -> None:
        """SIGINT and SIGTERM end the run cleanly instead of killing it."""
        signal.signal(signal.SIGINT, self.request_stop)
        signal.signal(signal.SIGTERM, self.request_stop)

    def _delivered(
        self,
        index: int,
        message: Message,
        partition: int | None = None,
        offset: int | None = None,
        mqtt_topic: str | None = None,
    ) -> None:
        """The broker acknowledged the ``index``-th message."""
        self.summary.delivered += 1
        self.summary.by_kind[message.kind] += 1
        if self.manifest is not None:
            self.manifest.record(index, message, partition, offset, mqtt_topic)

    def _failed(self, index: int, error: str) -> None:
        """The ``index``-th message is lost: the broker refused it or it timed out."""
        self.summary.failed += 1
        self.summary.first_error = self.summary.first_error or error
        if self.manifest is not None:
            self.manifest.record(index, None)

    def _produce(self, message: Message) -> None:
        self._send(self.summary.sent, message)
        self.summary.sent += 1

    def run(
        self,
        messages: Iterable[Message],
        rate: float = 0.0,
        duration: float | None = None,
        leftovers: Iterable[Message] = (),
        due: Callable[[Message], float] | None = None,
    ) -> Summary:
        """Send until ``messages`` ends, ``duration`` passes or a stop is requested.

        ``rate`` > 0 paces sending to that many messages per wall-clock second.
        ``due`` paces by a schedule instead: each message is sent no earlier than
        ``due(message)`` wall-clock seconds after the start (a replay's recorded times).
        ``leftovers`` (held-back messages) are sent before the final flush.
        """
        if self.manifest_path is not None:
            self.manifest = Manifest(self.manifest_path)
        start = time.monotonic()
        end = math.inf if duration is None else start + duration
        next_report = start + self.progress_every
        last_delivered, last_time = 0, start
        try:
            for message in messages:
                if due is not None:
                    at = start + due(message)
                    if at >= end:  # due after the run's end: so is what follows (in time order)
                        break
                    self._wait_until(at)  # returns up to PACING_GRANULARITY_S early
                    if self.stopping:
                        break
                self._produce(message)
                sent = self.summary.sent
                if sent % 1000 == 0 or rate > 0 or due is not None:
                    self._serve(0)
                    now = time.monotonic()
                    if rate > 0:
                        self._wait_until(start + sent / rate)  # the next message's slot
                    if now >= next_report:
                        delivered = self.summary.delivered
                        current = (delivered - last_delivered) / (now - last_time)
                        self._say(
                            f"{delivered:,} delivered ({current:,.0f} msg/s), "
                            f"{self.summary.failed:,} failed"
                        )
                        last_delivered, last_time = delivered, now
                        next_report = now + self.progress_every
                    if self.stopping or (duration is not None and now - start >= duration):
                        break
            for message in leftovers:
                self._produce(message)
        finally:
            try:
                undelivered = self._flush(60)
            finally:
                self.close()
            self.summary.failed += undelivered
            if undelivered and not self.summary.first_error:
                self.summary.first_error = f"{undelivered} messages still queued after 60 s"
            self.summary.seconds = time.monotonic() - start
            if self.manifest is not None:
                self.manifest.close()
        return self.summary

    def _wait_until(self, slot: float) -> None:
        """Wait for the monotonic time ``slot`` (or a stop), serving deliveries meanwhile
        (a serve returns early whenever it served one). Waits under PACING_GRANULARITY_S
        are left to accumulate: Kafka's poll() counts in whole milliseconds, so a shorter
        one would spin a core."""
        while (wait := slot - time.monotonic()) > PACING_GRANULARITY_S and not self.stopping:
            self._serve(min(wait, 0.1))

    def _say(self, text: str) -> None:
        print(f"producer: {text}", file=self.log, flush=True)
