"""The bridge (``python -m bridge``) between a real Mosquitto and a real Kafka broker:
device readings land in the readings topic once, keyed and with their headers; a device
cannot publish for another; bad payloads are forwarded as they came; a bridge killed
mid-stream and a broker restarted with readings queued lose nothing (docs/devices.md)."""

from __future__ import annotations

import base64
import json
import signal
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from conf.settings.base import env_name
from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT, TopicLayout
from contract.times import parse_instant, utc_now
from jobs.stream import run
from lake.reader import LakeReader
from local_stack import mosquitto as local_mosquitto
from local_stack.mosquitto import Credential, MosquittoInfo
from local_stack.server import free_port
from local_stack.tls import make_authority
from tests.support.brokers import Broker
from tests.support.job_settings import available_now
from tests.support.kafka_io import consume_all, make_topic
from tests.support.mqtt_io import (
    STARTED,
    Device,
    reading,
    refused,
    scrape,
    start_bridge,
    stop_bridge,
)
from tests.support.polling import wait_until
from tests.support.processes import Running

pytestmark = pytest.mark.mqtt

LAYOUT = TopicLayout()
LANDED = 120.0  # seconds readings get to reach Kafka
RECEIVED = "sensorwatch_bridge_messages_received_total"


def event_id(value: bytes | None) -> str | None:
    """The event_id of a reading's payload (None for what is not one)."""
    try:
        return json.loads(value or b"")["event_id"]
    except (ValueError, TypeError, KeyError):
        return None


def wait_for(
    kafka: Broker, topic: str, wanted: set[bytes], bridge: Running | None = None
) -> list[Message]:
    """Everything on ``topic`` once every payload of ``wanted`` is there (polled); at the
    deadline, what is missing and what the bridge said."""
    seen: list[Message] = []

    def landed() -> bool:
        seen[:] = consume_all(kafka.bootstrap, topic)
        return wanted <= {m.value() for m in seen}

    def detail() -> str:
        said = "\n".join(bridge.output()[-20:]) if bridge is not None else ""
        return f"{len(wanted - {m.value() for m in seen})} missing\n{said}"

    wait_until(landed, LANDED, f"{len(wanted)} payloads in {topic}", every=0.5, detail=detail)
    return seen


def readings(site: str, count: int, sensors: int = 5) -> list[tuple[str, bytes]]:
    """``count`` valid readings of a site's sensors, as (topic, payload)."""
    batch = []
    for seq in range(count):
        sensor = f"{site}-sensor-{seq % sensors:02d}"
        batch.append((LAYOUT.topic(site, sensor), reading(sensor, seq)))
    return batch


def publish(port: int, user: Credential, messages: list[tuple[str, bytes]]) -> None:
    """Publish as a device; every PUBACK must say success."""
    device = Device.connect(port, user)
    try:
        assert refused(device.publish(messages)) == []
    finally:
        device.close()


# --- one bridge for the module -----------------------------------------------------------


@pytest.fixture(scope="module")
def sites(mosquitto: MosquittoInfo) -> dict[str, Credential]:
    """Two site gateways on the session's broker."""
    made = local_mosquitto.add_devices(mosquitto.data_dir, ["plant-a", "plant-b"])
    return {c.username: c for c in made}


@pytest.fixture(scope="module")
def topic(kafka: Broker) -> str:
    """The module's readings topic."""
    return make_topic(kafka, "bridge")


@pytest.fixture(scope="module")
def bridge(kafka: Broker, mosquitto: MosquittoInfo, topic: str) -> Iterator[Running]:
    """A bridge from the session's Mosquitto to the module's topic."""
    running = start_bridge(kafka, topic, mosquitto, f"bridge-test-{uuid.uuid4().hex[:8]}")
    try:
        yield running
    finally:
        summary = stop_bridge(running)
    assert summary.startswith("bridge: stopped: "), summary


