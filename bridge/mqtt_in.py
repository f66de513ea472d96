"""The bridge's MQTT side: one persistent session (paho-mqtt 2.x) subscribed with QoS 1 to
the topic layout's filter, acknowledging nothing by itself (``manual_ack``): the bridge
acknowledges a message once Kafka has it.

The session outlives the connection: a fixed client id, MQTT 5 ``clean_start`` false with
a session expiry (3.1.1: ``clean_session`` false), so while the bridge is away, or holds
its acknowledgements back, the broker queues the readings for it, and on the next
connection sends again what was not acknowledged. MQTT 5's Receive Maximum bounds how
many unacknowledged messages the broker hands over at once.

paho's network thread runs the callbacks; :meth:`MqttIn.ack` may be called from any
thread (it queues the PUBACK for that thread to send).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from conf.mqtt_client import REFUSED_LOGIN, broker_url, new_client
from conf.settings.bridge import BridgeSettings

# Seconds between reconnection attempts: from the first, doubling up to the last.
RECONNECT_DELAY = (1, 30)


def subscription(settings: BridgeSettings) -> str:
    """The topic filter the bridge subscribes to: the layout's, shared among the bridges
    of ``mqtt_shared_group`` when there is one (each reading then goes to one of them)."""
    layout = settings.topic_layout.subscription
    group = settings.mqtt_shared_group
    return f"$share/{group}/{layout}" if group else layout


def describe(settings: BridgeSettings) -> str:
    """Where and how the session connects, for start-up lines (never a secret)."""
    how = f"MQTT {settings.mqtt_protocol}"
    if settings.mqtt_username:
        how += f" as {settings.mqtt_username}"
    if settings.mqtt_certificate_location:
        how += ", client certificate"
    return f"{broker_url(settings)} ({how})"


class MqttIn:
    """The session; ``on_message(message)`` for every message, ``on_up(session_present)``
    once connected and the subscription granted (SUBACK), ``on_down(reason)`` when a
    connection ends or an attempt fails, ``on_refused(reason)`` when the broker refuses
    the login or the subscription."""

    def __init__(
        self,
        settings: BridgeSettings,
        on_message: Callable[[mqtt.MQTTMessage], None],
        on_up: Callable[[bool], None],
        on_down: Callable[[str], None],
        on_refused: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.subscription = subscription(settings)
        self._on_message, self._on_up = on_message, on_up
        self._on_down, self._on_refused = on_down, on_refused
        password = settings.mqtt_password
        self.client = new_client(
            settings, settings.mqtt_client_id, settings.mqtt_username,
            password.get_secret_value() if password else None,
            persistent=True, manual_ack=True,
        )  # fmt: skip
        self.client.reconnect_delay_set(*RECONNECT_DELAY)
        self.client.on_connect = self._connected
        self.client.on_connect_fail = self._connect_failed
        self.client.on_disconnect = self._disconnected
        self.client.on_subscribe = self._subscribed
        self.client.on_message = self._message
        self._session_present = False

    def start(self) -> None:
        """Connect in the background (retrying until the broker answers) and run the
        network thread."""
        settings = self.settings
        if settings.mqtt_protocol == "5":
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = settings.mqtt_session_expiry
            properties.ReceiveMaximum = settings.mqtt_receive_maximum
            self.client.connect_async(
                settings.mqtt_host, settings.mqtt_port, settings.mqtt_keepalive,
                clean_start=False, properties=properties,
            )  # fmt: skip
        else:
            self.client.connect_async(
                settings.mqtt_host, settings.mqtt_port, settings.mqtt_keepalive
            )
        self.client.loop_start()

    def ack(self, mid: int, qos: int) -> None:
        """Acknowledge message ``mid`` to the broker."""
        self.client.ack(mid, qos)

    def stop(self) -> None:
        """Disconnect cleanly (the session stays with the broker, for the next start) once
        the acknowledgements queued so far are sent, and end the network thread."""
        self.client.disconnect()
        self.client.loop_stop()

    # --- paho's callbacks, on its network thread ---------------------------------------

    def _connected(self, _c: Any, _u: Any, flags: Any, reason: Any, _p: Any) -> None:
        if reason.is_failure:
            text = str(reason)
            if reason.value in REFUSED_LOGIN:
                self._on_refused(text)
            else:
                self._on_down(f"the broker refused the connection: {text}")
            return
        # Again on every connection: a broker that lost the session (no persistence, or
        # it expired) has no subscription left. Readings retained on the broker are not
        # asked for: they were forwarded when they were published.
        self._session_present = bool(flags.session_present)
        options = SubscribeOptions(qos=1, retainHandling=SubscribeOptions.RETAIN_DO_NOT_SEND)
        if self.settings.mqtt_protocol == "5":
            self.client.subscribe(self.subscription, options=options)
        else:
            self.client.subscribe(self.subscription, qos=1)

    def _subscribed(self, _c: Any, _u: Any, _mid: int, reasons: list[Any], _p: Any) -> None:
        refused = [str(reason) for reason in reasons if reason.is_failure]
        if refused:
            self._on_refused(f"subscription to {self.subscription} refused: {refused[0]}")
            self.client.disconnect()
            return
        self._on_up(self._session_present)

    def _connect_failed(self, _c: Any, _u: Any) -> None:
        self._on_down("no answer")

    def _disconnected(self, _c: Any, _u: Any, _flags: Any, reason: Any, _p: Any) -> None:
        self._on_down(str(reason))

    def _message(self, _c: Any, _u: Any, message: mqtt.MQTTMessage) -> None:
        self._on_message(message)
