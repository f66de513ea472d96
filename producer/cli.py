"""``python -m producer``: the sensor fleet simulator's command line
(docs/architecture.md#command-line-names)."""

from __future__ import annotations

import random
import sys
import time

from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.settings.base import SettingsError, load_settings
from conf.settings.producer import ProducerSettings
from producer.delivery import SetupError, deliver, producer_sender
from producer.fleet import build_fleet, write_registry
from producer.generator import MessageGenerator
from producer.sender import Sender, Summary

DESCRIPTION = """\
Simulate a fleet of IoT temperature sensors and send their readings to Kafka as JSON
(key = sensor_id). Late, out-of-order, duplicate and malformed messages are injected on
purpose, and scripted incidents (spikes, sustained overheating, silent sensors) give the
job something to alert on. Everything is reproducible from --seed with --start-time.

With --start-time the event clock is simulated: readings follow the schedule (one per
sensor every --interval event-seconds) and --rate sets the wall-clock pace (0 = as fast
as possible). Without it, event time is the real time, and the pace is the fleet's own
(sensors / interval messages per second) unless --rate sets another.

--transport mqtt publishes the same messages as the sites' devices would instead: one
MQTT client per site, logged in as the site's device (user = the device's name, password
from --mqtt-credentials-dir or SENSORWATCH_MQTT_PASSWORD), QoS 1, to
sensors/<device>/<sensor_id>/readings (--mqtt-topic-layout), for the bridge to bring into
Kafka (docs/devices.md). A message counts as delivered once the broker acknowledged it.

`python -m producer replay FILE...` sends recordings of real sensors instead (see its
--help).

Every setting can also come from the environment variable named in its help.
Exit status: 0 all delivered, 1 some messages failed, 2 bad settings, no broker or topic,
or a device's login refused.
"""


def read_command_line(argv: list[str] | None) -> dict[str, object]:
    """One flag per setting of ProducerSettings, named as
    docs/architecture.md#command-line-names fixes them."""
    flags, _ = command_line(
        ProducerSettings, argv, prog="python -m producer", description=DESCRIPTION
    )
    return flags


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
        sender = producer_sender(settings, {sensor.sensor_id: sensor.site for sensor in fleet})
    except SetupError as exc:
        print(f"producer: {exc}", file=sys.stderr)
        return 2

    real_time = settings.start_time is None
    generator = MessageGenerator(settings, fleet, seed, wall_clock=time.time if real_time else None)
    rate = settings.rate or (settings.sensors / settings.interval if real_time else 0.0)
    clock = "real time" if real_time else f"simulated from {settings.start_time.isoformat()}"
    pace = f"{rate:,.0f} msg/s" if rate else "unpaced"
    first = settings.first_spike_after
    scripted = "" if first is None else f", a scripted spike at +{first:g} s"

    def send(sender: Sender) -> Summary:
        return sender.run(
            generator.messages(settings.count),
            rate=rate,
            duration=settings.duration,
            leftovers=generator.drain(),
        )

    return deliver(
        "producer",
        settings,
        sender,
        f"{settings.sensors} sensors -> {sender.target} ({clock}, {pace}, seed {seed}{scripted})",
        send,
        seed,
    )
