"""MQTT client settings in one place (as conf/kafka_client.py is for Kafka): a paho-mqtt
2.x client made from MqttSettings, for the producer's devices (the bridge's engine takes
the same settings: bridge/engine.py), and the broker's URL for start-up lines
(docs/devices.md)."""

from __future__ import annotations

import ssl
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from conf.settings.mqtt_connection import MqttSettings

# CONNACK reason codes of a refused login (paho gives MQTT 5's codes for 3.1.1 too):
# Client identifier not valid, Bad user name or password, Not authorized, Bad
# authentication method.
REFUSED_LOGIN = frozenset({0x85, 0x86, 0x87, 0x8C})


def new_client(
    settings: MqttSettings,
    client_id: str,
    username: str | None,
    password: str | None,
) -> mqtt.Client:
    """A paho client for the settings' broker, protocol and TLS, logging in as
    ``username``, with a clean session."""
    v5 = settings.mqtt_protocol == "5"
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=None if v5 else True,
        protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
    )
    if username:
        client.username_pw_set(username, password)
    if settings.mqtt_tls:
        client.tls_set(
            ca_certs=_path(settings.mqtt_ca_location),
            certfile=_path(settings.mqtt_certificate_location),
            keyfile=_path(settings.mqtt_key_location),
            cert_reqs=ssl.CERT_REQUIRED,
        )
    return client


def broker_url(settings: MqttSettings) -> str:
    """``mqtt://host:port`` or ``mqtts://host:port``, for start-up lines."""
    scheme = "mqtts" if settings.mqtt_tls else "mqtt"
    return f"{scheme}://{settings.mqtt_host}:{settings.mqtt_port}"


def _path(value: Path | None) -> str | None:
    return None if value is None else str(value)
