"""scripts/mqtt-local and the device side of the contract (contract/devices.py): the topic
layout, device names, and a real Mosquitto that lets each device log in and publish its
own readings only."""

from __future__ import annotations

import base64
import hashlib
import stat
import subprocess
import sys
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from conf.paths import PROJECT_ROOT
from contract.devices import TopicLayout, check_device_name, device_name
from local_stack import mosquitto as local_mosquitto
from local_stack.mosquitto import BRIDGE_USER, Credential, MosquittoInfo
from local_stack.server import free_port
from tests.support.mqtt_io import Device, reading, refused
from tests.support.polling import wait_until

# --- the layout, without a broker --------------------------------------------------------


def test_default_layout_names_the_site_device_and_the_sensor() -> None:
    layout = TopicLayout()
    assert layout.subscription == "sensors/+/+/readings"
    assert layout.acl_pattern == "sensors/%u/+/readings"
    assert (
        layout.topic("port-ryan-dc", "sensor-0001") == "sensors/port-ryan-dc/sensor-0001/readings"
    )
    assert layout.sensor_of("sensors/port-ryan-dc/sensor-0001/readings") == "sensor-0001"
    assert layout.sensor_of("sensors/port-ryan-dc//readings") is None


def test_a_layout_without_a_site_makes_every_sensor_a_device() -> None:
    layout = TopicLayout("dt/+/{sensor_id}/temperature")
    assert layout.device_level == "{sensor_id}"
    assert layout.acl_pattern == "dt/+/%u/temperature"
    assert layout.subscription == "dt/+/+/temperature"
    assert layout.sensor_of("dt/eu/s-7/temperature") == "s-7"
    assert layout.sensor_of("dt") is None
    with pytest.raises(ValueError, match="wildcards"):
        layout.topic("x", "s-7")


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("sensors/{site}/readings", "{sensor_id} exactly once"),
        ("a/{sensor_id}/{sensor_id}", "{sensor_id} exactly once"),
        ("a/{site}/{site}/{sensor_id}", "{site} at most once"),
        ("a//{sensor_id}", "level 2"),
        ("a/#/{sensor_id}", "level 2"),
        ("a/b+/{sensor_id}", "level 2"),
        ("$SYS/{sensor_id}", "the broker's"),
    ],
)
def test_a_bad_layout_says_what_is_wrong(template: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("{", r"\{").replace("}", r"\}")):
        TopicLayout(template)


def test_device_names_are_safe_topic_levels_and_user_names() -> None:
    assert device_name("Port Ryan DC") == "port-ryan-dc"
    assert device_name("  Zürich / Hub #2 ") == "z-rich-hub-2"
    with pytest.raises(ValueError, match="no letter or digit"):
        device_name("+++")
    for bad in ("A", "-a", "a-", "a/b", "a+b", "x" * 65, ""):
        with pytest.raises(ValueError, match="device name"):
            check_device_name(bad)


def test_password_hash_is_mosquittos_pbkdf2_sha512() -> None:
    salt = bytes(range(12))
    line = local_mosquitto.password_hash("s3cret", salt)
    _, kind, rounds, salt64, hash64 = line.split("$")
    assert (kind, rounds, base64.b64decode(salt64)) == ("7", "101", salt)
    expected = hashlib.pbkdf2_hmac("sha512", b"s3cret", salt, 101)
    assert base64.b64decode(hash64) == expected


def test_the_config_keeps_what_a_bridge_has_not_acknowledged(tmp_path: Path) -> None:
    config = local_mosquitto.render_config(tmp_path, 1883)
    lines = set(config.splitlines())
    for wanted in (
        "allow_anonymous false",
        "persistence true",
        f"persistence_location {tmp_path / 'data'}/",
        f"max_queued_messages {local_mosquitto.MAX_QUEUED_MESSAGES}",
        "listener 1883 127.0.0.1",
    ):
        assert wanted in lines
    acl = local_mosquitto.render_acl(TopicLayout())
    assert "pattern write sensors/%u/+/readings" in acl.splitlines()
    assert f"user {BRIDGE_USER}\ntopic read sensors/+/+/readings\n" in acl