def test_readings_land_once_keyed_with_their_topic_and_arrival(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, sites: dict[str, Credential],
    bridge: Running,
) -> None:  # fmt: skip
    sent = {}
    before = utc_now()
    for site in sites:
        batch = readings(site, 60)
        publish(mosquitto.port, sites[site], batch)
        sent.update({payload: mqtt_topic for mqtt_topic, payload in batch})
    landed = [m for m in wait_for(kafka, topic, set(sent)) if m.value() in sent]
    after = utc_now()
    assert Counter(m.value() for m in landed) == Counter(set(sent))  # each exactly once
    for message in landed:
        mqtt_topic = sent[message.value()]
        headers = dict(message.headers() or [])
        assert message.key() == mqtt_topic.split("/")[2].encode()
        assert headers[HEADER_MQTT_TOPIC] == mqtt_topic.encode()
        arrived = headers[HEADER_RECEIVED_AT].decode()
        assert arrived.endswith("Z") and before <= parse_instant(arrived) <= after
    samples = wait_until(
        lambda: (s := scrape(bridge))["sensorwatch_bridge_messages_in_flight"] == 0 and s,
        LANDED, "nothing in flight",
    )  # fmt: skip
    received = samples["sensorwatch_bridge_messages_received_total"]
    assert received >= len(sent)
    assert samples["sensorwatch_bridge_messages_acknowledged_total"] == received
    assert samples["sensorwatch_bridge_messages_forwarded_total"] == received
    assert samples["sensorwatch_bridge_oldest_unacknowledged_age_seconds"] == 0
    assert samples["sensorwatch_bridge_forward_seconds_count"] >= len(sent)


def test_a_device_cannot_publish_for_another(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, sites: dict[str, Credential],
    bridge: Running,
) -> None:  # fmt: skip
    forged = reading("plant-b-sensor-00")
    marker = reading("plant-a-sensor-00")
    device = Device.connect(mosquitto.port, sites["plant-a"])
    try:
        codes = device.publish(
            [
                (LAYOUT.topic("plant-b", "plant-b-sensor-00"), forged),
                (LAYOUT.topic("plant-a", "plant-a-sensor-00"), marker),
            ]
        )
    finally:
        device.close()
    assert refused(codes) == ["Not authorized"]
    # The marker came after the forgery on the same connection: once it is in Kafka, the
    # forgery would be too.
    landed = wait_for(kafka, topic, {marker})
    assert forged not in {m.value() for m in landed}


def test_bad_payloads_are_forwarded_as_they_came(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, sites: dict[str, Credential],
    bridge: Running,
) -> None:  # fmt: skip
    sensor = LAYOUT.topic("plant-b", "plant-b-sensor-01")
    no_sensor = "sensors/plant-b//readings"
    tag = uuid.uuid4().hex.encode()  # tells this test's payloads from the others'
    bad = {
        b"not json " + tag: sensor,
        b'{"event_id": "' + tag + b'", "temperature_c": ': sensor,
        b"\xff\xfe\x00 binary " + tag: sensor,
        b"[1, 2, 3, " + tag + b"]": sensor,
        json.dumps({"event_id": tag.decode(), "sensor_id": "x"}).encode(): sensor,
        b'{"note": "' + tag + b'", "pad": "' + b"x" * 100_000 + b'"}': sensor,
        reading("plant-b-sensor-02"): no_sensor,
    }
    publish(mosquitto.port, sites["plant-b"], [(t, p) for p, t in bad.items()])
    landed = {m.value(): m for m in wait_for(kafka, topic, set(bad))}
    for payload, mqtt_topic in bad.items():
        message = landed[payload]  # the very bytes
        expected_key = b"" if mqtt_topic == no_sensor else b"plant-b-sensor-01"
        assert message.key() == expected_key
        assert dict(message.headers() or [])[HEADER_MQTT_TOPIC] == mqtt_topic.encode()
    samples = scrape(bridge)
    assert samples['sensorwatch_bridge_errors_total{kind="topic_without_sensor"}'] >= 1


