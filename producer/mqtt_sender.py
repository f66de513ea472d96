"""The simulator as devices: each message published to MQTT by its sensor's device, with
QoS 1, counted delivered only once the broker acknowledged it (PUBACK) (docs/devices.md).

A device is what contract/devices.py says: a site's gateway (one login per site; the
layout's ``{site}`` level), or each sensor where the layout has no site level. One MQTT
client (paho-mqtt 2.x) per device, logged in as the device with its own password. The
topic of a message is its sensor's (the message's key, as the generator knows it), so a
malformed message whose payload names no sensor still goes where its sensor publishes.

paho runs each client's network on a thread of its own; its acknowledgements are put on
a queue that the main thread serves (:meth:`MqttSender._serve`), so the summary and the
manifest are written by one thread, as with Kafka's delivery reports.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import paho.mqtt.client as mqtt
from paho.mqtt.reasoncodes import ReasonCode

from conf.mqtt_client import REFUSED_LOGIN, broker_url, new_client
from conf.settings.mqtt_connection import MqttSettings
from contract.devices import SITE, device_name
from producer.generator import Message
from producer.sender import Sender

# Messages handed to paho and not yet acknowledged, across all devices: the bound on what
# the clients hold in memory while the broker is slow or away (the pacing loop then
# waits). Below paho's 65,535 message ids, so an id is never reused while its
# acknowledgement waits on the queue.
MAX_OUTSTANDING = 10_000
# Unacknowledged QoS 1 messages in flight per client (paho's default, 20, holds a client
# to one round trip per 20 messages), lowered to the broker's Receive Maximum (MQTT 5)
# where it says less.
MAX_INFLIGHT = 1000
# At most this many devices, each a connection and a network thread: a fleet published
# per sensor (a layout without {site}) beyond it needs a gateway level.
MAX_DEVICES = 500
# Seconds between reconnection attempts after a lost connection: from the first,
# doubling up to the last.
RECONNECT_DELAY = (1, 30)


class MqttError(RuntimeError):
    """A device cannot publish: no password for it, the broker unreachable or refusing
    its login. The message is one line saying which and what to do."""


@dataclass(frozen=True)
class Route:
    """Where a sensor's messages go: its device (login and client) and topic."""

    device: str
    topic: str


def routes_of(sites: Mapping[str, str], settings: MqttSettings) -> dict[str, Route]:
    """The route of each sensor, given each sensor's site (``{sensor_id: site}``): the
    device is the site's (``device_name``), or the sensor itself where the topic layout
    has no site level.

    Raises:
        MqttError: a site or sensor cannot name a device or a topic level.
    """
    layout = settings.topic_layout
    by_site = layout.device_level == SITE
    made = {}
    for sensor, site in sites.items():
        try:
            device = device_name(site) if by_site else sensor
            made[sensor] = Route(device, layout.topic(device, sensor))
        except ValueError as exc:
            raise MqttError(f"sensor {sensor}: {exc}") from None
    return made


def device_passwords(
    devices: list[str], credentials_dir: Path | None, password: str | None
) -> dict[str, str]:
    """Each device's password: the file named by the device in ``credentials_dir``
    (scripts/mqtt-local's credentials/), or ``password`` for every device.

    Raises:
        MqttError: a device has no readable, non-empty file (the message names it and
            how to make one; never a password).
    """
    if credentials_dir is None:
        if password is None:
            raise MqttError("no password for the devices: --mqtt-credentials-dir or "
                            "SENSORWATCH_MQTT_PASSWORD (or _FILE)")  # fmt: skip
        return dict.fromkeys(devices, password)
    found = {}
    for device in devices:
        path = credentials_dir / device
        try:
            found[device] = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise MqttError(
                f"no password for device {device} in {credentials_dir}: "
                f"scripts/mqtt-local add-device {device} makes one (or start --registry FILE, "
                "one per site of the fleet's registry)"
            ) from None
        except OSError as exc:
            raise MqttError(f"device {device}: cannot read {path}: {exc.strerror}") from None
        if not found[device]:
            raise MqttError(f"device {device}: {path} is empty")
    return found


