"""The real Kafka broker a test session runs against, chosen as
docs/architecture.md#tests says:

1. ``KAFKA_BOOTSTRAP_SERVERS`` when set (a broker somebody already runs);
2. Testcontainers with the official ``apache/kafka`` image when a Docker engine answers;
3. else the local broker of ``scripts/kafka-local`` on a free port in a temporary folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from common.errors import first_line
from conf.versions import kafka_image
from local_stack import kafka as local_kafka
from local_stack.server import free_port


@dataclass(frozen=True)
class Broker:
    """A reachable broker and where it came from (shown in pytest's header)."""

    bootstrap: str
    source: str


@cache
def docker_unavailable_reason() -> str | None:
    """None when a Docker engine answers a ping, else why not (for skip messages)."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception as exc:  # any failure to reach an engine means "no engine"
        return f"no Docker engine answers ({first_line(exc)[:160]})"
    return None


def apache_kafka_container(image: str | None = None):  # -> DockerContainer
    """A single-node KRaft broker from the official image, reachable from this host.

    The image's entrypoint turns ``KAFKA_*`` variables into server.properties. The host
    port is fixed before start because the broker must advertise it to clients.
    """
    from testcontainers.core.container import DockerContainer

    host_port = free_port()
    container = DockerContainer(image or kafka_image()).with_bind_ports(9092, host_port)
    host = container.get_docker_client().host()
    env = {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{host_port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "3",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_BROKER_SESSION_TIMEOUT_MS": str(local_kafka.BROKER_SESSION_TIMEOUT_MS),
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_LOG_RETENTION_MS": "-1",
    }
    # The JVM options the tests give every broker (tests/conftest.py), as a local broker
    # takes them: Kafka's scripts in the image read the same variable.
    if os.environ.get("KAFKA_OPTS"):
        env["KAFKA_OPTS"] = os.environ["KAFKA_OPTS"]
    for key, value in env.items():
        container.with_env(key, value)
    container.bootstrap = f"{host}:{host_port}"  # type: ignore[attr-defined]
    return container


@contextmanager
def session_broker(scratch: Path) -> Iterator[Broker]:
    """Yield the broker for this test session; stop it afterwards if it was started here."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        local_kafka.wait_until_ready(external, timeout=60)
        yield Broker(external, "KAFKA_BOOTSTRAP_SERVERS")
        return
    if docker_unavailable_reason() is None:
        container = apache_kafka_container()
        with container:
            local_kafka.wait_until_ready(container.bootstrap, timeout=120)
            yield Broker(container.bootstrap, f"Testcontainers {kafka_image()}")
        return
    data_dir = scratch / "kafka"
    info = local_kafka.start(data_dir, free_port())
    try:
        yield Broker(info.bootstrap, f"scripts/kafka-local ({data_dir})")
    finally:
        local_kafka.stop(data_dir)
