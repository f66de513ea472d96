"""The bridge's engine: the compiled program that moves the readings (bridge/engine/, Go),
started by ``python -m bridge`` with the settings on its standard input.

Python keeps the settings, the /metrics endpoint and the words; the engine keeps the MQTT
session, the Kafka producer and the book of acknowledgements, because a Python MQTT
client spends 80 to 100 µs of CPU on a reading and the engine a few (issue 70,
docs/benchmarks.md#mqtt-in-the-bridge). It reports one JSON object a line on its standard
output: ``up``, ``down``, ``refused``, ``kafka_error``, ``record_refused``, ``stats``
(several times a second), ``stopping``, ``stopped`` and ``fatal``.

The engine dies with this process: its standard input stays open, and the engine ends
when it reads its end (this process gone, killed too). A bridge killed leaves no engine
holding its MQTT session.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bridge.metrics import LATENCY_BUCKETS
from conf.paths import BRIDGE_ENGINE
from conf.settings.bridge import BridgeSettings
from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT

# How often the engine reports its counts (and the bridge looks for a stall).
STATS_EVERY = 0.25
# A refused record is sent again after this many seconds, doubling up to the last.
RETRY_BACKOFF = (0.5, 30.0)
# Seconds between MQTT connection attempts: from the first, doubling up to the last.
RECONNECT_DELAY = (1.0, 30.0)
# The producer: a short linger (the bridge's added latency is the batch's wait plus
# Kafka's round trip), zstd, and at most this many records buffered before the MQTT side
# waits (the broker then queues).
LINGER_MS = 5.0
COMPRESSION = "zstd"
MAX_BUFFERED = 200_000

# kafka_properties the engine's client honours, by the librdkafka names the other clients
# use; the others do not apply to it (said once at start).
ENGINE_KAFKA_PROPERTIES = ("client.id", "compression.type", "linger.ms", "message.max.bytes")


class EngineMissing(RuntimeError):
    """The engine's program is not built."""


def subscription(settings: BridgeSettings) -> str:
    """The topic filter the bridge subscribes to: the layout's, shared among the bridges
    of ``mqtt_shared_group`` when there is one (each reading then goes to one of them)."""
    layout = settings.topic_layout.subscription
    group = settings.mqtt_shared_group
    return f"$share/{group}/{layout}" if group else layout


def ignored_kafka_properties(settings: BridgeSettings) -> list[str]:
    """The kafka_properties the engine's client does not take."""
    return sorted(set(settings.kafka_properties) - set(ENGINE_KAFKA_PROPERTIES))


def engine_config(settings: BridgeSettings) -> dict[str, Any]:
    """What the engine reads on its standard input (bridge/engine/config.go, Config)."""
    password = settings.mqtt_password
    properties = settings.kafka_properties
    protocol = settings.kafka_security_protocol
    return {
        "mqtt": {
            "host": settings.mqtt_host,
            "port": settings.mqtt_port,
            "tls": settings.mqtt_tls,
            "ca": _path(settings.mqtt_ca_location),
            "certificate": _path(settings.mqtt_certificate_location),
            "key": _path(settings.mqtt_key_location),
            "username": settings.mqtt_username or "",
            "password": password.get_secret_value() if password else "",
            "client_id": settings.mqtt_client_id,
            "keepalive": settings.mqtt_keepalive,
            "subscription": subscription(settings),
            "reconnect_min": RECONNECT_DELAY[0],
            "reconnect_max": RECONNECT_DELAY[1],
        },
        "kafka": {
            "bootstrap": [s.strip() for s in settings.bootstrap_servers.split(",") if s.strip()],
            "topic": settings.topic,
            "tls": protocol in ("SSL", "SASL_SSL"),
            "ca": _path(settings.kafka_ssl_ca_location),
            "certificate": _path(settings.kafka_ssl_certificate_location),
            "key": _path(settings.kafka_ssl_key_location),
            "sasl_mechanism": settings.kafka_sasl_mechanism or "",
            "sasl_username": settings.kafka_sasl_username or "",
            "sasl_password": (
                settings.kafka_sasl_password.get_secret_value()
                if settings.kafka_sasl_password
                else ""
            ),
            "linger_ms": float(properties.get("linger.ms", LINGER_MS)),
            "max_buffered": MAX_BUFFERED,
            "compression": properties.get("compression.type", COMPRESSION),
            "max_record_bytes": int(properties.get("message.max.bytes", 0)),
            "client_id": properties.get("client.id", "sensorwatch-bridge"),
        },
        "sensor_level": settings.topic_layout.sensor_level,
        "header_topic": HEADER_MQTT_TOPIC,
        "header_received_at": HEADER_RECEIVED_AT,
        "latency_buckets": list(LATENCY_BUCKETS),
        "stats_every": STATS_EVERY,
        "retry_backoff": list(RETRY_BACKOFF),
        "shutdown_timeout": settings.bridge_shutdown_timeout,
    }


@dataclass(frozen=True)
class Event:
    """One line the engine reported: its kind and what it said."""

    kind: str
    body: dict[str, Any]


class Engine:
    """The engine's process: :meth:`events` until it ends, :meth:`stop` to end it."""

    def __init__(self, settings: BridgeSettings) -> None:
        if not BRIDGE_ENGINE.is_file():
            raise EngineMissing(
                f"the bridge's engine is not built ({BRIDGE_ENGINE}): run scripts/setup"
            )
        self.process = subprocess.Popen(
            [str(BRIDGE_ENGINE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdin is not None
        # Secrets go this way, never as arguments. The pipe stays open: its end tells the
        # engine this process is gone.
        self.process.stdin.write(json.dumps(engine_config(settings)).encode("utf-8") + b"\n")
        self.process.stdin.flush()

    def events(self) -> Iterator[Event]:
        """What the engine reports, line by line, until it ends."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            ((kind, body),) = json.loads(line).items()
            yield Event(kind, body)

    def stop(self) -> None:
        """Ask the engine to stop (a second call: stop waiting for Kafka)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        """Its exit status, once it ended."""
        status = self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        return status


def _path(value: object) -> str:
    return "" if value is None else str(value)
