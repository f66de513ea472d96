"""The bridge: the MQTT session, the Kafka producer and the book of acknowledgements wired
together (docs/devices.md#qos-and-what-at-least-once-means-here).

Each message received is produced to Kafka at once (on paho's network thread) and noted
in the book; the main thread serves Kafka's delivery reports, and each confirmation
acknowledges to MQTT what is now confirmed in arrival order. Nothing is acknowledged that
Kafka has not confirmed, so a bridge killed at any moment loses nothing: the broker sends
the unacknowledged messages again to the next bridge of the same session, and the few
Kafka already had arrive twice (the job removes duplicates by event_id).

A record Kafka refuses is sent again after a pause, never dropped; while Kafka is away the
records wait in the producer, the acknowledgements with them, and the broker queues the
rest. Each outage is said once when it starts and once when it ends.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import paho.mqtt.client as mqtt
from confluent_kafka import KafkaError, KafkaException

from bridge.acks import AckBook
from bridge.kafka_out import CONNECTION_ERRORS, KafkaOut
from bridge.metrics import (
    KAFKA_DELIVERY,
    KAFKA_UNREACHABLE,
    MQTT_CONNECTION,
    TOPIC_WITHOUT_SENSOR,
    Flight,
    Tally,
    bridge_registry,
)
from bridge.mqtt_in import MqttIn, describe
from bridge.records import to_record
from conf.settings.bridge import BridgeSettings
from contract.times import utc_now

# How often the main loop looks at the oldest unacknowledged message (a stall).
WATCH_EVERY = 0.25
# A refused record is sent again after this many seconds, doubling up to the last.
RETRY_BACKOFF = (0.5, 30.0)


@dataclass(frozen=True)
class Summary:
    """What a run did, for the last line."""

    received: int
    forwarded: int
    acknowledged: int
    unacknowledged: int


class Bridge:
    """One bridge: :meth:`run` until :meth:`stop` (or a refused login: ``fatal``)."""

    def __init__(self, settings: BridgeSettings, say: Callable[[str], None]) -> None:
        self.settings = settings
        self.layout = settings.topic_layout
        self.say = say
        self.tally = Tally()
        self.book = AckBook()
        self.registry, self._latency = bridge_registry(self.tally, self.flight)
        self.kafka = KafkaOut(settings, self._delivered, self._kafka_error)
        self.mqtt = MqttIn(settings, self._message, self._up, self._down, self._refused)
        self.fatal: str | None = None
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._intake = True  # false once stopping: later messages stay unacknowledged
        self._retries: list[tuple[float, int]] = []  # (due, seq): refused records
        # Records the producer refused on paho's thread, for the main thread to retry.
        self._refused_at_send: queue.SimpleQueue[tuple[int, KafkaError]] = queue.SimpleQueue()
        self._refusals_said: set[int] = set()
        self._kafka_errors_said: set[int] = set()
        # An outage on the Kafka side: since when, and whether it has been said.
        self._trouble_since: float | None = None
        self._last_kafka_error = ""
        # The MQTT side: connected once at least; since when it is down; said.
        self._ever_up = False
        self._down_since: float | None = None
        self._down_said = False

    def flight(self) -> Flight:
        """What is in flight now (for /metrics)."""
        return Flight(self.book.in_flight, self.book.oldest_age())

    # --- running ---------------------------------------------------------------------

    def run(self) -> Summary:
        """Bridge until stopped; then confirm what is in flight and disconnect."""
        self.mqtt.start()
        next_watch = 0.0
        while not self._stop.is_set():
            self.kafka.poll(0.05)
            while not self._refused_at_send.empty():
                self._refused_record(*self._refused_at_send.get())
            now = time.monotonic()
            self._retry_due(now)
            if now >= next_watch:
                self._watch(now)
                next_watch = now + WATCH_EVERY
        return self._shut_down()

    def stop(self) -> None:
        """Stop (a signal handler may call it): a second call gives up waiting for Kafka."""
        if self._stop.is_set():
            self._abort.set()
        self._stop.set()

    def _shut_down(self) -> Summary:
        self._intake = False
        waiting = len(self.kafka)
        if waiting and not self.fatal:
            self.say(
                f"bridge: stopping: waiting up to {self.settings.bridge_shutdown_timeout:g}s "
                f"for Kafka to confirm {waiting:,} record(s) (Ctrl-C again: stop now)"
            )
        deadline = time.monotonic() + self.settings.bridge_shutdown_timeout
        while len(self.kafka) and time.monotonic() < deadline and not self._abort.is_set():
            self.kafka.flush(0.1)  # serves the delivery reports: their acknowledgements go
        left = self.book.in_flight
        self.mqtt.stop()  # the acknowledgements queued so far are sent before DISCONNECT
        tally = self.tally
        return Summary(tally.received, tally.forwarded, tally.acknowledged, left)

    # --- MQTT, on paho's network thread ------------------------------------------------

    def _message(self, message: mqtt.MQTTMessage) -> None:
        if not self._intake:
            return  # not acknowledged: the broker sends it again to the next session
        tally = self.tally
        tally.received += 1
        if message.dup:
            tally.redelivered += 1
        try:
            topic = message.topic
        except UnicodeDecodeError:  # a broker must refuse such a topic; forwarded anyway
            topic = bytes(message._topic).decode("utf-8", errors="replace")
        record = to_record(topic, message.payload, utc_now(), self.layout)
        if not record.key:
            tally.errors[TOPIC_WITHOUT_SENSOR] += 1
        entry = self.book.received(message.mid, message.qos, record)
        while True:
            try:
                self.kafka.send(entry.seq, record)
                return
            except BufferError:  # the producer's queue is full: the main thread drains it
                if not self._intake:
                    return
                time.sleep(0.01)  # holding the network thread back holds the broker back
            except KafkaException as exc:  # refused at once (too large for the client)
                self._refused_at_send.put((entry.seq, exc.args[0]))
                return

    def _up(self, session_present: bool) -> None:
        self.tally.mqtt_connected = True
        session = (
            "session resumed: what the broker queued meanwhile follows"
            if session_present
            else "a new session (nothing was queued for it)"
        )
        if not self._ever_up:
            self.say(
                f"bridge: connected to {describe(self.settings)}, subscribed to "
                f"{self.mqtt.subscription} with QoS 1 as {self.settings.mqtt_client_id}; "
                f"{session}"
            )
        elif self._down_since is not None:
            away = time.monotonic() - self._down_since
            self.say(f"bridge: MQTT connection back after {away:.0f}s; {session}")
        self._ever_up = True
        self._down_since, self._down_said = None, False

    def _down(self, reason: str) -> None:
        forgotten = self.book.connection_lost()
        was_up = self.tally.mqtt_connected
        self.tally.mqtt_connected = False
        if self._stop.is_set():
            return  # our own disconnect
        if was_up:
            self.tally.errors[MQTT_CONNECTION] += 1
        if self._down_since is None:
            self._down_since = time.monotonic()
        if self._down_said:
            return
        self._down_said = True
        where = f"{self.settings.mqtt_host}:{self.settings.mqtt_port}"
        if was_up:
            self.say(
                f"bridge: MQTT connection to {where} lost ({reason}); reconnecting, and the "
                f"broker sends the {forgotten:,} unacknowledged message(s) again"
            )
        else:
            self.say(f"bridge: waiting for the MQTT broker at {where} ({reason})")

    def _refused(self, reason: str) -> None:
        self.tally.errors[MQTT_CONNECTION] += 1
        if not self._ever_up:
            self.fatal = (
                f"the MQTT broker at {self.settings.mqtt_host}:{self.settings.mqtt_port} "
                f"refused the bridge ({reason}): check mqtt_username and "
                "SENSORWATCH_MQTT_PASSWORD (or _FILE), and that the broker's ACL lets the "
                f"user read {self.mqtt.subscription}"
            )
            self._stop.set()
            return
        self._down(f"refused: {reason}")

    # --- Kafka, on the main thread (poll) ------------------------------------------------

    def _delivered(self, seq: int, error: KafkaError | None) -> None:
        if error is not None:
            self._refused_record(seq, error)
            return
        self.tally.forwarded += 1
        self.tally.kafka_reachable = True
        entry = self.book.pending(seq)
        if entry is not None:
            self._latency.observe(time.monotonic() - entry.received)
        done = self.book.delivered(seq, self.mqtt.ack)
        self.tally.acknowledged += len(done)

    def _refused_record(self, seq: int, error: KafkaError) -> None:
        self.tally.errors[KAFKA_DELIVERY] += 1
        self._last_kafka_error = error.str()
        entry = self.book.pending(seq)
        if entry is None:
            return  # its connection was lost: the broker sends it again anyway
        low, high = RETRY_BACKOFF
        pause = min(high, low * 2 ** (entry.attempts - 1))
        entry.attempts += 1
        heapq.heappush(self._retries, (time.monotonic() + pause, seq))
        if error.code() not in self._refusals_said:
            self._refusals_said.add(error.code())
            self.say(
                f"bridge: Kafka refused a record ({error.str()}): sending it again, and "
                "acknowledging nothing after it meanwhile"
            )

    def _retry_due(self, now: float) -> None:
        while self._retries and self._retries[0][0] <= now:
            _, seq = heapq.heappop(self._retries)
            entry = self.book.pending(seq)
            if entry is None:
                continue
            try:
                self.kafka.send(seq, entry.record)
            except BufferError:
                heapq.heappush(self._retries, (now + 0.1, seq))
                return
            except KafkaException as exc:
                self._refused_record(seq, exc.args[0])

    def _kafka_error(self, error: KafkaError) -> None:
        if error.code() in CONNECTION_ERRORS:
            self._last_kafka_error = error.str()  # said with the outage, if one follows
            if error.code() == KafkaError._ALL_BROKERS_DOWN and self.tally.kafka_reachable:
                self.tally.kafka_reachable = False
                self.tally.errors[KAFKA_UNREACHABLE] += 1
        elif error.code() not in self._kafka_errors_said:
            self._kafka_errors_said.add(error.code())
            self.say(f"bridge: Kafka: {error.str()}")

    def _watch(self, now: float) -> None:
        """Say once when readings start waiting for Kafka (it is unreachable, or they
        waited bridge_stall_after), and once when they no longer do."""
        oldest = self.book.oldest_age()
        stall = self.settings.bridge_stall_after
        if self._trouble_since is None:
            unreachable = not self.tally.kafka_reachable and oldest >= min(1.0, stall)
            if not (unreachable or oldest >= stall):
                return
            self._trouble_since = now - oldest
            what = (
                f"Kafka at {self.settings.bootstrap_servers} unreachable"
                if unreachable
                else f"Kafka has not confirmed a reading for {oldest:.0f}s"
            )
            why = f" ({self._last_kafka_error})" if self._last_kafka_error else ""
            self.say(
                f"bridge: {what}{why}: acknowledging nothing to MQTT until it confirms; "
                f"{self.book.in_flight:,} reading(s) wait, the broker queues the rest"
            )
        elif self.tally.kafka_reachable and oldest < min(1.0, stall / 2):
            waited = now - self._trouble_since
            self._trouble_since = None
            self._refusals_said.clear()
            self._last_kafka_error = ""
            self.say(
                f"bridge: Kafka confirms again after {waited:.0f}s: acknowledging again "
                f"({self.book.in_flight:,} in flight)"
            )
