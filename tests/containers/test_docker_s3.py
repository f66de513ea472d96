"""`docker compose --profile s3 up`: the same demo with its lake in a bucket of an
S3-compatible service (S3Proxy) instead of the `lake` volume (issue 25); and, on the same
stack, `--profile mqtt`: the fleet over MQTT -> Mosquitto -> the bridge -> Kafka instead of
the producer writing to Kafka (issue 70). The two profiles combine, and one `up` serves
both: a stack of its own for each would cost CI another stack's start and run.

Needs a Docker engine with Compose v2 (a real one, or scripts/docker-lane); skipped with
the reason where none answers. The first `up` fetches Hadoop's S3 connector (550 MB from
Maven Central) into its volume before the job starts.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT, TopicLayout, device_name
from local_stack.compose_mqtt import BROKER_DIR, CREDENTIALS_DIR
from local_stack.compose_s3 import BUCKET, LAKE, SERVICE_BASEDIR
from local_stack.mosquitto import BRIDGE_USER, Credential
from local_stack.tls import make_authority
from tests.support.compose_stack import ComposeStack, compose_unavailable_reason
from tests.support.mqtt_io import Device, reading, refused
from tests.support.polling import STUCK, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]

PROFILES = ("s3", "mqtt")
LONG_RUNNING = {
    "kafka", "producer", "s3", "job", "dashboard", "alertmanager", "notifier", "prometheus",
    "mosquitto", "bridge",
}  # fmt: skip
ONE_SHOT = {"topic-init", "alertmanager-init", "prometheus-init", "s3-init", "s3a-jars",
            "mosquitto-init"}  # fmt: skip


@pytest.fixture(scope="module")
def stack() -> Iterator[ComposeStack]:
    """The demo's stack with the s3 and mqtt profiles, up; removed with its volumes
    afterwards."""
    reason = compose_unavailable_reason()
    if reason:
        pytest.skip(reason)
    stack = ComposeStack(profiles=PROFILES)
    stack.build()
    try:
        # `up` waits for s3a-jars to fetch the S3 connector before it starts the job.
        stack.run("up", "--detach", "--no-build", timeout=1200)
        yield stack
    finally:
        stack.down()


def healthy(stack: ComposeStack) -> dict[str, str] | None:
    containers = stack.containers()  # one `ps` a poll, for the health and the exit codes
    health, codes = stack.health(containers), stack.exit_codes(containers)
    exited = {s: codes[s] for s in ONE_SHOT if codes.get(s, 0) != 0}
    assert not exited, f"one-shot steps failed: {exited}\n{stack.logs(*exited)}"
    return health if all(health.get(s) == "healthy" for s in LONG_RUNNING) else None


@pytest.fixture(scope="module")
def first_alert(stack: ComposeStack) -> dict:
    """Every service healthy, and an overheat alert in the bucket's alerts table."""
    try:
        wait_until(lambda: healthy(stack), 900, "every long-running service healthy", every=3)
    except AssertionError as failure:
        raise AssertionError(
            f"{failure}\n{stack.health_report(LONG_RUNNING)}\n"
            f"{stack.logs('s3', 'job', 'notifier', 'mosquitto', 'bridge', 'producer')}"
        ) from None
    try:
        # Read once the job has said it wrote one: each read starts a container.
        alerts = wait_until(
            lambda: stack.said("job", " overheat_reading ") and [
                row for row in stack.read_lake({"alerts": ["sensor_id", "rule"]}, LAKE)["alerts"]
                or [] if row["rule"] == "overheat_reading"
            ],
            600, "an overheat_reading alert in the bucket", every=2,
        )  # fmt: skip
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{stack.logs('s3', 'job', 'notifier')}") from None
    return alerts[0]


def test_the_job_writes_tables_and_checkpoints_to_the_bucket_only(
    stack: ComposeStack, first_alert
) -> None:
    stored = stack.run("exec", "-T", "s3", "ls", f"{SERVICE_BASEDIR}/{BUCKET}/lake").stdout.split()
    on_the_volume = stack.run("exec", "-T", "job", "ls", "-A", "/data/lake").stdout.split()

    assert {"readings", "quarantine", "alerts", "incidents", "_checkpoints"} <= set(stored)
    assert on_the_volume == [], "the lake volume must stay empty with the s3 profile"


