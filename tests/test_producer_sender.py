"""The sender counts what did not arrive, and the manifest records only what did."""

from __future__ import annotations

import io

from local_stack.kafka import free_port
from producer.generator import Message
from producer.sender import Sender


def test_undeliverable_messages_are_counted_failed_not_recorded(tmp_path) -> None:
    manifest = tmp_path / "m.jsonl"
    sender = Sender(
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
