"""``python -m producer``: the sensor fleet simulator's command line
(docs/architecture.md#command-line-names)."""

from __future__ import annotations

import random
import sys
import time

from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.kafka_client import describe, librdkafka_config
from conf.settings import (
    ProducerSettings,
    SettingsError,
    load_settings,
)
from producer.fleet import build_fleet, write_registry
from producer.generator import KINDS, MessageGenerator
from producer.metrics import producer_registry
from producer.sender import Sender
from producer.topics import TopicError, check_topic
from telemetry.endpoint import EndpointError, serve_metrics

DESCRIPTION = """\
Simulate a fleet of IoT temperature sensors and send their readings to Kafka as JSON
(key = sensor_id). Late, out-of-order, duplicate and malformed messages are injected on
purpose, and scripted incidents (spikes, sustained overheating, silent sensors) give the
job something to alert on. Everything is reproducible from --seed with --start-time.

With --start-time the event clock is simulated: readings follow the schedule (one per
sensor every --interval event-seconds) and --rate sets the wall-clock pace (0 = as fast
as possible). Without it, event time is the real time, and the pace is the fleet's own
(sensors / interval messages per second) unless --rate sets another.

`python -m producer replay FILE...` sends recordings of real sensors instead (see its
--help).

Every setting can also come from the environment variable named in its help.
Exit status: 0 all delivered, 1 some messages failed, 2 bad settings or no broker/topic.
"""


def read_command_line(argv: list[str] | None) -> dict[str, object]:
    """One flag per setting of ProducerSettings, named as
    docs/architecture.md#command-line-names fixes them."""
    flags, _ = command_line(
        ProducerSettings, argv, prog="python -m producer", description=DESCRIPTION
    )
    return flags


def _summary_lines(summary, seed: int) -> list[str]:  # type: ignore[no-untyped-def]
    kinds = ", ".join(f"{k} {summary.by_kind[k]:,}" for k in KINDS if summary.by_kind[k])
    lines = [
        f"done: {summary.delivered:,} delivered, {summary.failed:,} failed in "
        f"{summary.seconds:.1f}s ({summary.rate:,.0f} msg/s), seed {seed}",
        f"by kind: {kinds or 'none'}",
    ]
    if summary.failed:
        lines.append(f"first failure: {summary.first_error}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the producer (``replay ...``: producer/replay_cli.py); returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["replay"]:
        from producer.replay_cli import main as replay

        return replay(args[1:])
    whole_lines()  # run-local runs this program beside others on one terminal
    try:
        settings = load_settings(ProducerSettings, read_command_line(argv))
    except SettingsError as exc:
        print("producer: invalid settings:\n  " + str(exc).replace("\n", "\n  "), file=sys.stderr)
        return 2
    # Without --seed the run is still reproducible: the seed drawn is printed at the end.
    seed = settings.seed if settings.seed is not None else random.SystemRandom().randrange(2**31)
    fleet = build_fleet(settings.sensors, seed)
    if settings.registry_out:
        write_registry(fleet, settings.registry_out)
    try:
        check_topic(librdkafka_config(settings), settings.topic)
    except TopicError as exc:
        print(f"producer: {exc}", file=sys.stderr)
        return 2

    real_time = settings.start_time is None
    generator = MessageGenerator(settings, fleet, seed, wall_clock=time.time if real_time else None)
    rate = settings.rate or (settings.sensors / settings.interval if real_time else 0.0)
    sender = Sender(
        settings.bootstrap_servers,
        settings.topic,
        settings.manifest,
        settings.progress_interval,
        client_config=librdkafka_config(settings),
    )
    sender.install_signal_handlers()
    try:
        endpoint = serve_metrics(settings, producer_registry(lambda: sender.summary))
    except EndpointError as exc:
        print(f"producer: {exc}", file=sys.stderr)
        return 2
    clock = "real time" if real_time else f"simulated from {settings.start_time.isoformat()}"
    pace = f"{rate:,.0f} msg/s" if rate else "unpaced"
    first = settings.first_spike_after
    scripted = "" if first is None else f", a scripted spike at +{first:g} s"
    print(
        f"producer: {settings.sensors} sensors -> {settings.topic} at "
        f"{describe(settings)} ({clock}, {pace}, seed {seed}{scripted})",
        file=sys.stderr,
    )
    if endpoint is not None:
        print(f"producer: metrics at {endpoint.url}", file=sys.stderr)
    try:
        summary = sender.run(
            generator.messages(settings.count),
            rate=rate,
            duration=settings.duration,
            leftovers=generator.drain(),
        )
    finally:
        if endpoint is not None:
            endpoint.close()
    for line in _summary_lines(summary, seed):
        print(f"producer: {line}", file=sys.stderr)
    return 1 if summary.failed else 0