def test_the_profile_needs_no_root(stack: ComposeStack, first_alert) -> None:
    """s3-init prepares its volumes, and s3a-jars fetches into its own, as the app's user;
    mosquitto-init prepares Mosquitto's, which runs as that user too."""
    users = stack.users()
    profiles = ("s3-init", "s3", "s3a-jars", "mosquitto-init", "mosquitto", "bridge")

    assert {name: users[name] for name in profiles} == {
        "s3-init": "sensorwatch", "s3": "10001:10001", "s3a-jars": "sensorwatch",
        "mosquitto-init": "sensorwatch", "mosquitto": "10001:10001", "bridge": "sensorwatch",
    }  # fmt: skip
    assert stack.exit_code("s3-init") == 0 and stack.exit_code("s3a-jars") == 0
    assert stack.exit_code("mosquitto-init") == 0


def test_the_ops_views_read_the_bucket(stack: ComposeStack, first_alert) -> None:
    sensor = first_alert["sensor_id"]
    health = stack.http_json("DASHBOARD_PORT", "/healthz")
    incidents = wait_until(
        lambda: [
            row for row in stack.http_json("DASHBOARD_PORT", "/api/incidents")["incidents"]
            if row["rule"] == "overheat_reading"
        ],
        STUCK, "the overheat incident on the dashboard", every=2,
    )  # fmt: skip
    cli = stack.run("exec", "-T", "dashboard", "scripts/alerts", "--alerts", "--since", "24h")
    notified = wait_until(
        lambda: stack.http_json(
            "ALERTMANAGER_PORT", "/api/v2/alerts",
            {"active": "true", "filter": 'alertname="overheat_reading"'},
        ),
        STUCK, "the overheat incident active in Alertmanager", every=2,
    )  # fmt: skip

    assert health["lake"] == LAKE and health["lake_exists"] is True
    assert incidents
    assert sensor in cli.stdout and "overheat_reading" in cli.stdout
    assert notified and notified[0]["labels"]["severity"] == "critical"


def mqtt_password(stack: ComposeStack, user: str) -> str:
    """A login's password, from the mqtt-credentials volume (as the bridge reads it)."""
    return stack.run("exec", "-T", "bridge", "cat", f"{CREDENTIALS_DIR}/{user}").stdout.strip()


def test_no_secret_in_the_compose_config_or_the_logs(stack: ComposeStack, first_alert) -> None:
    secret = stack.run("exec", "-T", "job", "python", "-c",
                       "from local_stack.compose_s3 import environment; "
                       "print(environment()['AWS_SECRET_ACCESS_KEY'])").stdout.strip()  # fmt: skip
    bridge_password = mqtt_password(stack, BRIDGE_USER)
    config = stack.run("config").stdout
    logs = stack.run("logs", "--no-color", check=False).stdout
    inspect = stack.run("exec", "-T", "s3", "cat", "/proc/1/cmdline").stdout
    command_lines = "\n".join(
        stack.run("exec", "-T", name, "cat", "/proc/1/cmdline").stdout
        for name in ("mosquitto", "bridge", "producer")
    )

    assert len(secret) >= 24 and len(bridge_password) >= 24
    for hidden in (secret, bridge_password):
        assert hidden not in config
        assert hidden not in logs
    assert secret not in inspect, "S3Proxy's command line shows in `ps`"
    assert bridge_password not in command_lines


# --- the mqtt profile ------------------------------------------------------------------


