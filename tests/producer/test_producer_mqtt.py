"""``python -m producer --transport mqtt``: the simulated fleet published as its sites'
devices to a real Mosquitto, through a real bridge into a real Kafka topic: every
message the broker acknowledged arrives, byte for byte, keyed by its sensor, bad payloads
included; a refused login or an unreachable broker stops it with one line and status 2
(docs/devices.md, docs/producer.md)."""

from __future__ import annotations

import io
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from conf.settings.base import SettingsError, env_name, load_settings
from conf.settings.producer import ProducerSettings
from contract.devices import HEADER_MQTT_TOPIC, TopicLayout, device_name
from contract.event import INVALID_JSON, MISSING_FIELD, NOT_AN_OBJECT
from local_stack import mosquitto as local_mosquitto
from local_stack.mosquitto import MosquittoInfo
from local_stack.server import free_port
from producer import mqtt_sender
from producer.fleet import build_fleet
from producer.generator import Message, MessageGenerator
from producer.mqtt_sender import MqttSender, Route, routes_of
from tests.support.brokers import Broker
from tests.support.kafka_io import consume_all, make_topic
from tests.support.mqtt_io import away_bridge_session, start_bridge, stop_bridge
from tests.support.polling import wait_until
from tests.support.producer_run import read_jsonl, run_producer

pytestmark = pytest.mark.mqtt

LAYOUT = TopicLayout()
SEED, SENSORS, COUNT = 23, 120, 3000  # 120 sensors: 4 sites, 4 devices
SIMULATED = ("--start-time", "2026-01-01T00:00:00Z")
FAULTS = (
    "--late-fraction", 0.03, "--out-of-order-fraction", 0.03,
    "--duplicate-fraction", 0.03, "--malformed-fraction", 0.05,
)  # fmt: skip
LANDED = 120.0  # seconds the readings get to reach Kafka through the bridge


def the_fleet_s_devices(broker: MosquittoInfo, sensors: int, seed: int) -> dict[str, str]:
    """``{sensor_id: site}`` of the fleet of ``seed``, each site's device given a login on
    ``broker`` (live, as scripts/mqtt-local add-device does)."""
    sites = {sensor.sensor_id: sensor.site for sensor in build_fleet(sensors, seed)}
    local_mosquitto.add_devices(broker.data_dir, sorted({device_name(s) for s in sites.values()}))
    return sites


def generated(*flags: object) -> list[Message]:
    """The messages ``python -m producer`` with these flags sends, made again here (the
    generator is reproducible from the seed and the simulated start)."""
    given = dict(zip(flags[::2], flags[1::2], strict=True))
    settings = load_settings(
        ProducerSettings, {str(k).removeprefix("--").replace("-", "_"): v for k, v in given.items()}
    )
    assert settings.seed is not None and settings.count is not None
    generator = MessageGenerator(
        settings, build_fleet(settings.sensors, settings.seed), settings.seed
    )
    return [*generator.messages(settings.count), *generator.drain()]


def as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def publishing(
    broker: MosquittoInfo, port: int | None = None, credentials: Path | None = None
) -> tuple[str, ...]:
    """The flags that publish to ``broker`` (at ``port``) as its devices, with their
    passwords (or those in ``credentials``)."""
    return (
        "--transport", "mqtt", "--mqtt-port", str(port or broker.port),
        "--mqtt-credentials-dir", str(credentials or broker.data_dir / "credentials"),
        "--metrics", "false",
    )  # fmt: skip


