"""Testcontainers with the official apache/kafka image (needs a Docker engine)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from local_stack.kafka import wait_until_ready
from producer.topics import create_topic
from tests.brokers import apache_kafka_container
from tests.kafka_io import consume, produce

pytestmark = pytest.mark.docker


def test_apache_kafka_container_round_trip() -> None:
    with apache_kafka_container() as container:
        wait_until_ready(container.bootstrap, timeout=120)
        assert create_topic(container.bootstrap, "tc", partitions=6)
        admin = AdminClient({"bootstrap.servers": container.bootstrap})
        partitions = admin.list_topics("tc", timeout=10).topics["tc"].partitions

        produce(container.bootstrap, "tc", [(f"k{i}", f"v{i}") for i in range(500)])
        read = consume(container.bootstrap, "tc", expected=500)

    assert len(partitions) == 6
    assert sorted(r.value for r in read) == sorted(f"v{i}".encode() for i in range(500))
