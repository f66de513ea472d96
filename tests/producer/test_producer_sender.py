"""The sender counts what did not arrive, and the manifest records only what did, all of it."""

from __future__ import annotations

import io
import json

from local_stack.server import free_port
from producer.generator import Message
from producer.kafka_sender import KafkaSender
from producer.sender import Manifest


def test_undeliverable_messages_are_counted_failed_not_recorded(tmp_path) -> None:
    manifest = tmp_path / "m.jsonl"
    sender = KafkaSender(
        f"127.0.0.1:{free_port()}",  # nothing listens: nothing can be delivered
        "t",
        manifest,
        log=io.StringIO(),
        client_config={"delivery.timeout.ms": 1500, "log_level": 0},
    )
    messages = [
        Message(f"sensor-{i:04d}", "{}", "normal", f"id-{i}", "2026-01-01T00:00:00.000Z", 20.0)
        for i in range(10)
    ]

    summary = sender.run(messages)

    assert (summary.sent, summary.delivered, summary.failed) == (10, 0, 10)
    assert summary.first_error
    assert manifest.read_text() == ""


def test_the_manifest_keeps_what_was_delivered_after_a_message_left_without_outcome(
    tmp_path,
) -> None:
    # Message 0 was still queued when the run ended (counted failed, never reported): the
    # deliveries after it are still written, in send order.
    manifest = Manifest(tmp_path / "m.jsonl")
    messages = [
        Message(f"sensor-{i:04d}", "{}", "normal", f"id-{i}", "2026-01-01T00:00:00.000Z", 20.0)
        for i in range(4)
    ]
    manifest.record(2, messages[2], 1, 7)
    manifest.record(1, messages[1], 0, 3)
    manifest.record(3, None)

    manifest.close()

    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [(x["event_id"], x["partition"], x["offset"]) for x in lines] == [
        ("id-1", 0, 3),
        ("id-2", 1, 7),
    ]