def test_the_fleet_over_mqtt_arrives_in_kafka_through_the_bridge(
    kafka: Broker, mosquitto: MosquittoInfo, tmp_path: Path
) -> None:
    sites = the_fleet_s_devices(mosquitto, SENSORS, SEED)
    topic = make_topic(kafka, "producer-mqtt")
    manifest = tmp_path / "m.jsonl"
    flags = ("--count", COUNT, "--sensors", SENSORS, "--seed", SEED, *SIMULATED, *FAULTS)
    bridge = start_bridge(kafka, topic, mosquitto, f"producer-mqtt-{uuid.uuid4().hex[:8]}")
    try:
        done = run_producer(*publishing(mosquitto), "--manifest", manifest, *flags)
        assert done.returncode == 0, done.stderr
        assert f"{COUNT:,} delivered, 0 failed" in done.stderr
        assert "4 devices" in done.stderr

        sent = generated(*flags)
        wanted = Counter(as_bytes(m.value) for m in sent)
        landed: list = []

        def arrived() -> bool:
            landed[:] = consume_all(kafka.bootstrap, topic)
            return Counter(m.value() for m in landed) >= wanted

        wait_until(
            arrived, LANDED, f"the {COUNT} published messages in {topic}", every=0.5,
            detail=lambda: f"{len(landed)} records; the bridge said:\n"
            + "\n".join(bridge.output()[-10:]),
        )  # fmt: skip
    finally:
        stop_bridge(bridge)

    # The manifest: every message, in send order, acknowledged by the broker, on the topic
    # of its sensor's site; no Kafka position yet (the bridge gives it one).
    lines = read_jsonl(manifest)
    assert [(x["event_id"], x["sensor_id"], x["kind"]) for x in lines] == [
        (m.event_id, m.key, m.kind) for m in sent
    ]
    for line in lines:
        expected = LAYOUT.topic(device_name(sites[line["sensor_id"]]), line["sensor_id"])
        assert (line["mqtt_topic"], line["partition"], line["offset"]) == (expected, None, None)
    kinds = Counter(line["kind"] for line in lines)
    assert {"late", "out_of_order", "duplicate", "malformed"} <= set(kinds), kinds

    # Kafka: each payload byte for byte, as often as it was published (the producer's own
    # duplicates twice; nothing was killed, so nothing more), keyed by its sensor and
    # carrying the topic it was published to, bad payloads as they were.
    copies = Counter(
        (m.value(), m.key(), dict(m.headers() or [])[HEADER_MQTT_TOPIC].decode()) for m in landed
    )
    published = Counter(
        (as_bytes(m.value), m.key.encode(), LAYOUT.topic(device_name(sites[m.key]), m.key))
        for m in sent
    )
    assert copies == published, (
        f"{sum((copies - published).values())} extra, {sum((published - copies).values())} missing"
    )
    landed_ids = set()
    for record in landed:
        try:
            landed_ids.add(json.loads(record.value())["event_id"])
        except (ValueError, TypeError, KeyError):  # a malformed payload: compared above
            continue
    assert {line["event_id"] for line in lines if line["kind"] != "malformed"} <= landed_ids
    # Malformed payloads whose content names no sensor still went under their sensor.
    nameless = [
        line for line in lines
        if line["kind"] == "malformed"
        and line["malformation"] in (INVALID_JSON, NOT_AN_OBJECT, f"{MISSING_FIELD}:sensor_id")
    ]  # fmt: skip
    assert nameless, "no malformed message without a readable sensor_id in this run"