@dataclass
class _Device:
    """One device's client and what the broker answered to its connection."""

    name: str
    client: mqtt.Client
    answered: threading.Event
    answer: ReasonCode | None = None
    receive_maximum: int | None = None  # the broker's Receive Maximum (MQTT 5), if lower
    down: str | None = None  # why its connection is lost, while it is
    reconnecting: bool = False  # disconnected on purpose (to take the broker's limit)


# MQTT 5's PUBACK reason "No matching subscribers" (0x10).
NO_MATCHING_SUBSCRIBERS = 0x10


class MqttSender(Sender):
    """Publishes each message as its sensor's device, QoS 1; :meth:`connect` first."""

    def __init__(
        self,
        settings: MqttSettings,
        sensor_routes: Mapping[str, Route],
        passwords: Mapping[str, str],
        manifest: Path | None = None,
        progress_every: float = 5.0,
        log: TextIO = sys.stderr,
    ) -> None:
        """``sensor_routes``: :func:`routes_of`; ``passwords``: :func:`device_passwords`."""
        super().__init__(manifest, progress_every, log)
        self.settings = settings
        self.routes = dict(sensor_routes)
        self.passwords = dict(passwords)
        self.url = broker_url(settings)
        self.devices: dict[str, _Device] = {}
        # (device, mid, reason code) of each PUBACK, from paho's threads to the main one.
        self._answers: queue.SimpleQueue[tuple[str, int, ReasonCode]] = queue.SimpleQueue()
        self._pending: dict[tuple[str, int], tuple[int, Message, str]] = {}
        self._closed = False

    @property
    def target(self) -> str:
        """The broker, the topic layout and the devices."""
        names = sorted({route.device for route in self.routes.values()})
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        return (
            f"{self.url} {self.settings.mqtt_topic_layout} (MQTT {self.settings.mqtt_protocol}, "
            f"{len(names)} device{'s' if len(names) != 1 else ''}: {shown})"
        )

    # --- connections -----------------------------------------------------------------

    def connect(self, timeout: float = 30.0) -> None:
        """Connect every device and return once the broker accepted each login.

        Raises:
            MqttError: the broker is unreachable, refused a login, or did not answer
                within ``timeout`` (every client started is closed again).
        """
        names = sorted({route.device for route in self.routes.values()})
        if len(names) > MAX_DEVICES:
            raise MqttError(
                f"{len(names)} devices: at most {MAX_DEVICES} connections; publish through "
                "site gateways (a topic layout with {site})"
            )
        try:
            for name in names:
                self._start(self._device(name))
            for device in self.devices.values():
                self._accepted(device, timeout)
                if device.receive_maximum is not None:
                    # The broker takes fewer in flight (more and it disconnects us), and
                    # paho sets its own limit only between connections: connect again.
                    device.reconnecting = True  # not an outage: nothing to say
                    device.client.disconnect()
                    device.client.loop_stop()
                    device.client.max_inflight_messages_set(device.receive_maximum)
                    device.answered.clear()
                    device.reconnecting = False
                    self._start(device)
                    self._accepted(device, timeout)
        except BaseException:
            self.close()
            raise

    def _device(self, name: str) -> _Device:
        client = new_client(
            self.settings, f"{name}-{uuid.uuid4().hex[:8]}", name, self.passwords[name]
        )
        device = _Device(name, client, threading.Event())
        client.max_inflight_messages_set(MAX_INFLIGHT)
        client.max_queued_messages_set(0)  # no limit in paho: MAX_OUTSTANDING bounds it
        client.reconnect_delay_set(*RECONNECT_DELAY)
        client.on_connect = lambda _c, _u, _f, reason, properties: self._connected(
            device, reason, properties
        )
        client.on_disconnect = lambda _c, _u, _f, reason, _p: self._disconnected(device, reason)
        client.on_publish = lambda _c, _u, mid, reason, _p: self._answers.put((name, mid, reason))
        self.devices[name] = device
        return device

    def _start(self, device: _Device) -> None:
        try:
            device.client.connect(
                self.settings.mqtt_host, self.settings.mqtt_port, self.settings.mqtt_keepalive
            )
        except (OSError, ValueError) as exc:  # refused, unreachable, TLS, no such host
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise MqttError(f"cannot reach the MQTT broker at {self.url}: {reason}") from None
        device.client.loop_start()

    def _accepted(self, device: _Device, timeout: float) -> None:
        """Return once the broker accepted the device's login.

        Raises:
            MqttError: it refused it, or said nothing within ``timeout`` seconds.
        """
        if not device.answered.wait(timeout):
            raise MqttError(
                f"the MQTT broker at {self.url} did not answer device {device.name}'s "
                f"login within {timeout:g} s"
            )
        reason = device.answer
        if reason is not None and reason.is_failure:
            hint = (
                "; check its password (--mqtt-credentials-dir or SENSORWATCH_MQTT_PASSWORD)"
                if reason.value in REFUSED_LOGIN
                else ""
            )
            raise MqttError(
                f"the MQTT broker at {self.url} refused device {device.name}: {reason}{hint}"
            )

    def _connected(self, device: _Device, reason: ReasonCode, properties: Any) -> None:
        # On paho's network thread: nothing here may raise (it would end the thread).
        if not reason.is_failure:
            most = getattr(properties, "ReceiveMaximum", None)
            if most and int(most) < device.client.max_inflight_messages:
                device.receive_maximum = int(most)
            if device.down is not None:
                self._say(f"device {device.name} connected again")
                device.down = None
        if not device.answered.is_set():
            device.answer = reason
            device.answered.set()
        elif reason.is_failure and device.answer is not None and not device.answer.is_failure:
            # A device the broker took before: a connection lost. One it refused from the
            # start is said once, by _accepted; paho's retries meanwhile are not news.
            self._lost(device, f"the broker refused it again: {reason}")

    def _disconnected(self, device: _Device, reason: ReasonCode) -> None:
        accepted = device.answer is not None and not device.answer.is_failure
        if device.reconnecting:
            return
        if accepted and not self._closed:  # not a refused login: connect() says that
            self._lost(device, str(reason))

    def _lost(self, device: _Device, why: str) -> None:
        if device.down is None:  # said once per outage; paho reconnects meanwhile
            device.down = why
            self._say(
                f"device {device.name} lost its connection to {self.url} ({why}); "
                "reconnecting, its unacknowledged messages are sent again"
            )

    def close(self) -> None:
        """Disconnect every device and end their network threads."""
        if self._closed:
            return
        self._closed = True
        for device in self.devices.values():
            device.client.disconnect()
            device.client.loop_stop()

    # --- the transport ---------------------------------------------------------------

    def _send(self, index: int, message: Message) -> None:
        route = self.routes.get(message.key)
        if route is None:
            self._failed(index, f"no device publishes for sensor {message.key!r}")
            return
        while len(self._pending) >= MAX_OUTSTANDING and not self.stopping:
            self._serve(0.1)  # the broker is behind: wait for its acknowledgements
        device = self.devices[route.device]
        info = device.client.publish(route.topic, message.value, qos=1)
        # Not connected (MQTT_ERR_NO_CONN): paho keeps the message and sends it on
        # reconnection, so it is waited for like the rest.
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
            self._failed(index, f"{mqtt.error_string(info.rc)} ({route.topic})")
            return
        self._pending[(route.device, info.mid)] = (index, message, route.topic)

    def _serve(self, timeout: float) -> None:
        try:
            answer = self._answers.get(timeout > 0, timeout if timeout > 0 else None)
        except queue.Empty:
            return
        while True:
            self._answered(*answer)
            try:
                answer = self._answers.get_nowait()
            except queue.Empty:
                return

    def _answered(self, device: str, mid: int, reason: ReasonCode) -> None:
        pending = self._pending.pop((device, mid), None)
        if pending is None:  # a QoS 1 message is acknowledged once; nothing else is sent
            return
        index, message, topic = pending
        if reason.is_failure:  # MQTT 5: refused, e.g. "Not authorized" by the ACL
            self._failed(index, f"{reason} (device {device}, {topic})")
        elif reason.value == NO_MATCHING_SUBSCRIBERS:
            # Not a failure code, but the broker dropped it: no session (not even a bridge
            # that is away) subscribes to the topic, so it reaches no one.
            self._failed(index, f"{reason}: no bridge subscribes to {topic}; the broker dropped it")
        else:
            self._delivered(index, message, mqtt_topic=topic)

    def _flush(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self._pending and (left := deadline - time.monotonic()) > 0:
            self._serve(min(left, 0.1))
        return len(self._pending)
