"""MQTT for tests: a device that publishes with QoS 1 and waits for the broker's answers,
readings to publish, with deadlines (paho-mqtt, MQTT 5), and the bridge started,
scraped (its /metrics) and stopped as a program."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from conf.settings.base import env_name
from contract.devices import TopicLayout
from contract.times import iso, utc_now
from local_stack import mosquitto as local_mosquitto
from local_stack.mosquitto import Credential, MosquittoInfo
from local_stack.server import LOOPBACK
from tests.support.brokers import Broker
from tests.support.processes import Running

STARTED = 60.0  # seconds a bridge gets to connect or stop (a loaded machine, cold imports)


def reading(sensor_id: str, seq: int = 0, temperature_c: float = 21.5, **extra: object) -> bytes:
    """A valid reading of docs/architecture.md#the-event, as a device sends it now (with
    ``extra`` fields of the sender's own)."""
    return json.dumps(
        {
            "event_id": str(uuid.uuid4()),
            "sensor_id": sensor_id,
            "event_time": iso(utc_now()),
            "temperature_c": temperature_c,
            "humidity_pct": 40.0,
            "battery_pct": 90.0,
            "seq": seq,
            **extra,
        }
    ).encode()


@dataclass
class Device:
    """A connected MQTT client publishing as ``user``; :meth:`close` disconnects."""

    client: mqtt.Client

    @classmethod
    def connect(
        cls,
        port: int,
        user: Credential,
        client_id: str | None = None,
        timeout: float = 30.0,
        ca: Path | None = None,
    ) -> Device:
        """Connected and ready to publish (fails at the deadline saying why); over TLS,
        trusting the CA certificate ``ca`` (PEM), when given."""
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id or f"test-device-{uuid.uuid4().hex[:8]}",
            protocol=mqtt.MQTTv5,
        )
        client.username_pw_set(user.username, user.password)
        if ca is not None:
            client.tls_set(ca_certs=str(ca))  # and checks the broker's name: 127.0.0.1
        client.max_inflight_messages_set(1000)
        client.max_queued_messages_set(0)
        answer: list[ReasonCode] = []
        client.on_connect = lambda _c, _u, _f, reason, _p: answer.append(reason)
        client.connect(LOOPBACK, port)
        client.loop_start()
        deadline = time.monotonic() + timeout
        while not answer and time.monotonic() < deadline:
            time.sleep(0.01)  # paho's thread answers; a poll with a deadline
        if not answer or answer[0].is_failure:
            client.loop_stop()
            raise AssertionError(
                f"device {user.username} not connected within {timeout:g}s: {answer or 'no answer'}"
            )
        return cls(client)

    def publish(
        self, messages: Iterable[tuple[str, bytes]], timeout: float = 60.0
    ) -> list[ReasonCode]:
        """Publish each (topic, payload) with QoS 1; returns the broker's PUBACK reason
        codes, in order, once every one came (fails at the deadline)."""
        answers: dict[int, ReasonCode] = {}
        previous = self.client.on_publish
        self.client.on_publish = lambda _c, _u, mid, reason, _p: answers.__setitem__(mid, reason)
        try:
            infos = [self.client.publish(topic, payload, qos=1) for topic, payload in messages]
            deadline = time.monotonic() + timeout
            for info in infos:
                left = deadline - time.monotonic()
                info.wait_for_publish(max(0.0, left))
                if not info.is_published():
                    raise AssertionError(f"no PUBACK within {timeout:g}s for mid {info.mid}")
            # on_publish runs on paho's thread just before is_published turns true.
            while len(answers) < len({i.mid for i in infos}) and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            self.client.on_publish = previous
        return [answers[info.mid] for info in infos]

    def close(self) -> None:
        """Disconnect and stop the network thread."""
        self.client.disconnect()
        self.client.loop_stop()


def refused(codes: Sequence[ReasonCode]) -> list[str]:
    """The names of the failure reason codes among ``codes``."""
    return [str(code) for code in codes if code.is_failure]


def start_bridge(
    kafka: Broker, topic: str, broker: MosquittoInfo, client_id: str, **settings: str
) -> Running:
    """``python -m bridge`` as the bridge's user of ``broker``, once it is connected."""
    env = {
        **local_mosquitto.client_env(broker),
        env_name("mqtt_client_id"): client_id,
        env_name("bootstrap_servers"): kafka.bootstrap,
        env_name("topic"): topic,
        env_name("metrics_port"): "0",
        **{env_name(name): value for name, value in settings.items()},
    }
    bridge = Running([sys.executable, "-m", "bridge"], env=env)
    try:
        bridge.wait_for_line(lambda line: "bridge: connected to" in line, STARTED, "connected")
    except BaseException:
        bridge.kill()
        raise
    return bridge


def stop_bridge(bridge: Running) -> str:
    """SIGTERM, as Docker or systemd send it; returns its last line (the summary)."""
    bridge.terminate()
    assert bridge.finish(STARTED) == 0, "\n".join(bridge.lines[-20:])
    return bridge.lines[-1]


def scrape(bridge: Running) -> dict[str, float]:
    """The samples of the bridge's /metrics (the URL it said at start), by name."""
    said = next(line for line in bridge.output() if "bridge: metrics at " in line)
    with urllib.request.urlopen(said.split(" at ", 1)[1], timeout=10) as page:
        text = page.read().decode()
    samples = (line.rpartition(" ") for line in text.splitlines() if not line.startswith("#"))
    return {name: float(value) for name, _, value in samples if name}


def away_bridge_session(
    broker: MosquittoInfo, client_id: str = "test-away-bridge", timeout: float = 30.0
) -> None:
    """A bridge's persistent session subscribed (QoS 1) to every device's readings, then
    disconnected: the broker queues the readings for it, as for a bridge that is away, so
    a publish finds a subscriber (MQTT 5 answers "No matching subscribers" otherwise, and
    the producer counts that message failed)."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    user = local_mosquitto.credential(broker.data_dir, local_mosquitto.BRIDGE_USER)
    client.username_pw_set(user.username, user.password)
    connected, subscribed = threading.Event(), threading.Event()
    client.on_connect = lambda _c, _u, _f, reason, _p: connected.set()
    client.on_subscribe = lambda _c, _u, _m, _r, _p: subscribed.set()
    session = Properties(PacketTypes.CONNECT)
    session.SessionExpiryInterval = 3600
    # clean_start false, as the bridge connects: Mosquitto 2.0 restores the subscriptions
    # of such a session on a restart (not those of a session that began clean).
    client.connect(LOOPBACK, broker.port, clean_start=False, properties=session)
    client.loop_start()
    try:
        assert connected.wait(timeout), f"{client_id} not connected within {timeout:g}s"
        client.subscribe(TopicLayout().subscription, qos=1)
        assert subscribed.wait(timeout), f"{client_id} not subscribed within {timeout:g}s"
    finally:
        client.disconnect()
        client.loop_stop()
