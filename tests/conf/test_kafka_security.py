"""The producer, the job and the bridge against a broker that asks for TLS and SASL
(docs/architecture.md#connections-and-security): scripts/kafka-local with its SASL_SSL
listener (a CA and certificate made for the test's data directory, SCRAM and PLAIN users),
set up only through the SENSORWATCH_KAFKA_* settings that ``scripts/kafka-local
client-env`` prints (the password as a file)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT
from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from contract.devices import TopicLayout
from jobs.stream import run as run_job
from local_stack import kafka as local_kafka
from local_stack import mosquitto as local_mosquitto
from local_stack.mosquitto import MosquittoInfo
from local_stack.server import free_port
from local_stack.tls import make_authority
from tests.support.kafka_io import consume_all
from tests.support.mqtt_io import STARTED, Device, reading, refused, stop_bridge
from tests.support.polling import wait_until
from tests.support.processes import Running, without_settings
from tests.support.producer_run import read_jsonl
from topics.admin import create_topic

pytestmark = [pytest.mark.slow, pytest.mark.jvm]  # its own broker, with TLS and SASL

TOPIC = "secure-readings"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_kafka.BrokerInfo]:
    data_dir = tmp_path_factory.mktemp("secure-broker")
    info = local_kafka.start(
        data_dir, free_port(),
        sasl_ssl_port=free_port(), ssl_port=free_port(),
    )  # fmt: skip
    try:
        create_topic(info.bootstrap, TOPIC)  # administration over the plaintext port
        yield info
    finally:
        local_kafka.stop(data_dir)


def env_for(broker: local_kafka.BrokerInfo, **changes: str) -> dict[str, str]:
    """This process's environment without SENSORWATCH_* settings (the run's own aside),
    plus the broker's SASL_SSL client settings (and ``changes``)."""
    base = without_settings(os.environ)
    return {**base, **local_kafka.sasl_ssl_client(broker), "SENSORWATCH_TOPIC": TOPIC, **changes}


def run(module: str, *args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip


def landed_offsets(lake: Path) -> Counter:
    """(partition, offset) -> how often it is in readings and quarantine."""
    return Counter(
        (row["kafka_partition"], row["kafka_offset"])
        for table in ("readings", "quarantine")
        for row in DeltaTable(str(lake / table))
        .to_pyarrow_table(columns=["kafka_partition", "kafka_offset"])
        .to_pylist()
    )


def test_producer_to_job_to_tables_exactly_once_over_sasl_ssl(broker, tmp_path: Path) -> None:
    env = env_for(broker)
    password = Path(env["SENSORWATCH_KAFKA_SASL_PASSWORD_FILE"]).read_text().strip()
    sent = run(
        "producer", "--count", "3000", "--sensors", "20", "--seed", "26",
        "--start-time", "2026-02-01T00:00:00Z", "--manifest", tmp_path / "manifest.jsonl",
        "--registry-out", tmp_path / "fleet.jsonl", env=env,
    )  # fmt: skip
    lake = tmp_path / "lake"
    job = run(
        "jobs.stream", "--lake", lake, "--registry", tmp_path / "fleet.jsonl",
        "--trigger", "availableNow", env=env,
    )  # fmt: skip

    assert sent.returncode == 0, sent.stderr
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-3000:]
    assert "(SASL_SSL, SCRAM-SHA-512 as sensorwatch)" in job.stdout
    for output in (sent.stdout, sent.stderr, job.stdout, job.stderr):
        assert password not in output
    manifest = read_jsonl(tmp_path / "manifest.jsonl")
    landed = landed_offsets(lake)
    assert len(manifest) == 3000
    assert set(landed.values()) == {1}, "an offset landed twice"
    assert set(landed) == {(m["partition"], m["offset"]) for m in manifest}


def test_the_topic_tool_connects_the_same_way(broker) -> None:
    made = run("producer.topics", "create", "--topic", "made-over-sasl-ssl", env=env_for(broker))

    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == (
        f"topics: made-over-sasl-ssl created on {broker.listener('sasl_ssl')}"
    )


def test_mutual_tls_producer_to_job_to_tables_exactly_once(spark, broker, tmp_path: Path) -> None:
    client = {**local_kafka.mtls_client(broker), "SENSORWATCH_TOPIC": TOPIC}
    env = {**without_settings(os.environ), **client}
    before = end_offsets(broker)
    sent = run(
        "producer", "--count", "500", "--sensors", "5", "--seed", "27",
        "--start-time", "2026-02-02T00:00:00Z", "--manifest", tmp_path / "manifest.jsonl",
        env=env,
    )  # fmt: skip
    lake = tmp_path / "lake"
    # The job in the session's Spark, set up by the same variables: the job as a program
    # over TLS is the SASL_SSL test's (a cold JVM fewer).
    with pytest.MonkeyPatch.context() as patch:
        for name, value in client.items():
            patch.setenv(name, value)
        settings = load_settings(JobSettings, {"lake": lake, "trigger": "availableNow"})
    assert settings.kafka_security_protocol == "SSL"
    run_job(settings, spark)
    without_certificate = run(
        "producer", "--count", "5", "--start-time", "2026-02-02T00:00:00Z",
        env={k: v for k, v in env.items() if "CERTIFICATE" not in k and "_KEY_" not in k},
    )  # fmt: skip

    assert sent.returncode == 0, sent.stderr
    assert "(SSL, client certificate)" in sent.stderr
    manifest = read_jsonl(tmp_path / "manifest.jsonl")
    landed = landed_offsets(lake)
    # The job reads the whole topic: what earlier tests sent, and these 500 once each.
    assert sum(landed.values()) == len(landed) == end_offsets(broker) == before + 500
    assert {(m["partition"], m["offset"]) for m in manifest} <= set(landed)
    # A client without a certificate is refused at the handshake, in one line.
    assert without_certificate.returncode == 2
    lines = without_certificate.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused this client" in lines[0], lines


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_every_offered_mechanism_authenticates(broker, mechanism: str) -> None:
    sent = run(
        "producer", "--count", "20", "--start-time", "2026-02-01T00:00:00Z",
        env=env_for(broker, SENSORWATCH_KAFKA_SASL_MECHANISM=mechanism),
    )  # fmt: skip

    assert sent.returncode == 0, sent.stderr
    assert f"(SASL_SSL, {mechanism} as sensorwatch)" in sent.stderr


