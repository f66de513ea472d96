"""Kafka topic administration: create a topic and wait until it is usable, or check that
one exists (its partitions). Every program that needs a topic asks here."""

from __future__ import annotations

import re
import socket
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from common.waiting import poll_until


class TopicError(RuntimeError):
    """A topic is missing, or could not be created or made ready; the message says which."""


def _any_reachable(bootstrap: str, timeout: float = 3.0) -> bool:
    """True if a TCP connection opens to at least one of the bootstrap servers."""
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


# What a broker that answers but refuses this client says: wrong credentials, or a
# certificate the client does not trust (or the broker does not accept).
_REFUSALS = (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED)


def check_topic(client: str | dict[str, str], topic: str, timeout: float = 15.0) -> int:
    """The partition count of ``topic``; a clear TopicError if unreachable, refused (bad
    credentials or certificates: within a second or two, not at the timeout) or missing.

    ``client`` is the bootstrap servers, or a whole librdkafka configuration
    (conf.kafka_client.librdkafka_config) for a broker that asks for TLS or SASL.
    """
    config = {"bootstrap.servers": client} if isinstance(client, str) else dict(client)
    bootstrap = config["bootstrap.servers"]
    if not _any_reachable(bootstrap):
        raise TopicError(
            f"cannot reach Kafka at {bootstrap}: no server accepts connections; "
            "is the broker running? (scripts/kafka-local start)"
        )
    refused: list[KafkaError] = []

    def on_error(error: KafkaError) -> None:
        # A TLS-level alert (a client certificate the broker wants and did not get, or
        # does not accept) arrives as a transport error whose text names SSL.
        if (
            error.code() in _REFUSALS
            or "SSL handshake failed" in error.str()
            or ("SSL routines" in error.str())
        ):
            refused.append(error)

    # log_level 0: the refusal is reported once, below, not as librdkafka's log lines.
    admin = AdminClient({**config, "log_level": 0, "error_cb": on_error})
    deadline = time.monotonic() + timeout
    while True:
        try:
            metadata = admin.list_topics(topic=topic, timeout=1.0)
            break
        except KafkaException as exc:
            admin.poll(0.1)  # serves error_cb
            if refused:
                # "sasl_ssl://host:port/bootstrap: SASL authentication error: ..." -> the error
                reason = re.sub(r"^\S+://\S+: ", "", refused[0].str().split(" (after ")[0])
                raise TopicError(
                    f"Kafka at {bootstrap} refused this client: {reason}; check the "
                    "kafka_* settings (--help lists them)"
                ) from None
            if time.monotonic() > deadline:
                raise TopicError(
                    f"cannot reach Kafka at {bootstrap} within {timeout:.0f}s "
                    f"({exc.args[0].str()}); is the broker running? (scripts/kafka-local start)"
                ) from None
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        if info is not None and info.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise TopicError(f"topic {topic!r} on {bootstrap}: {info.error.str()}")
        raise TopicError(
            f"topic {topic!r} does not exist on {bootstrap}; create it first, e.g. "
            f"python -m producer.topics create --bootstrap-servers {bootstrap} --topic {topic}"
        )
    return len(info.partitions)


def partitions_with_leaders(admin: AdminClient, topic: str) -> int | None:
    """How many partitions of ``topic`` have a leader now; None if the broker does not know it."""
    metadata = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
    if metadata is None or metadata.error is not None:
        return None
    return sum(1 for p in metadata.partitions.values() if p.leader >= 0 and p.error is None)


def wait_for_topic(admin: AdminClient, topic: str, partitions: int, timeout: float = 60.0) -> None:
    """Block until every one of ``partitions`` partitions of ``topic`` has a leader.

    Creation completes at the controller before brokers have the new partitions in their
    metadata; a producer or consumer that starts in between sees no partitions.
    """
    led = poll_until(
        lambda: partitions_with_leaders(admin, topic), timeout, 0.1, lambda n: n == partitions
    )
    if led != partitions:
        raise TopicError(
            f"topic {topic!r}: {led or 0} of {partitions} partitions "
            f"have a leader after {timeout:.0f}s"
        )


def create_topic(
    client: str | dict[str, str],
    topic: str,
    partitions: int = 6,
    replication: int = 1,
    timeout: float = 60.0,
) -> bool:
    """Create ``topic`` unless it exists, and return once it is usable. ``client`` is the
    bootstrap servers or a whole librdkafka configuration, as for :func:`check_topic`.

    Returns True if this call created it, False if it already existed.
    """
    config = {"bootstrap.servers": client} if isinstance(client, str) else dict(client)
    bootstrap = config["bootstrap.servers"]
    admin = AdminClient(config)
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=replication)],
        operation_timeout=timeout,
    )[topic]
    try:
        future.result(timeout=timeout)
        created = True
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise TopicError(f"creating topic {topic!r} on {bootstrap} failed: {exc}") from None
        created = False
    if created:
        wait_for_topic(admin, topic, partitions, timeout)
    return created
