"""Following the real-time path's Kafka topic (``alerts_topic``) from its end: the one
consumer loop of the notifier's fast lane (ops/alert_stream.py) and the dashboard's live
alerts (ops/dashboard/live.py).

A topic the job has not made yet is no trouble (it makes it at its start); a broker that
does not answer is said once, and again once when it answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError

from conf.kafka_client import librdkafka_config
from conf.settings import RealtimeAlertsSettings

QUIET_ERRORS = (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART)


@dataclass(frozen=True)
class TopicReader:
    """Who reads the topic and what it does with each message's value."""

    settings: RealtimeAlertsSettings
    prefix: str  # of each line said: "notify", "ops.dashboard"
    group_id: str
    # Commit offsets: the notifier's group does (one reader per group); the dashboard's
    # group is its process's own and starts at the end every time.
    commit: bool
    log: Callable[[str], None]
    warn: Callable[[str], None]
    # What the reader loses while Kafka does not answer, for the warning: "real-time
    # alerts wait for it (the incidents still go out)".
    meanwhile: str

    def follow(self, handle: Callable[[bytes], object], stop: threading.Event) -> None:
        """Call ``handle`` with each new message's value until ``stop`` is set."""
        settings = self.settings
        where = f"{self.prefix}: Kafka at {settings.bootstrap_servers}"
        problems: list[str] = []
        consumer = Consumer(
            {
                **librdkafka_config(settings),
                "group.id": self.group_id,
                "auto.offset.reset": "latest",
                "enable.auto.commit": self.commit,
                "log_level": 0,  # connection trouble is said once, below
                # A topic the job has not made yet is looked for again this often.
                "topic.metadata.refresh.interval.ms": 5000,
                "error_cb": lambda error: problems.append(error.str()),
            }
        )
        consumer.subscribe([settings.alerts_topic])
        said = False
        try:
            while not stop.is_set():
                message = consumer.poll(0.2)
                if problems and not said:
                    self.warn(f"{where}: {problems[0]}; {self.meanwhile}")
                    said = True
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() not in QUIET_ERRORS:
                        problems.append(message.error().str())
                    continue
                if said:
                    self.log(f"{where} answers again")
                said = False
                problems.clear()
                handle(message.value())
        finally:
            consumer.close()
