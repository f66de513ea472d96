"""End to end against Testcontainers' Kafka (the official apache/kafka image): its topic
with 6 partitions, every offset the producer sent read by the job once. (It replaced a
round trip of its own on a second container: this covers it.)

Needs a Docker engine; skipped with the reason where none answers. Where one does, the
session broker itself is a container too, but this test starts its own so that it checks
the container path even when KAFKA_BOOTSTRAP_SERVERS points elsewhere.
"""

from __future__ import annotations

from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient

from jobs.stream import run
from local_stack.kafka import wait_until_ready
from tests.support.brokers import Broker, apache_kafka_container
from tests.support.job_settings import available_now
from tests.support.producer_run import read_jsonl, run_producer
from topics.admin import create_topic

pytestmark = pytest.mark.docker


def test_producer_to_job_to_delta_through_a_kafka_container(spark, tmp_path) -> None:
    manifest, registry, lake = tmp_path / "m.jsonl", tmp_path / "fleet.jsonl", tmp_path / "lake"
    with apache_kafka_container() as container:
        wait_until_ready(container.bootstrap, timeout=120)
        assert create_topic(container.bootstrap, "readings", partitions=6)
        admin = AdminClient({"bootstrap.servers": container.bootstrap})
        partitions = admin.list_topics("readings", timeout=10).topics["readings"].partitions
        done = run_producer(
            "--bootstrap-servers", container.bootstrap, "--topic", "readings",
            "--count", 5_000, "--sensors", 20, "--seed", 3,
            "--start-time", "2026-01-01T00:00:00Z", "--manifest", manifest,
            "--registry-out", registry, "--spike-rate", 2,
            "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        broker = Broker(container.bootstrap, "Testcontainers")
        run(available_now(broker, "readings", lake, registry=registry), spark)

    sent = read_jsonl(manifest)
    landed = Counter(
        (r.kafka_partition, r.kafka_offset)
        for name in ("readings", "quarantine")
        for r in spark.read.format("delta").load(str(lake / name)).collect()
    )
    spikes = {line["sensor_id"] for line in sent if line.get("incident") == "spike"}
    alerted = {
        r.sensor_id
        for r in spark.read.format("delta").load(str(lake / "alerts")).collect()
        if r.rule == "overheat_reading"
    }

    assert len(partitions) == 6
    assert set(landed.values()) == {1}
    assert set(landed) == {(line["partition"], line["offset"]) for line in sent}
    assert spikes and alerted == spikes