def kafka_records(stack: ComposeStack, at_least: int = 200) -> list:
    """At least ``at_least`` records of the readings topic from its start (or all it has
    once the deadline passes), read through the stack's published Kafka port."""
    consumer = Consumer({
        "bootstrap.servers": f"127.0.0.1:{stack.ports['KAFKA_HOST_PORT']}",
        "group.id": "sensorwatch-mqtt-profile-test", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    records: list = []
    try:
        consumer.subscribe(["sensor-readings"])

        def enough() -> bool:
            for record in consumer.consume(500, timeout=1.0):
                if record.error() is None:
                    records.append(record)
            return len(records) >= at_least

        wait_until(enough, STUCK, f"{at_least} records on sensor-readings", every=0.1)
    finally:
        consumer.close()
    return records


def fleet_sites(stack: ComposeStack) -> dict[str, str]:
    """The fleet's registry, as the producer wrote it: each sensor's site."""
    text = stack.run("exec", "-T", "producer", "cat", "/data/fleet/fleet.jsonl").stdout
    return {row["sensor_id"]: row["site"] for row in map(json.loads, text.splitlines())}


def test_the_fleet_reaches_kafka_through_the_bridge_only(stack: ComposeStack, first_alert) -> None:
    """With the mqtt profile every record on the topic came through the bridge: each one
    carries the MQTT topic it was published to (its sensor's, under its site's device)
    and when it arrived; none was written to Kafka by the producer itself."""
    records = kafka_records(stack)
    fleet = fleet_sites(stack)
    devices = set(stack.run("exec", "-T", "bridge", "ls", str(CREDENTIALS_DIR)).stdout.split())
    producer_log = stack.logs("producer", tail=1000)
    layout = TopicLayout()

    assert "the fleet publishes to mosquitto:1883" in producer_log
    assert "mqtt://mosquitto:1883" in producer_log
    for record in records:
        headers = dict(record.headers() or [])
        assert {HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT} <= set(headers), headers
        sensor = record.key().decode("utf-8")
        _, device, level, _ = headers[HEADER_MQTT_TOPIC].decode("utf-8").split("/")
        assert level == sensor
        assert device in devices - {BRIDGE_USER}
        assert headers[HEADER_MQTT_TOPIC].decode("utf-8") == layout.topic(device, sensor)
        assert device == device_name(fleet[sensor])
    assert devices - {BRIDGE_USER} == {device_name(site) for site in fleet.values()}


def test_prometheus_scrapes_the_bridge(stack: ComposeStack, first_alert) -> None:
    def targets() -> dict[str, str] | None:
        active = stack.http_json("PROMETHEUS_PORT", "/api/v1/targets")["data"]["activeTargets"]
        health = {t["labels"]["job"]: t["health"] for t in active}
        return health if health.get("sensorwatch-bridge") == "up" else None

    health = wait_until(targets, STUCK, "Prometheus scraping the bridge", every=2)
    groups = stack.http_json("PROMETHEUS_PORT", "/api/v1/rules")["data"]["groups"]
    rules = {rule["name"] for group in groups for rule in group["rules"]}

    assert health["sensorwatch-producer"] == "up"
    assert {"SensorWatchBridgeDown", "SensorWatchBridgeNotForwarding"} <= rules


def test_a_device_of_your_own_logs_in_on_the_published_port_and_publishes_its_own_only(
    stack: ComposeStack, first_alert, tmp_path: Path
) -> None:
    """The broker's ACL holds in the stack: a site's login publishes its own sensors'
    readings on the published MQTT port, and is refused another site's topic."""
    sites = fleet_sites(stack)
    devices = sorted({device_name(site) for site in sites.values()})
    assert len(devices) >= 2, devices
    mine, other = devices[:2]
    sensor = next(s for s, site in sorted(sites.items()) if device_name(site) == mine)
    password = tmp_path / mine
    password.write_text(mqtt_password(stack, mine), encoding="utf-8")
    layout = TopicLayout()
    device = Device.connect(stack.ports["MQTT_PORT"], Credential(mine, password))
    try:
        codes = device.publish([
            (layout.topic(mine, sensor), reading(sensor, seq=1_000_000)),
            (layout.topic(other, sensor), reading(sensor, seq=1_000_001)),
        ])  # fmt: skip
    finally:
        device.close()

    assert not codes[0].is_failure
    assert refused(codes[1:]) == ["Not authorized"]


def test_a_device_of_your_own_publishes_over_tls_trusting_the_stacks_ca(
    stack: ComposeStack, first_alert, tmp_path: Path
) -> None:
    """The TLS listener on its published port, as docs/docker.md says to use it: the CA
    copied out of the broker's container, a site's login, a reading of its own sensor
    accepted; a client that does not trust that CA is not connected."""
    sites = fleet_sites(stack)
    mine = device_name(sorted(sites.values())[0])
    sensor = next(s for s, site in sorted(sites.items()) if device_name(site) == mine)
    password = tmp_path / mine
    password.write_text(mqtt_password(stack, mine), encoding="utf-8")
    ca = tmp_path / "ca.pem"
    stack.run("cp", f"mosquitto:{BROKER_DIR}/tls/ca.pem", str(ca))
    credential = Credential(mine, password)
    device = Device.connect(stack.ports["MQTT_TLS_PORT"], credential, ca=ca)
    topic = TopicLayout().topic(mine, sensor)
    try:
        codes = device.publish([(topic, reading(sensor, seq=2_000_000))])
    finally:
        device.close()
    (tmp_path / "other").mkdir()
    untrusted = make_authority(tmp_path / "other", "another CA").certificate

    assert "BEGIN CERTIFICATE" in ca.read_text(encoding="utf-8")
    assert not codes[0].is_failure
    with pytest.raises(ssl.SSLError):
        Device.connect(stack.ports["MQTT_TLS_PORT"], credential, ca=untrusted, timeout=10)