def test_a_wrong_password_stops_it_with_one_line(mosquitto: MosquittoInfo, tmp_path: Path) -> None:
    the_fleet_s_devices(mosquitto, 40, SEED)  # two sites
    manifest = tmp_path / "m.jsonl"

    done = run_producer(
        "--transport", "mqtt", "--mqtt-port", mosquitto.port, "--metrics", "false",
        "--sensors", 40, "--seed", SEED, "--count", 10, "--manifest", manifest,
        env={env_name("mqtt_password"): "not-the-password"},
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and "Traceback" not in done.stderr, said
    assert said[0].startswith(
        f"producer: the MQTT broker at mqtt://127.0.0.1:{mosquitto.port} refused device "
    )
    assert said[0].endswith(
        "check its password (--mqtt-credentials-dir or SENSORWATCH_MQTT_PASSWORD)"
    )
    assert "not-the-password" not in done.stderr
    assert not manifest.exists()


def test_no_broker_or_no_login_stops_it_with_one_line(
    mosquitto: MosquittoInfo, tmp_path: Path
) -> None:
    the_fleet_s_devices(mosquitto, 40, SEED)
    free = free_port()
    nowhere = run_producer(
        *publishing(mosquitto, port=free), "--sensors", 40, "--seed", SEED, "--count", 10
    )
    (tmp_path / "creds").mkdir()
    no_file = run_producer(
        *publishing(mosquitto, credentials=tmp_path / "creds"),
        "--sensors", 40, "--seed", SEED, "--count", 10,
    )  # fmt: skip

    site = device_name(build_fleet(40, SEED)[0].site)
    for done, says in (
        (nowhere, f"producer: cannot reach the MQTT broker at mqtt://127.0.0.1:{free}: "),
        (no_file, f"producer: no password for device {site} in {tmp_path / 'creds'}: "
                  f"scripts/mqtt-local add-device {site} makes one"),
    ):  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(says) and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(
    ("given", "password", "says"),
    [
        ({}, False, "--transport mqtt needs the devices' passwords from one place"),
        (
            {"mqtt_credentials_dir": "/no/such/folder"}, False,
            "--mqtt-credentials-dir (SENSORWATCH_MQTT_CREDENTIALS_DIR): no such folder",
        ),
        ({"mqtt_credentials_dir": "."}, True, "for every device); both are set"),
        (
            {"mqtt_username": "site-a"}, True,
            "--mqtt-username (SENSORWATCH_MQTT_USERNAME): with --transport mqtt",
        ),
        (
            {"mqtt_topic_layout": "sensors/+/{sensor_id}"}, True,
            "--mqtt-topic-layout (SENSORWATCH_MQTT_TOPIC_LAYOUT) 'sensors/+/{sensor_id}': "
            "the producer publishes to it",
        ),
        ({"mqtt_protocol": "4"}, True, "--mqtt-protocol (SENSORWATCH_MQTT_PROTOCOL)"),
    ],
)  # fmt: skip
def test_mqtt_settings_are_checked_naming_the_setting(
    given: dict[str, str], password: bool, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if password:
        monkeypatch.setenv(env_name("mqtt_password"), "s3cret")
    with pytest.raises(SettingsError) as refused:
        load_settings(ProducerSettings, {"transport": "mqtt", **given})
    assert says in str(refused.value)
    assert "s3cret" not in str(refused.value)


def test_the_kafka_transport_ignores_a_bridge_s_mqtt_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shell that exported the bridge's settings (scripts/mqtt-local client-env) still
    # runs the default producer.
    monkeypatch.setenv(env_name("mqtt_username"), "sensorwatch-bridge")
    monkeypatch.setenv(env_name("mqtt_password"), "secret")
    assert load_settings(ProducerSettings, {}).transport == "kafka"


# --- the sender in-process ---------------------------------------------------------------


def reading(sensor: str, seq: int) -> Message:
    """A valid reading of ``sensor`` as the generator makes it."""
    event_id = str(uuid.uuid4())
    value = json.dumps({
        "event_id": event_id, "sensor_id": sensor, "event_time": "2026-01-01T00:00:00.000Z",
        "temperature_c": 21.5, "humidity_pct": 40.0, "battery_pct": 90.0, "seq": seq,
    })  # fmt: skip
    return Message(sensor, value, "normal", event_id, "2026-01-01T00:00:00.000Z", 21.5)


def sender_for(broker: MosquittoInfo, routes: dict[str, Route], manifest: Path) -> MqttSender:
    """An MqttSender publishing ``routes`` with the devices' passwords of ``broker``."""
    settings = load_settings(
        ProducerSettings,
        {"transport": "mqtt", "mqtt_port": broker.port,
         "mqtt_credentials_dir": broker.data_dir / "credentials"},
    )  # fmt: skip
    devices = sorted({route.device for route in routes.values()})
    passwords = mqtt_sender.device_passwords(devices, settings.mqtt_credentials_dir, None)
    return MqttSender(settings, routes, passwords, manifest, log=io.StringIO())


def test_a_message_the_broker_refuses_is_failed_not_delivered(
    mosquitto: MosquittoInfo, tmp_path: Path
) -> None:
    local_mosquitto.add_devices(mosquitto.data_dir, ["site-own", "site-other"])
    # sensor-b is routed through site-own's login to site-other's topic: the ACL refuses
    # it (MQTT 5: PUBACK "Not authorized"), which is not a delivery.
    routes = {
        "sensor-a": Route("site-own", LAYOUT.topic("site-own", "sensor-a")),
        "sensor-b": Route("site-own", LAYOUT.topic("site-other", "sensor-b")),
    }
    away_bridge_session(mosquitto)
    sender = sender_for(mosquitto, routes, tmp_path / "m.jsonl")
    sender.connect()
    messages = [reading("sensor-a", 0), reading("sensor-b", 0), reading("sensor-a", 1)]

    summary = sender.run(messages)

    assert (summary.sent, summary.delivered, summary.failed) == (3, 2, 1)
    assert summary.first_error == f"Not authorized (device site-own, {routes['sensor-b'].topic})"
    lines = read_jsonl(tmp_path / "m.jsonl")
    assert [line["event_id"] for line in lines] == [messages[0].event_id, messages[2].event_id]


def test_a_broker_taking_fewer_in_flight_is_met_by_a_new_connection(
    mosquitto: MosquittoInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session's broker takes 1,000 unacknowledged messages per client (its Receive
    # Maximum); a sender that would keep more in flight connects again with its limit.
    monkeypatch.setattr(mqtt_sender, "MAX_INFLIGHT", 5000)
    local_mosquitto.add_devices(mosquitto.data_dir, ["site-own"])
    away_bridge_session(mosquitto)
    sites = {f"sensor-{i}": "Site Own" for i in range(20)}
    sender = sender_for(
        mosquitto, routes_of(sites, load_settings(ProducerSettings, {})), tmp_path / "m"
    )
    sender.log = log = io.StringIO()
    sender.connect()
    client = sender.devices["site-own"].client
    assert client.max_inflight_messages == 1000

    summary = sender.run(reading(f"sensor-{i % 20}", i) for i in range(6000))

    assert (summary.delivered, summary.failed) == (6000, 0)
    assert len(read_jsonl(tmp_path / "m")) == 6000
    # Connecting again on purpose is no outage: nothing is said of it.
    assert " lost its connection " not in log.getvalue(), log.getvalue()


def test_a_message_no_one_subscribes_to_is_failed_not_delivered(tmp_path: Path) -> None:
    # No session subscribes (no bridge ever connected): MQTT 5's PUBACK says "No matching
    # subscribers", not a failure code, but the broker dropped the message.
    data, port = tmp_path / "mosquitto", free_port()
    broker = local_mosquitto.start(data, port, device_names=["site-n"])
    try:
        routes = {"sensor-1": Route("site-n", LAYOUT.topic("site-n", "sensor-1"))}
        sender = sender_for(broker, routes, tmp_path / "m.jsonl")
        sender.connect()
        summary = sender.run([reading("sensor-1", 0), reading("sensor-1", 1)])
    finally:
        local_mosquitto.stop(data)
    assert (summary.sent, summary.delivered, summary.failed) == (2, 0, 2)
    assert summary.first_error is not None and "no bridge subscribes" in summary.first_error
    assert read_jsonl(tmp_path / "m.jsonl") == []


def test_a_broker_restarted_mid_run_loses_nothing(tmp_path: Path) -> None:
    # Half the messages sent, Mosquitto stopped and started again under the sender: the
    # clients reconnect, send again what was not acknowledged, and every message is
    # acknowledged in the end (the rest published while it was away waits in paho).
    data, port = tmp_path / "mosquitto", free_port()
    broker = local_mosquitto.start(data, port, device_names=["site-r"])
    try:
        away_bridge_session(broker)
        routes = {
            f"sensor-{i}": Route("site-r", LAYOUT.topic("site-r", f"sensor-{i}")) for i in range(5)
        }
        sender = sender_for(broker, routes, tmp_path / "m.jsonl")
        sender.log = log = io.StringIO()
        sender.connect()

        def messages() -> Iterator[Message]:
            for i in range(2000):
                if i == 1000:
                    local_mosquitto.stop(data)
                    local_mosquitto.start(data, port)
                yield reading(f"sensor-{i % 5}", i)

        summary = sender.run(messages())
    finally:
        local_mosquitto.stop(data)

    assert (summary.sent, summary.delivered, summary.failed) == (2000, 2000, 0), summary
    said = log.getvalue().splitlines()
    lost = [line for line in said if " lost its connection " in line]
    assert len(lost) == 1, said  # said once per outage
    assert lost[0].startswith(
        f"producer: device site-r lost its connection to mqtt://127.0.0.1:{port} ("
    )
    assert "producer: device site-r connected again" in said, said
    assert len(read_jsonl(tmp_path / "m.jsonl")) == 2000


def test_a_device_refused_from_the_start_is_said_once_and_a_lost_one_once() -> None:
    """paho retries a refused login on its own thread while the producer stops: those
    answers are the start-up's refusal again, which the start says (the wrong-password
    drill above saw a second line under load). A device the broker took before and then
    refuses has lost its connection: said once per outage."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.reasoncodes import ReasonCode

    said = io.StringIO()
    from conf.settings.mqtt_connection import MqttSettings

    sender = MqttSender(load_settings(MqttSettings, {}), {}, {}, log=said)
    refused = ReasonCode(PacketTypes.CONNACK, "Not authorized")
    accepted = ReasonCode(PacketTypes.CONNACK, "Success")

    never = mqtt_sender._Device("never-in", None, mqtt_sender.threading.Event())  # type: ignore[arg-type]
    for _ in range(3):
        sender._connected(never, refused, None)
    assert never.answer == refused and never.down is None
    assert said.getvalue() == ""

    was_in = mqtt_sender._Device("was-in", None, mqtt_sender.threading.Event())  # type: ignore[arg-type]
    sender._connected(was_in, accepted, None)
    sender._connected(was_in, refused, None)
    sender._connected(was_in, refused, None)
    lines = said.getvalue().strip().splitlines()
    assert len(lines) == 1 and "device was-in lost its connection" in lines[0], lines
