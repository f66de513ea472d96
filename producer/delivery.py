"""What both producer commands do around their messages (producer/cli.py, the simulator;
producer/replay_cli.py, the replay): make the transport's sender, ready to send or a
one-line reason why not, then signals, /metrics, the start line, the run and its
summary, and the exit status (0 all delivered, 1 some lost, 2 no start)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping

from conf.kafka_client import describe, librdkafka_config
from conf.settings.metrics_endpoint import MetricsSettings
from conf.settings.producer import ProducerSettings
from conf.settings.replay import ReplaySettings
from producer.generator import KINDS
from producer.kafka_sender import KafkaSender
from producer.metrics import producer_registry
from producer.mqtt_sender import MqttError, MqttSender, device_passwords, routes_of
from producer.sender import Sender, Summary
from telemetry.endpoint import EndpointError, serve_metrics
from topics.admin import TopicError, check_topic


class SetupError(RuntimeError):
    """The sender cannot start: no broker, no topic, a refused login; one line."""


def kafka_sender(settings: ProducerSettings | ReplaySettings) -> KafkaSender:
    """A sender to the settings' topic, once the topic is known to exist.

    Raises:
        SetupError: Kafka is unreachable, refuses this client, or has no such topic.
    """
    config = librdkafka_config(settings)
    try:
        check_topic(config, settings.topic)
    except TopicError as exc:
        raise SetupError(str(exc)) from None
    return KafkaSender(
        settings.bootstrap_servers,
        settings.topic,
        settings.manifest,
        settings.progress_interval,
        client_config=config,
        shown_as=describe(settings),
    )


def mqtt_sender(settings: ProducerSettings, sites: Mapping[str, str]) -> MqttSender:
    """A sender publishing as the devices of ``sites`` (``{sensor_id: site}``), every
    device connected and its login accepted.

    Raises:
        SetupError: a device has no password, or the broker is unreachable or refused one.
    """
    password = settings.mqtt_password
    try:
        sensor_routes = routes_of(sites, settings)
        devices = sorted({route.device for route in sensor_routes.values()})
        passwords = device_passwords(
            devices,
            settings.mqtt_credentials_dir,
            password.get_secret_value() if password is not None else None,
        )
        sender = MqttSender(
            settings, sensor_routes, passwords, settings.manifest, settings.progress_interval
        )
        sender.connect()
    except MqttError as exc:
        raise SetupError(str(exc)) from None
    return sender


def producer_sender(settings: ProducerSettings, sites: Mapping[str, str]) -> Sender:
    """The simulator's sender for its ``transport`` (``sites``: each sensor's site).

    Raises:
        SetupError: as :func:`kafka_sender` or :func:`mqtt_sender`.
    """
    if settings.transport == "mqtt":
        return mqtt_sender(settings, sites)
    return kafka_sender(settings)


def summary_lines(summary: Summary, seed: int | None = None) -> list[str]:
    """The run's last lines: delivered and failed, by kind, the first failure."""
    kinds = ", ".join(f"{k} {summary.by_kind[k]:,}" for k in KINDS if summary.by_kind[k])
    lines = [
        f"done: {summary.delivered:,} delivered, {summary.failed:,} failed in "
        f"{summary.seconds:.1f}s ({summary.rate:,.0f} msg/s)"
        + ("" if seed is None else f", seed {seed}"),
        f"by kind: {kinds or 'none'}",
    ]
    if summary.failed:
        lines.append(f"first failure: {summary.first_error}")
    return lines


def deliver(
    prog: str,
    settings: MetricsSettings,
    sender: Sender,
    started: str,
    send: Callable[[Sender], Summary],
    seed: int | None = None,
) -> int:
    """Run ``send(sender)`` with SIGINT/SIGTERM stopping it cleanly and /metrics served,
    saying ``started`` first and the summary last; returns the exit status.

    ``prog`` prefixes a line that says why it could not start (a taken metrics port).
    """
    sender.install_signal_handlers()
    try:
        endpoint = serve_metrics(settings, producer_registry(lambda: sender.summary))
    except EndpointError as exc:
        sender.close()
        say(f"{prog}: {exc}")
        return 2
    say(f"producer: {started}")
    if endpoint is not None:
        say(f"producer: metrics at {endpoint.url}")
    try:
        summary = send(sender)
    finally:
        if endpoint is not None:
            endpoint.close()
    for line in summary_lines(summary, seed):
        say(f"producer: {line}")
    return 1 if summary.failed else 0


def say(line: str) -> None:
    """One line on stderr."""
    print(line, file=sys.stderr, flush=True)