@pytest.mark.jvm
def test_bad_payloads_land_in_quarantine_with_their_reasons(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, sites: dict[str, Credential],
    bridge: Running, spark, tmp_path: Path,
) -> None:  # fmt: skip
    tag = uuid.uuid4().hex
    binary = b"\xff\xfe\x00 binary " + tag.encode()
    own = f"plant-b-sensor-{tag[:6]}"
    other = LAYOUT.topic("plant-b", f"plant-b-other-{tag[:6]}")
    sent = {
        # payload: (MQTT topic, the reason the job must give; None: a valid reading)
        f"not json {tag}".encode(): (LAYOUT.topic("plant-b", own), "invalid_json"),
        binary: (LAYOUT.topic("plant-b", own), "invalid_utf8"),
        reading(own, seq=1): (other, "key_mismatch"),  # under another sensor's topic
        reading(own, seq=2): ("sensors/plant-b//readings", "key_without_sensor"),
        reading(own, seq=3): (LAYOUT.topic("plant-b", own), None),
    }
    publish(mosquitto.port, sites["plant-b"], [(t, p) for p, (t, _) in sent.items()])
    wait_for(kafka, topic, set(sent), bridge)

    lake = tmp_path / "lake"
    run(available_now(kafka, topic, lake), spark)

    reader = LakeReader(lake)
    quarantined = {}
    for row in reader.read("quarantine", ["raw_value", "error"]).to_pylist():
        raw = row["raw_value"]
        payload = base64.b64decode(raw) if row["error"] == "invalid_utf8" else raw.encode()
        quarantined[payload] = row["error"]
    valid = {row["seq"] for row in reader.read("readings", ["sensor_id", "seq"]).to_pylist()
             if row["sensor_id"] == own}  # fmt: skip
    for payload, (_, reason) in sent.items():
        if reason is None:
            assert payload not in quarantined
        else:
            assert quarantined.get(payload) == reason, payload
    assert valid == {3}


def test_an_empty_payload_is_forwarded_empty(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, sites: dict[str, Credential],
    bridge: Running,
) -> None:  # fmt: skip
    empty_topic = LAYOUT.topic("plant-a", f"empty-{uuid.uuid4().hex[:6]}")
    marker = reading("plant-a-sensor-03")
    publish(
        mosquitto.port, sites["plant-a"],
        [(empty_topic, b""), (LAYOUT.topic("plant-a", "plant-a-sensor-03"), marker)],
    )  # fmt: skip
    landed = wait_for(kafka, topic, {marker})
    empty = [
        m for m in landed if dict(m.headers() or [])[HEADER_MQTT_TOPIC] == empty_topic.encode()
    ]
    assert [m.value() for m in empty] == [b""]  # empty, not null (a tombstone)


# --- faults --------------------------------------------------------------------------------


def test_a_bridge_killed_mid_stream_loses_nothing(
    kafka: Broker, mosquitto: MosquittoInfo, sites: dict[str, Credential]
) -> None:
    topic = make_topic(kafka, "bridge-kill")
    client_id = f"bridge-kill-{uuid.uuid4().hex[:8]}"
    published: list[bytes] = []  # what the broker acknowledged to the device
    stop = threading.Event()
    failures: list[BaseException] = []

    def device() -> None:  # a steady stream, bridge or not (the broker queues meanwhile)
        try:
            sender = Device.connect(mosquitto.port, sites["plant-a"])
            try:
                while not stop.wait(0.05):  # a load shape: about 1,000 readings/s
                    chunk = readings("plant-a", 50, sensors=20)
                    assert refused(sender.publish(chunk)) == []
                    published.extend(payload for _, payload in chunk)
            finally:
                sender.close()
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    bridge = start_bridge(kafka, topic, mosquitto, client_id)
    stream = threading.Thread(target=device, daemon=True)
    stream.start()
    kills: list[tuple[int, int]] = []  # (received by the bridge killed, in flight then)
    try:
        for at in (600, 300, 300):  # readings a bridge received before it is killed
            samples = wait_until(
                lambda at=at, bridge=bridge: (
                    (s := scrape(bridge))["sensorwatch_bridge_messages_received_total"] >= at
                    and s["sensorwatch_bridge_messages_in_flight"] >= 1
                    and s
                ),
                LANDED, f"{at} readings received, some in flight, before a kill", every=0.01,
            )  # fmt: skip
            bridge.interrupt_group(signal.SIGKILL)
            bridge.finish(STARTED)
            kills.append(
                (
                    int(samples["sensorwatch_bridge_messages_received_total"]),
                    int(samples["sensorwatch_bridge_messages_in_flight"]),
                )
            )
            bridge = start_bridge(kafka, topic, mosquitto, client_id)
        stop.set()
        stream.join(LANDED)
        assert not failures, failures
        landed = wait_for(kafka, topic, set(published), bridge)
    finally:
        stop.set()
        stop_bridge(bridge)
    copies = Counter(m.value() for m in landed)
    assert set(copies) == set(published)  # every one, nothing else
    print(
        f"\nkilled after (received, in flight) {kills}; {len(landed)} records for "
        f"{len(published)} readings, {sum(n - 1 for n in copies.values())} duplicates"
    )


