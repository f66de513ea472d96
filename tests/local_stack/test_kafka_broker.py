"""The session broker is a real Kafka: Admin API, keyed produce, consumer groups; and the
compose file's health probe of its broker tells a Kafka broker from anything else."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections import defaultdict

from confluent_kafka.admin import ConfigResource, ResourceType

from local_stack.kafka import BROKER_SESSION_TIMEOUT_MS
from tests.support.compose_file import load_compose
from tests.support.kafka_io import consume, produce
from topics.admin import create_topic


def test_topic_is_created_with_six_partitions(kafka, kafka_admin, new_topic) -> None:
    topic = new_topic("six", partitions=6)

    metadata = kafka_admin.list_topics(topic=topic, timeout=30)

    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2, 3, 4, 5]
    assert all(p.leader >= 0 for p in metadata.topics[topic].partitions.values())
    # Creating it again is not an error: it reports that it already existed.
    assert create_topic(kafka.bootstrap, topic, partitions=6) is False


def test_the_broker_is_not_fenced_by_a_long_pause(kafka, kafka_admin) -> None:
    """Its session with its own controller outlasts a loaded machine's pauses, whichever
    way it was started (Testcontainers or scripts/kafka-local)."""
    broker = ConfigResource(ResourceType.BROKER, "1")

    configs = kafka_admin.describe_configs([broker])[broker].result(timeout=30)

    assert configs["broker.session.timeout.ms"].value == str(BROKER_SESSION_TIMEOUT_MS)


def test_thousands_of_keyed_messages_round_trip(kafka, new_topic) -> None:
    topic = new_topic("roundtrip", partitions=6)
    messages = [(f"sensor-{i % 50:04d}", f'{{"n": {i}}}') for i in range(5000)]

    delivered = produce(kafka.bootstrap, topic, messages)
    read = consume(kafka.bootstrap, topic, expected=len(messages))

    assert len(delivered) == 5000
    assert sorted(r.value for r in read) == sorted(v.encode() for _, v in messages)
    # Offsets per partition are dense from 0: nothing lost, nothing doubled.
    offsets = defaultdict(list)
    for r in read:
        offsets[r.partition].append(r.offset)
    assert len(offsets) == 6, "50 keys should spread over all 6 partitions"
    for partition_offsets in offsets.values():
        assert sorted(partition_offsets) == list(range(len(partition_offsets)))
    # The key decides the partition: each sensor's readings stay in order in one partition.
    partitions_per_key = defaultdict(set)
    for r in read:
        partitions_per_key[r.key].add(r.partition)
    assert all(len(p) == 1 for p in partitions_per_key.values())
    assert {(r.partition, r.offset) for r in read} == {(d.partition, d.offset) for d in delivered}


def kafka_probe(host: str, port: int) -> subprocess.CompletedProcess:
    """docker-compose.yml's health probe of the kafka service, aimed at host:port."""
    test = load_compose()[0]["services"]["kafka"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "bash", "-c"], test
    script = test[3]
    assert "/dev/tcp/127.0.0.1/9092" in script, script
    # No JVM: the probe runs every 10 s for as long as the stack does.
    assert "java" not in script and ".sh" not in script, script
    script = script.replace("/dev/tcp/127.0.0.1/9092", f"/dev/tcp/{host}/{port}")
    return subprocess.run(["bash", "-c", script], capture_output=True, timeout=30)


def test_the_compose_probe_is_healthy_when_a_broker_answers_and_not_otherwise(kafka) -> None:
    host, _, port = kafka.bootstrap.rpartition(":")
    assert kafka_probe(host, int(port)).returncode == 0

    # A port that accepts connections and answers nothing a broker would.
    with socket.create_server(("127.0.0.1", 0)) as server:

        def answer_wrongly() -> None:
            for _ in range(2):
                conn, _ = server.accept()
                with conn:
                    conn.recv(64)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer_wrongly, daemon=True).start()
        not_kafka = server.getsockname()[1]
        assert kafka_probe("127.0.0.1", not_kafka).returncode != 0
        assert kafka_probe("127.0.0.1", not_kafka).returncode != 0
    # And a port nothing listens on any more.
    assert kafka_probe("127.0.0.1", not_kafka).returncode != 0
