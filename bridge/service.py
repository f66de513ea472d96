"""The bridge: the engine's process (bridge/engine.py) run and worded
(docs/devices.md#qos-and-what-at-least-once-means-here).

The engine receives each message from the MQTT session, produces it to Kafka at once and
notes it in its book; each confirmation acknowledges to MQTT what is now confirmed in
arrival order. Nothing is acknowledged that Kafka has not confirmed, so a bridge killed
at any moment loses nothing: the broker sends the unacknowledged messages again to the
next bridge of the same session, and the few Kafka already had arrive twice (the job
removes duplicates by event_id).

A record Kafka refuses is sent again after a pause, never dropped; while Kafka is away the
records wait in the producer, the acknowledgements with them, and the broker queues the
rest. This module says each outage once when it starts and once when it ends, from what
the engine reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.engine import Engine, subscription
from bridge.metrics import Tally, bridge_registry
from conf.mqtt_client import broker_url
from conf.settings.bridge import BridgeSettings


@dataclass(frozen=True)
class Summary:
    """What a run did, for the last line."""

    received: int
    forwarded: int
    acknowledged: int
    unacknowledged: int


def describe(settings: BridgeSettings) -> str:
    """Where and how the session connects, for start-up lines (never a secret)."""
    how = "MQTT 3.1.1"
    if settings.mqtt_username:
        how += f" as {settings.mqtt_username}"
    if settings.mqtt_certificate_location:
        how += ", client certificate"
    return f"{broker_url(settings)} ({how})"


class Bridge:
    """One bridge: :meth:`run` until :meth:`stop` (or a refused login: ``fatal``)."""

    def __init__(self, settings: BridgeSettings, say: Callable[[str], None]) -> None:
        self.settings = settings
        self.subscription = subscription(settings)
        self.say = say
        self.tally = Tally()
        self.registry = bridge_registry(lambda: self.tally)
        self.fatal: str | None = None
        self._engine: Engine | None = None
        self._stop_asked = False
        self._refusals_said: set[str] = set()
        # An outage on the Kafka side: since when, and the last error heard.
        self._trouble_since: float | None = None
        self._last_kafka_error = ""
        # The MQTT side: connected once at least; since when it is down; said.
        self._ever_up = False
        self._down_since: float | None = None
        self._down_said = False

    # --- running ---------------------------------------------------------------------

    def run(self) -> Summary:
        """Run the engine until it stops; its last report is the summary."""
        self._engine = engine = Engine(self.settings)
        if self._stop_asked:
            engine.stop()
        summary: Summary | None = None
        handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "up": self._up,
            "down": self._down,
            "refused": self._refused,
            "unverified": self._unverified,
            "kafka_error": self._kafka_error,
            "record_refused": self._record_refused,
            "stats": self._stats,
            "stopping": self._stopping,
            "fatal": self._fatal,
        }
        for event in engine.events():
            if event.kind == "stopped":
                summary = Summary(**event.body)
            elif event.kind in handlers:
                handlers[event.kind](event.body)
        status = engine.wait()
        if summary is None:
            self.fatal = self.fatal or f"the engine ended unexpectedly (exit status {status})"
            return Summary(self.tally.received, self.tally.forwarded, self.tally.acknowledged,
                           self.tally.in_flight)  # fmt: skip
        return summary

    def stop(self) -> None:
        """Stop (a signal handler may call it): a second call gives up waiting for Kafka."""
        self._stop_asked = True
        if self._engine is not None:
            self._engine.stop()

    # --- what the engine reports ---------------------------------------------------------

    def _stats(self, report: dict[str, Any]) -> None:
        self.tally = Tally.from_report(report)
        self._watch(time.monotonic())

    def _stopping(self, body: dict[str, Any]) -> None:
        waiting = body["waiting"]
        if waiting:
            self.say(
                f"bridge: stopping: waiting up to {self.settings.bridge_shutdown_timeout:g}s "
                f"for Kafka to confirm {waiting:,} record(s) (Ctrl-C again: stop now)"
            )

    def _fatal(self, body: dict[str, Any]) -> None:
        self.fatal = body["reason"]

    def _up(self, body: dict[str, Any]) -> None:
        session = (
            "session resumed: what the broker queued meanwhile follows"
            if body["session_present"]
            else "a new session (nothing was queued for it)"
        )
        if not self._ever_up:
            self.say(
                f"bridge: connected to {describe(self.settings)}, subscribed to "
                f"{self.subscription} with QoS 1 as {self.settings.mqtt_client_id}; "
                f"{session}"
            )
        elif self._down_since is not None:
            away = time.monotonic() - self._down_since
            self.say(f"bridge: MQTT connection back after {away:.0f}s; {session}")
        self._ever_up = True
        self._down_since, self._down_said = None, False

    def _down(self, body: dict[str, Any]) -> None:
        if self._down_since is None:
            self._down_since = time.monotonic()
        if self._down_said:
            return
        self._down_said = True
        where = f"{self.settings.mqtt_host}:{self.settings.mqtt_port}"
        if body["was_up"]:
            self.say(
                f"bridge: MQTT connection to {where} lost ({body['reason']}); reconnecting, "
                f"and the broker sends the {body['forgotten']:,} unacknowledged message(s) "
                "again"
            )
        else:
            self.say(f"bridge: waiting for the MQTT broker at {where} ({body['reason']})")

    def _refused(self, body: dict[str, Any]) -> None:
        reason = body["reason"]
        self._turned_away(
            f"refused the bridge ({reason}): check mqtt_username and SENSORWATCH_MQTT_PASSWORD "
            f"(or _FILE), and that the broker's ACL lets the user read {self.subscription}",
            f"refused: {reason}",
        )

    def _unverified(self, body: dict[str, Any]) -> None:
        reason = body["reason"]
        self._turned_away(
            f"could not be verified ({reason}): check mqtt_ca_location (the authority that "
            "signed its certificate) and mqtt_host (a name its certificate carries)",
            f"its certificate: {reason}",
        )

    def _turned_away(self, at_start: str, later: str) -> None:
        """Before the first connection the settings are at fault: the bridge ends, saying
        ``at_start``; after it, the broker is waited for as in an outage (``later``)."""
        if not self._ever_up:
            where = f"{self.settings.mqtt_host}:{self.settings.mqtt_port}"
            self.fatal = f"the MQTT broker at {where} {at_start}"
            return
        self._down({"reason": later, "was_up": False, "forgotten": 0})

    def _kafka_error(self, body: dict[str, Any]) -> None:
        self._last_kafka_error = body["text"]  # said with the outage, if one follows

    def _record_refused(self, body: dict[str, Any]) -> None:
        self._last_kafka_error = body["text"]
        if body["code"] not in self._refusals_said:
            self._refusals_said.add(body["code"])
            self.say(
                f"bridge: Kafka refused a record ({body['text']}): sending it again, and "
                "acknowledging nothing after it meanwhile"
            )

    def _watch(self, now: float) -> None:
        """Say once when readings start waiting for Kafka (it is unreachable, or they
        waited bridge_stall_after), and once when they no longer do."""
        tally = self.tally
        oldest = tally.oldest_age
        stall = self.settings.bridge_stall_after
        if self._trouble_since is None:
            unreachable = not tally.kafka_reachable and oldest >= min(1.0, stall)
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
                f"{tally.in_flight:,} reading(s) wait, the broker queues the rest"
            )
        elif tally.kafka_reachable and oldest < min(1.0, stall / 2):
            waited = now - self._trouble_since
            self._trouble_since = None
            self._refusals_said.clear()
            self._last_kafka_error = ""
            self.say(
                f"bridge: Kafka confirms again after {waited:.0f}s: acknowledging again "
                f"({tally.in_flight:,} in flight)"
            )