# --- a real broker -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sites(mosquitto: MosquittoInfo) -> dict[str, Credential]:
    """Two devices (site gateways) on the session's broker."""
    made = local_mosquitto.add_devices(mosquitto.data_dir, ["north-plant", "south-hub"])
    return {c.username: c for c in made}


def _connect_code(port: int, username: str | None, password: str | None) -> str:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    if username is not None:
        client.username_pw_set(username, password)
    answer: list[object] = []
    client.on_connect = lambda _c, _u, _f, reason, _p: answer.append(reason)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        wait_until(lambda: answer, 30, "a CONNACK")
    finally:
        client.disconnect()
        client.loop_stop()
    return str(answer[0])


def test_only_known_users_log_in(mosquitto: MosquittoInfo, sites: dict[str, Credential]) -> None:
    north = sites["north-plant"]
    assert _connect_code(mosquitto.port, north.username, north.password) == "Success"
    # Mosquitto 2.0.11 says "Not authorized" to a wrong password too.
    wrong = ("Not authorized", "Bad user name or password")
    assert _connect_code(mosquitto.port, north.username, "guess") in wrong
    assert _connect_code(mosquitto.port, None, None) in wrong


def test_a_device_publishes_under_its_own_topic_only(
    mosquitto: MosquittoInfo, sites: dict[str, Credential]
) -> None:
    layout = TopicLayout()
    device = Device.connect(mosquitto.port, sites["north-plant"])
    try:
        codes = device.publish(
            [
                (layout.topic("north-plant", "sensor-0001"), reading("sensor-0001")),
                (layout.topic("south-hub", "sensor-0002"), reading("sensor-0002")),
                ("sensors/north-plant/sensor-0001/commands", b"{}"),
                ("elsewhere", b"{}"),
            ]
        )
    finally:
        device.close()
    assert not codes[0].is_failure  # "No matching subscribers": no bridge listens here
    assert refused(codes[1:]) == ["Not authorized"] * 3


def test_a_device_reads_nothing(mosquitto: MosquittoInfo, sites: dict[str, Credential]) -> None:
    # Mosquitto grants the subscription but delivers only what the ACL lets the user read:
    # the bridge's user (the control) gets the reading, the other device does not.
    layout = TopicLayout()
    bridge = Device.connect(
        mosquitto.port, local_mosquitto.credential(mosquitto.data_dir, BRIDGE_USER)
    )
    south = Device.connect(mosquitto.port, sites["south-hub"])
    north = Device.connect(mosquitto.port, sites["north-plant"])
    seen: dict[str, list[bytes]] = {"bridge": [], "south": []}
    for name, device in (("bridge", bridge), ("south", south)):
        device.client.on_message = lambda _c, _u, m, name=name: seen[name].append(m.payload)
        granted: list[object] = []
        device.client.on_subscribe = lambda _c, _u, _m, codes, _p, g=granted: g.extend(codes)
        device.client.subscribe(layout.subscription, qos=1)
        wait_until(lambda g=granted: g, 30, "a SUBACK")
    try:
        payload = reading("sensor-0001")
        north.publish([(layout.topic("north-plant", "sensor-0001"), payload)])
        wait_until(lambda: seen["bridge"], 30, "the reading at the bridge's user")
        # A publish of its own and its PUBACK: anything the broker had queued for the device
        # before came first, on the same connection.
        south.publish([(layout.topic("south-hub", "sensor-0002"), reading("sensor-0002"))])
    finally:
        for device in (bridge, south, north):
            device.close()
    assert seen["bridge"][0] == payload  # then south's own reading
    assert seen["south"] == []


