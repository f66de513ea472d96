"""``python -m producer.topics create``: create the readings topic if it is missing (the
administration itself is topics/admin.py, shared by every program)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from topics.admin import TopicError, create_topic


class TopicCommand(BaseModel):
    """``create``, and the new topic's partitions."""

    command: CliPositionalArg[Literal["create"]] = Field(description="create")
    partitions: int = Field(6, ge=1, description="partitions of a topic it creates")


def main(argv: list[str] | None = None) -> int:
    """``python -m producer.topics create``: create the readings topic if it is missing."""
    import sys

    from conf.cli import read_command_line
    from conf.kafka_client import librdkafka_config
    from conf.settings.base import SettingsError, load_settings
    from conf.settings.kafka_connection import KafkaSettings

    try:
        flags, command = read_command_line(
            KafkaSettings,
            argv,
            prog="python -m producer.topics",
            description="Create the readings topic if it is missing. The connection (TLS, "
            "SASL) comes from the SENSORWATCH_KAFKA_* settings, as for the producer and the "
            "job.",
            options=TopicCommand,
        )
    except SettingsError as exc:
        print(f"topics: {exc}", file=sys.stderr)
        return 2
    assert command is not None
    try:
        settings = load_settings(KafkaSettings, flags)
        created = create_topic(librdkafka_config(settings), settings.topic, command.partitions)
    except (TopicError, SettingsError) as exc:
        print(f"topics: {exc}", file=sys.stderr)
        return 2
    state = "created" if created else "already exists"
    print(f"topics: {settings.topic} {state} on {settings.bootstrap_servers}")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except KeyboardInterrupt:  # Ctrl-C while it waits: the caller (run-local) cleans up
        status = 130
    raise SystemExit(status)
