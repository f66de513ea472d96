"""``python -m bridge``: the bridge's command line, start-up and stop."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from types import FrameType

from bridge.engine import EngineMissing, ignored_kafka_properties
from bridge.service import Bridge, describe
from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.kafka_client import describe as describe_kafka
from conf.kafka_client import librdkafka_config
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from conf.settings.bridge import BridgeSettings
from telemetry.endpoint import EndpointError, serve_metrics
from topics.admin import TopicError, check_topic

PROG = "python -m bridge"
DESCRIPTION = """\
Bring device readings from an MQTT broker into Kafka, at least once (docs/devices.md).
Subscribes with QoS 1 and a persistent session to --mqtt-topic-layout's filter, produces
each payload unchanged to --topic keyed by the sensor its topic names (headers: the MQTT
topic and when it arrived), and acknowledges a message to MQTT only once Kafka confirmed
it. While Kafka is away nothing is acknowledged and the broker queues the readings.

Settings: defaults, conf/pipeline.toml, SENSORWATCH_<NAME> variables, then flags; the
MQTT password only from SENSORWATCH_MQTT_PASSWORD or _FILE. Exit status: 0 after a stop
(SIGTERM, Ctrl-C); 2 for bad settings, a missing topic or a refused login.
"""


def read_command_line(argv: Sequence[str] | None) -> dict[str, object]:
    """The flags of ``python -m bridge``: one per setting of BridgeSettings."""
    flags, _ = command_line(BridgeSettings, argv, prog=PROG, description=DESCRIPTION)
    return flags


def say(line: str) -> None:
    """One line on stderr."""
    print(line, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bridge; returns the exit status."""
    whole_lines()  # run-local runs this program beside others on one terminal
    try:
        settings = load_settings(BridgeSettings, read_command_line(argv), SHARED_FILE)
    except SettingsError as exc:
        say("bridge: invalid settings:\n  " + str(exc).replace("\n", "\n  "))
        return 2
    try:
        check_topic(librdkafka_config(settings), settings.topic)
    except TopicError as exc:
        say(f"bridge: {exc}")
        return 2
    bridge = Bridge(settings, say)
    try:
        endpoint = serve_metrics(settings, bridge.registry)
    except EndpointError as exc:
        say(f"bridge: {exc}")
        return 2

    def stop(_signum: int, _frame: FrameType | None) -> None:
        bridge.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    say(
        f"bridge: {describe(settings)} {settings.topic_layout.subscription} -> "
        f"{settings.topic} at {describe_kafka(settings)}"
    )
    if ignored := ignored_kafka_properties(settings):
        say(f"bridge: kafka_properties {', '.join(ignored)} do not apply to the bridge's client")
    if endpoint is not None:
        say(f"bridge: metrics at {endpoint.url}")
    try:
        summary = bridge.run()
    except EngineMissing as exc:
        say(f"bridge: {exc}")
        return 2
    finally:
        if endpoint is not None:
            endpoint.close()
    if bridge.fatal:
        say(f"bridge: {bridge.fatal}")
        return 2
    left = (
        f"; {summary.unacknowledged:,} left unacknowledged (the broker sends them again to "
        "the next start)"
        if summary.unacknowledged
        else ""
    )
    say(
        f"bridge: stopped: {summary.received:,} received, {summary.forwarded:,} forwarded "
        f"to Kafka, {summary.acknowledged:,} acknowledged{left}"
    )
    return 0