def test_devices_added_while_it_runs_log_in_at_once(mosquitto: MosquittoInfo) -> None:
    (late,) = local_mosquitto.add_devices(mosquitto.data_dir, ["late-site"])
    assert _connect_code(mosquitto.port, late.username, late.password) == "Success"
    again = local_mosquitto.add_devices(mosquitto.data_dir, ["late-site"])
    assert again[0].password == late.password  # made once, kept


def test_secrets_stay_in_private_files(mosquitto: MosquittoInfo) -> None:
    folder = mosquitto.data_dir / "credentials"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in (mosquitto.data_dir / "passwd", *folder.iterdir()):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    bridge = local_mosquitto.credential(mosquitto.data_dir, BRIDGE_USER)
    for shown in (
        (mosquitto.data_dir / "mosquitto.conf").read_text(encoding="utf-8"),
        (mosquitto.data_dir / "acl").read_text(encoding="utf-8"),
        local_mosquitto.SERVER.log_file(mosquitto.data_dir).read_text(encoding="utf-8"),
        " ".join(local_mosquitto.client_env(mosquitto).values()),
    ):
        assert bridge.password not in shown


def _mqtt_local(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "local_stack.mosquitto", *args],
        capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120,
    )  # fmt: skip


@pytest.mark.mqtt
def test_the_command_line_starts_reports_and_stops(tmp_path: Path) -> None:
    data, port = tmp_path / "broker", free_port()
    started = _mqtt_local("start", "--data-dir", str(data), "--port", str(port), "--device", "d1")
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.splitlines() == [f"mqtt=127.0.0.1:{port}"]
        assert "1 device(s): d1" in started.stderr
        env = _mqtt_local("client-env", "--data-dir", str(data), "--device", "d1")
        assert f"export SENSORWATCH_MQTT_PASSWORD_FILE={data / 'credentials' / 'd1'}" in env.stdout
        assert (data / "credentials" / "d1").read_text() not in env.stdout
        status = _mqtt_local("status", "--data-dir", str(data))
        assert status.returncode == 0 and status.stdout.splitlines()[1:] == [
            f"mqtt=127.0.0.1:{port}"
        ]
        # Names are add-device's alone: one clear line, the broker left running.
        named = _mqtt_local("stop", "d1", "--data-dir", str(data))
        assert (named.returncode, named.stderr.strip()) == (2, "mqtt-local: stop takes no names"), (
            named.stderr
        )
        # A second broker on a taken port: one clear line, nothing started.
        other = _mqtt_local("start", "--data-dir", str(tmp_path / "other"), "--port", str(port))
        assert other.returncode == 2
        assert other.stderr.strip() == (
            f"mqtt-local: port {port} on 127.0.0.1 is already in use; choose another --port"
        )
    finally:
        stopped = _mqtt_local("stop", "--data-dir", str(data))
    assert stopped.stdout.strip() == "mqtt-local: stopped"
    assert _mqtt_local("status", "--data-dir", str(data)).returncode == 1


@pytest.mark.mqtt
def test_the_tls_listener_takes_devices_that_trust_its_ca(tmp_path: Path) -> None:
    data = tmp_path / "broker"
    info = local_mosquitto.start(
        data, free_port(), tls_port=free_port(),
        device_names=["tls-site"],
    )  # fmt: skip
    try:
        assert info.tls_port is not None
        user = local_mosquitto.credential(data, "tls-site")
        client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
        client.username_pw_set(user.username, user.password)
        client.tls_set(ca_certs=str(info.ca))
        answer: list[object] = []
        client.on_connect = lambda _c, _u, _f, reason, _p: answer.append(reason)
        client.connect("localhost", info.tls_port)
        client.loop_start()
        try:
            wait_until(lambda: answer, 30, "a CONNACK over TLS")
            sent = client.publish(TopicLayout().topic("tls-site", "s-1"), reading("s-1"), qos=1)
            sent.wait_for_publish(30)
        finally:
            client.disconnect()
            client.loop_stop()
        assert str(answer[0]) == "Success" and sent.is_published()
    finally:
        local_mosquitto.stop(data)