def test_bridges_of_a_shared_group_share_the_readings_and_a_killed_one_loses_nothing(
    kafka: Broker, mosquitto: MosquittoInfo, sites: dict[str, Credential]
) -> None:
    topic = make_topic(kafka, "bridge-shared")
    group = f"g{uuid.uuid4().hex[:6]}"
    ids = [f"bridge-shared-{n}-{uuid.uuid4().hex[:6]}" for n in range(2)]
    bridges = [start_bridge(kafka, topic, mosquitto, i, mqtt_shared_group=group) for i in ids]
    published: list[bytes] = []
    try:
        for step in range(6):
            chunk = readings("plant-b", 300, sensors=20)
            publish(mosquitto.port, sites["plant-b"], chunk)
            published.extend(payload for _, payload in chunk)
            if step == 2:  # the first killed with readings in flight, then back
                wait_until(lambda: scrape(bridges[0])[RECEIVED] >= 1, LANDED, "the first's share")
                bridges[0].interrupt_group(signal.SIGKILL)
                bridges[0].finish(STARTED)
                bridges[0] = start_bridge(kafka, topic, mosquitto, ids[0], mqtt_shared_group=group)
        landed = wait_for(kafka, topic, set(published), bridges[1])
        shares = [scrape(b)[RECEIVED] for b in bridges]
    finally:
        for running in bridges:
            stop_bridge(running)
    copies = Counter(m.value() for m in landed)
    assert set(copies) == set(published)  # every one, nothing else
    # Each took a share since its start (the first: since it came back), neither all.
    assert all(0 < share < len(published) for share in shares), shares
    # Without the group each bridge forwards every reading: about twice as many records.
    assert sum(copies.values()) < 1.5 * len(published), sum(copies.values())


def test_readings_queued_in_mosquitto_survive_its_restart(kafka: Broker, tmp_path: Path) -> None:
    data, port = tmp_path / "mosquitto", free_port()
    broker = local_mosquitto.start(data, port, device_names=["plant-r"])
    topic = make_topic(kafka, "bridge-restart")
    client_id = f"bridge-restart-{uuid.uuid4().hex[:8]}"
    user = local_mosquitto.credential(data, "plant-r")
    try:
        # The bridge's session exists; while the bridge is away the broker queues for it.
        stop_bridge(start_bridge(kafka, topic, broker, client_id))
        queued = readings("plant-r", 300)
        publish(port, user, queued)
        local_mosquitto.stop(data)  # saves the queue to data/mosquitto.db
        broker = local_mosquitto.start(data, port)
        bridge = start_bridge(kafka, topic, broker, client_id)
        try:
            assert any("session resumed" in line for line in bridge.lines)
            wait_for(kafka, topic, {payload for _, payload in queued})
            # A restart under a running bridge: it reconnects to its session.
            local_mosquitto.stop(data)
            broker = local_mosquitto.start(data, port)
            bridge.wait_for_line(lambda line: "MQTT connection back" in line, LANDED, "back")
            later = readings("plant-r", 200)
            publish(port, user, later)
            landed = wait_for(kafka, topic, {payload for _, payload in queued + later})
        finally:
            stop_bridge(bridge)
    finally:
        local_mosquitto.stop(data)
    assert {m.value() for m in landed} == {payload for _, payload in queued + later}
    assert any("MQTT connection to" in line and "lost" in line for line in bridge.lines)


def test_a_refused_login_stops_the_bridge_with_one_line(
    kafka: Broker, mosquitto: MosquittoInfo, topic: str, tmp_path: Path
) -> None:
    wrong = tmp_path / "password"
    wrong.write_text("not the password")
    env = {
        **local_mosquitto.client_env(mosquitto),
        env_name("mqtt_password") + "_FILE": str(wrong),
        env_name("bootstrap_servers"): kafka.bootstrap,
        env_name("topic"): topic,
    }
    bridge = Running([sys.executable, "-m", "bridge"], env=env)
    try:
        assert bridge.finish(STARTED) == 2
    finally:
        bridge.kill()
    last = bridge.lines[-1]
    assert last.startswith(f"bridge: the MQTT broker at 127.0.0.1:{mosquitto.port} refused")
    assert "Traceback" not in "\n".join(bridge.lines)
    assert "not the password" not in "\n".join(bridge.lines)


