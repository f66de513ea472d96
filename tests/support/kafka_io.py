"""Plain confluent-kafka produce and consume helpers for tests, with deadlines."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.support.brokers import Broker
from topics.admin import create_topic


@dataclass(frozen=True)
class Record:
    """One message as a consumer saw it."""

    key: bytes | None
    value: bytes | None
    partition: int
    offset: int


def produce(
    bootstrap: str,
    topic: str,
    messages: Iterable[tuple[str, str]],
    timestamp_ms: int | None = None,
) -> list[Record]:
    """Send (key, value) pairs with acks=all and idempotence; return what was delivered.
    ``timestamp_ms``: their Kafka time (the producer's clock when None).

    Raises:
        AssertionError: if any message was not delivered.
    """
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    )
    delivered: list[Record] = []
    failed: list[str] = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(str(err))
        else:
            delivered.append(Record(msg.key(), msg.value(), msg.partition(), msg.offset()))

    for key, value in messages:
        while True:
            try:
                producer.produce(
                    topic, key=key, value=value, on_delivery=on_delivery,
                    **({} if timestamp_ms is None else {"timestamp": timestamp_ms}),
                )  # fmt: skip
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} messages still queued after 60 s"
    assert not failed, f"{len(failed)} deliveries failed, first: {failed[0]}"
    return delivered


def fresh_consumer(bootstrap: str) -> Consumer:
    """A consumer in a group of its own that starts at the earliest offsets and commits
    nothing: what a test reads never depends on an earlier read."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def consume_messages(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list:
    """Read ``topic`` from the start in a fresh consumer group until ``expected`` messages.

    Returns the confluent-kafka Message objects read when the count is reached or the
    deadline passes (the caller asserts on the count).
    """
    consumer = fresh_consumer(bootstrap)
    consumer.subscribe([topic])
    messages = []
    # A rebalance of the fresh group (slow joins on a loaded machine) can deliver a
    # partition again from the start: each position counts once.
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consume error: {msg.error()}")
                if (msg.partition(), msg.offset()) not in seen:
                    seen.add((msg.partition(), msg.offset()))
                    messages.append(msg)
    finally:
        consumer.close()
    return messages


def consume_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list:
    """Everything ``topic`` holds now: each partition read from its start up to its end
    offset as the call begins, so it returns as soon as that is read, and an extra
    message would be among them (no count to wait for, no quiet period to sit out).

    Raises:
        AssertionError: the topic was not read to its end within ``timeout`` seconds.
    """
    consumer = fresh_consumer(bootstrap)
    try:
        partitions = consumer.list_topics(topic, timeout=timeout).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout)[1]
                for p in partitions}  # fmt: skip
        left = {p: end for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in left])
        messages = []
        deadline = time.monotonic() + timeout
        while left:
            assert time.monotonic() < deadline, f"{topic}: not read to its end {ends} in time"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    raise AssertionError(f"consume error: {msg.error()}")
                if msg.offset() < ends[msg.partition()]:
                    messages.append(msg)
            # Done with a partition once its position reached the end (a position, not
            # the last offset: an offset may hold no message, as a transaction's marker).
            for tp in consumer.position([TopicPartition(topic, p) for p in left]):
                if tp.offset >= left[tp.partition]:
                    del left[tp.partition]
        return messages
    finally:
        consumer.close()


def consume(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[Record]:
    """Like :func:`consume_messages`, as plain :class:`Record` values."""
    return [
        Record(m.key(), m.value(), m.partition(), m.offset())
        for m in consume_messages(bootstrap, topic, expected, timeout)
    ]


def make_topic(kafka: Broker, prefix: str = "test", partitions: int = 6) -> str:
    """Create a fresh, uniquely named topic, ready to use, and return its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    assert create_topic(kafka.bootstrap, name, partitions)
    return name
