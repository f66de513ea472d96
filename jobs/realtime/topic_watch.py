"""The topics the real-time path depends on, looked at while the job runs: the readings
topic's partitions (each one holds a task slot of the path for as long as it runs) and
the alerts topic the path writes to (made again, and said, when it was deleted)."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from conf.kafka_client import librdkafka_config
from conf.settings.job import JobSettings
from topics.admin import TopicError, create_topic

# How long one look may wait for the broker: the job's main loop waits meanwhile.
LOOK_TIMEOUT_S = 5.0


def topic_partitions(client: dict[str, str]) -> dict[str, int]:
    """Every topic of the cluster and its partition count, in one metadata request.

    All topics, not the two by name: a broker that creates topics on first use
    (``auto.create.topics.enable``) would make a deleted alerts topic again when asked for
    it by name, with its default partitions and without a word.

    Raises:
        TopicError: the broker did not answer.
    """
    admin = AdminClient({**client, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=LOOK_TIMEOUT_S)
    except KafkaException as exc:
        raise TopicError(f"Kafka did not answer: {exc.args[0].str()}") from None
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()}


class TopicWatch:
    """The readings topic's partition count and the alerts topic's existence, asked of
    the broker at most every ``every`` seconds. Never raises: a broker that does not
    answer is said once, and the last known count holds."""

    def __init__(
        self,
        settings: JobSettings,
        say: Callable[[str], None],
        every: float,
        clock: Callable[[], float] = time.monotonic,
        topics: Callable[[dict[str, str]], dict[str, int]] = topic_partitions,
        create: Callable[..., bool] = create_topic,
        partitions: int | None = None,
    ) -> None:
        """``topics`` and ``create``: :func:`topic_partitions` and topics.admin's
        create_topic (a test's stand-ins otherwise); ``partitions``: the readings topic's,
        if known already."""
        self.settings, self.say, self.every, self.clock = settings, say, every, clock
        self._topics, self._create = topics, create
        self._client = librdkafka_config(settings)
        self._partitions = partitions
        self._looked_at: float | None = None
        self._said: str | None = None  # the last problem said, so that it is said once

    def _once(self, line: str | None) -> None:
        if line is not None and line != self._said:
            self.say(line)
        self._said = line

    def partitions(self) -> int:
        """The readings topic's partitions as last seen (asked of the broker the first time)."""
        if self._partitions is None:
            self.look(force=True)
        return self._partitions or 1

    def look(self, force: bool = False) -> bool:
        """Ask the broker, if it is time to (or ``force``): the readings topic's partitions,
        and the alerts topic, made again if it is gone. True when the readings topic has
        gained partitions since the last look."""
        now = self.clock()
        if not force and self._looked_at is not None and now - self._looked_at < self.every:
            return False
        self._looked_at = now
        topic, alerts = self.settings.topic, self.settings.alerts_topic
        try:
            known = self._topics(self._client)
            if topic not in known:
                raise TopicError(f"the readings topic {topic} is gone")
            found = known[topic]
            if alerts not in known and self._create(self._client, alerts, found, timeout=30.0):
                # Loudly: whoever deleted it, consumers of the topic missed what was sent
                # between the deletion and now.
                self.say(
                    f"realtime: WARNING the alerts topic {alerts} was gone (deleted while the "
                    f"job ran?); made it again with {found} partitions. What the path sent "
                    "meanwhile is lost to its consumers; the alerts table has every alert"
                )
        except TopicError as exc:
            self._once(f"realtime: cannot look at the topics ({exc}); the path keeps what it knew")
            return False
        self._once(None)
        grown = self._partitions is not None and found > self._partitions
        self._partitions = found
        return grown
