"""The bridge's Kafka side: one idempotent producer (confluent-kafka, configured from
the settings like every Kafka client of the project, conf/kafka_client.py) that never
gives a record up: while Kafka is away librdkafka keeps it and tries again, and the
bridge, whose acknowledgements wait for the confirmation, holds the MQTT side back.

Delivery reports and client errors are served by :meth:`KafkaOut.poll` and
:meth:`KafkaOut.flush`, in the thread that calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from confluent_kafka import KafkaError, Message, Producer

from bridge.records import Record
from conf.kafka_client import librdkafka_config
from conf.settings.kafka_connection import KafkaSettings

# acks=all and idempotence: a confirmed record is on every in-sync replica, and retries
# add no duplicates. message.timeout.ms 0: no record times out while Kafka is away (it
# stays unacknowledged on MQTT meanwhile); only a refusal fails a delivery. A short
# linger: the bridge's added latency is the batch's wait plus Kafka's round trip.
BRIDGE_PRODUCER_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "message.timeout.ms": 0,
    "linger.ms": 5,
    "compression.type": "zstd",
    "queue.buffering.max.messages": 200_000,
    # The bridge says an outage once, through error_cb, instead of librdkafka's log line
    # per connection attempt.
    "log_level": 0,
}

# What error_cb reports about connections: a broker not reached (_TRANSPORT, _RESOLVE),
# and none of the cluster's reachable (_ALL_BROKERS_DOWN).
CONNECTION_ERRORS = frozenset(
    {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE}
)


class KafkaOut:
    """Produces records to the readings topic; reports each delivery to ``delivered``
    (``delivered(seq, error)``, error None when Kafka confirmed it) and client errors to
    ``client_error``."""

    def __init__(
        self,
        settings: KafkaSettings,
        delivered: Callable[[int, KafkaError | None], None],
        client_error: Callable[[KafkaError], None],
    ) -> None:
        self.topic = settings.topic
        self._delivered = delivered
        self.producer = Producer(
            {
                **librdkafka_config(settings),
                **BRIDGE_PRODUCER_CONFIG,
                "error_cb": client_error,
            }
        )

    def _report(self, seq: int, error: KafkaError | None, _message: Message) -> None:
        self._delivered(seq, error)

    def send(self, seq: int, record: Record) -> None:
        """Hand ``record`` to the producer (its delivery reported later under ``seq``).

        Raises:
            BufferError: the producer's local queue is full; try again after a poll.
        """
        self.producer.produce(
            self.topic,
            value=record.value,
            key=record.key,
            headers=list(record.headers),
            on_delivery=partial(self._report, seq),
        )

    def poll(self, timeout: float) -> None:
        """Serve delivery reports and errors, waiting up to ``timeout`` seconds for one."""
        self.producer.poll(timeout)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every record to be confirmed or refused;
        returns how many are still waiting."""
        return self.producer.flush(timeout)

    def __len__(self) -> int:
        """Records handed over and not yet reported."""
        return len(self.producer)