def test_a_record_kafka_refuses_holds_the_acknowledgements_back_and_is_said_once(
    kafka: Broker, mosquitto: MosquittoInfo, sites: dict[str, Credential]
) -> None:
    # A client that takes records of 2,000 bytes at most: the big reading is refused at
    # every try; the small one after it reaches Kafka, yet neither is acknowledged.
    topic = make_topic(kafka, "bridge-refused")
    bridge = start_bridge(
        kafka, topic, mosquitto, f"bridge-refused-{uuid.uuid4().hex[:8]}",
        kafka_properties="message.max.bytes=2000",
    )  # fmt: skip
    big = b'{"pad": "' + b"x" * 5000 + b'"}'
    small = reading("plant-a-sensor-04")
    try:
        publish(
            mosquitto.port, sites["plant-a"],
            [(LAYOUT.topic("plant-a", "plant-a-sensor-04"), p) for p in (big, small)],
        )  # fmt: skip
        wait_for(kafka, topic, {small}, bridge)
        bridge.wait_for_line(lambda line: "Kafka refused a record" in line, LANDED, "refusal")
        samples = wait_until(
            lambda: (s := scrape(bridge))['sensorwatch_bridge_errors_total{kind="kafka_delivery"}']
            >= 2 and s,
            LANDED, "a retry of the refused record",
        )  # fmt: skip
        assert samples["sensorwatch_bridge_messages_in_flight"] == 2
        assert samples["sensorwatch_bridge_messages_acknowledged_total"] == 0
    finally:
        summary = stop_bridge(bridge)
    assert summary.endswith("2 left unacknowledged (the broker sends them again to the next start)")
    assert sum("Kafka refused a record" in line for line in bridge.lines) == 1


def test_the_bridge_reads_over_tls_from_a_broker_its_ca_vouches_for(
    kafka: Broker, tmp_path: Path
) -> None:
    data = tmp_path / "mosquitto-tls"
    broker = local_mosquitto.start(
        data, free_port(), tls_port=free_port(), device_names=["plant-t"]
    )  # fmt: skip
    topic = make_topic(kafka, "bridge-tls")
    try:
        assert broker.tls_port is not None
        tls = local_mosquitto.client_env(broker, tls=True)  # its CA, its TLS port
        bridge = start_bridge(
            kafka, topic, broker, f"bridge-tls-{uuid.uuid4().hex[:8]}",
            mqtt_port=tls["SENSORWATCH_MQTT_PORT"], mqtt_tls="true",
            mqtt_ca_location=tls["SENSORWATCH_MQTT_CA_LOCATION"],
        )  # fmt: skip
        try:
            assert any(f":{broker.tls_port}" in line for line in bridge.lines), bridge.lines
            sent = readings("plant-t", 100)
            publish(broker.port, local_mosquitto.credential(data, "plant-t"), sent)
            landed = wait_for(kafka, topic, {payload for _, payload in sent}, bridge)
        finally:
            stop_bridge(bridge)
        # A bridge that trusts another authority does not take the broker's word: at its
        # start that is its settings' fault, said in one line (as a refused login).
        stranger = Running(
            [sys.executable, "-m", "bridge"],
            env={
                **tls,
                env_name("mqtt_ca_location"): str(make_authority(tmp_path / "other").certificate),
                env_name("mqtt_client_id"): f"bridge-tls-{uuid.uuid4().hex[:8]}",
                env_name("bootstrap_servers"): kafka.bootstrap,
                env_name("topic"): topic,
                env_name("metrics_port"): "0",
            },
        )
        try:
            ended = stranger.finish(STARTED)
        finally:
            stranger.kill()
    finally:
        local_mosquitto.stop(data)
    assert Counter(m.value() for m in landed) == Counter(payload for _, payload in sent)
    assert ended == 2, stranger.lines
    assert stranger.lines[-1] == (
        f"bridge: the MQTT broker at 127.0.0.1:{broker.tls_port} could not be verified "
        "(x509: certificate signed by unknown authority): check mqtt_ca_location (the "
        "authority that signed its certificate) and mqtt_host (a name its certificate carries)"
    )
    assert "Traceback" not in "\n".join(stranger.lines)
