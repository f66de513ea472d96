"""Following the real-time path's Kafka topic (``alerts_topic``) from its end: the one
consumer loop of the notifier's fast lane (ops/notifier/alert_stream.py) and the dashboard's live
alerts (ops/dashboard/live.py).

Each reader starts at the topic's end, every time: what was sent while it was not reading
is not its business (the notifier's incidents sync catches up; the dashboard's page reads
the lake). A broker that does not answer is said once, and again once when it answers; so
is a topic that is missing (deleted, or not made yet: the job makes it at its start),
which a subscribed consumer is never told of otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException

from common.stop_signal import Stop
from conf.kafka_client import librdkafka_config
from conf.settings.kafka_connection import RealtimeAlertsSettings

QUIET_ERRORS = (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART)
# How often the topic's presence is checked, and how long one check may take.
TOPIC_CHECK_EVERY = 5.0
TOPIC_CHECK_TIMEOUT = 2.0


@dataclass(frozen=True)
class TopicReader:
    """Who reads the topic and what it does with each message's value."""

    settings: RealtimeAlertsSettings
    prefix: str  # of each line said: "notify", "ops.dashboard"
    # A group of the process's own: no other reader shares its partitions.
    group_id: str
    log: Callable[[str], None]
    warn: Callable[[str], None]
    # What the reader loses while Kafka does not answer, for the warning: "real-time
    # alerts wait for it (the incidents still go out)".
    meanwhile: str
    # Told True while the topic is there and Kafka answers, False while not: a gauge.
    health: Callable[[bool], None] | None = None
    check_every: float = TOPIC_CHECK_EVERY

    def follow(self, handle: Callable[[bytes], object], stop: Stop) -> None:
        """Call ``handle`` with each new message's value until ``stop`` is set."""
        settings = self.settings
        where = f"{self.prefix}: Kafka at {settings.bootstrap_servers}"
        problems: list[str] = []
        consumer = Consumer(
            {
                **librdkafka_config(settings),
                "group.id": self.group_id,
                # The group is new, so it has no offsets: "latest" is the topic's end.
                "auto.offset.reset": "latest",
                "enable.auto.commit": False,  # each reader starts at the end, every time
                "log_level": 0,  # connection trouble is said once, below
                # A topic the job has not made yet is looked for again this often.
                "topic.metadata.refresh.interval.ms": 5000,
                "error_cb": lambda error: problems.append(error.str()),
            }
        )
        consumer.subscribe([settings.alerts_topic])
        said, missing, healthy = False, False, None
        next_check = 0.0

        def recovered() -> None:
            nonlocal said
            if said:
                self.log(f"{where} answers again")
            said = False
            problems.clear()

        try:
            while not stop.is_set():
                if time.monotonic() >= next_check:
                    present = self._present(consumer)
                    next_check = time.monotonic() + self.check_every
                    if present is False and not missing:
                        self.warn(
                            f"{self.prefix}: the topic {settings.alerts_topic} does not exist "
                            f"at {settings.bootstrap_servers} (deleted, or the job has not "
                            f"made it yet); {self.meanwhile}"
                        )
                        missing = True
                    elif present and missing:
                        self.log(f"{self.prefix}: the topic {settings.alerts_topic} is there")
                        missing = False
                    if present is not None and said:  # Kafka answered the check
                        recovered()
                message = consumer.poll(0.2)
                if problems and not said:
                    self.warn(f"{where}: {problems[0]}; {self.meanwhile}")
                    said = True
                ok = not missing and not said
                if ok != healthy and self.health is not None:
                    self.health(ok)
                healthy = ok
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() not in QUIET_ERRORS:
                        problems.append(message.error().str())
                    continue
                recovered()
                handle(message.value())
        finally:
            consumer.close()

    def _present(self, consumer: Consumer) -> bool | None:
        """Whether the topic exists; None when Kafka does not answer (said apart)."""
        topic = self.settings.alerts_topic
        try:
            metadata = consumer.list_topics(topic, timeout=TOPIC_CHECK_TIMEOUT)
        except KafkaException:
            return None
        found = metadata.topics.get(topic)
        if found is None:
            return False
        if found.error is not None:
            return False if found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART else None
        return bool(found.partitions)