def end_offsets(broker: local_kafka.BrokerInfo) -> int:
    """Messages in the topic: its end offsets summed (over the plaintext port)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets"})
    try:
        partitions = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        return sum(
            consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        consumer.close()


@pytest.mark.parametrize("fault", ["a wrong password", "an untrusted certificate"])
def test_refused_credentials_end_each_program_with_one_line(
    broker, mosquitto: MosquittoInfo, tmp_path: Path, fault: str
) -> None:
    if fault == "a wrong password":
        wrong = tmp_path / "password"
        wrong.write_text("not-the-password\n")
        env = env_for(broker, SENSORWATCH_KAFKA_SASL_PASSWORD_FILE=str(wrong))
        said = "SASL authentication error"
    else:
        other = make_authority(tmp_path / "other-ca", "Somebody else's CA")
        env = env_for(broker, SENSORWATCH_KAFKA_SSL_CA_LOCATION=str(other.certificate))
        said = "certificate verify failed"
    before = end_offsets(broker)
    lake = tmp_path / "lake"

    bridge = {**env, **local_mosquitto.client_env(mosquitto), "SENSORWATCH_METRICS_PORT": "0"}
    for module, args, module_env in (
        ("producer", ["--count", "50", "--start-time", "2026-02-01T00:00:00Z"], env),
        ("jobs.stream", ["--lake", lake, "--trigger", "availableNow"], env),
        ("bridge", [], bridge),
    ):
        done = run(module, *args, env=module_env)

        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, f"{module}: {done.stdout}\n{done.stderr}"
        assert len(lines) == 1 and said in lines[0], f"{module}: {done.stderr}"
        assert lines[0].startswith(f"{module}: Kafka at {broker.listener('sasl_ssl')} refused")
    assert end_offsets(broker) == before, "a refused producer wrote something"
    assert not lake.exists(), "a refused job made its lake"


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_the_bridge_forwards_over_each_secured_listener(
    broker, mosquitto: MosquittoInfo, listener: str
) -> None:
    topic = f"bridged-over-{listener.lower().replace('_', '-')}"
    create_topic(broker.bootstrap, topic)
    site = f"secure-site-{listener.lower().replace('_', '-')}"
    device = local_mosquitto.add_devices(mosquitto.data_dir, [site])[0]
    kafka = (
        local_kafka.sasl_ssl_client(broker) if listener == "SASL_SSL"
        else local_kafka.mtls_client(broker)
    )  # fmt: skip
    bridge = Running(
        [sys.executable, "-m", "bridge"],
        env={
            **without_settings(os.environ), **local_mosquitto.client_env(mosquitto), **kafka,
            "SENSORWATCH_TOPIC": topic, "SENSORWATCH_METRICS_PORT": "0",
            "SENSORWATCH_MQTT_CLIENT_ID": f"bridge-{listener.lower()}-{uuid.uuid4().hex[:8]}",
        },
    )  # fmt: skip
    try:
        bridge.wait_for_line(lambda line: "bridge: connected to" in line, STARTED, "connected")
        sent = [
            (TopicLayout().topic(site, f"{site}-{n % 5}"), reading(f"{site}-{n % 5}", n))
            for n in range(200)
        ]
        publisher = Device.connect(mosquitto.port, device)
        try:
            assert refused(publisher.publish(sent)) == []
        finally:
            publisher.close()
        wanted = {payload for _, payload in sent}
        landed: list = []

        def all_landed() -> bool:
            landed[:] = consume_all(broker.bootstrap, topic)  # over the plaintext port
            return wanted <= {m.value() for m in landed}

        wait_until(all_landed, 120, f"{len(wanted)} readings in {topic}", every=0.5)
        summary = stop_bridge(bridge)
    finally:
        bridge.kill()
    said = "(SASL_SSL, SCRAM-SHA-512 as sensorwatch)" if listener == "SASL_SSL" else "(SSL, "
    assert any(said in line for line in bridge.lines), bridge.lines
    assert Counter(m.value() for m in landed) == Counter(wanted)
    assert summary.startswith("bridge: stopped: 200 received, 200 forwarded"), summary
    if listener == "SASL_SSL":
        password = Path(kafka["SENSORWATCH_KAFKA_SASL_PASSWORD_FILE"]).read_text().strip()
        assert password not in "\n".join(bridge.lines)
