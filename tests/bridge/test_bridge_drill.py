"""The device path's drill (issue 70): the producer's fleet published over MQTT to a real
Mosquitto, through the bridge into a real Kafka broker, and the job's lake: the bridge
SIGKILLed three times mid-stream (once while Kafka stalls, holding hundreds of readings),
Mosquitto restarted once under it, Kafka stopped for 60 s. Every message the producer
counted delivered lands in ``readings`` (valid) or ``quarantine`` (malformed, with its
reason), every Kafka record exactly once; nothing is lost, and the only extra copies are
the bridge's redeliveries, which keep their event_id (docs/reliability.md,
docs/devices.md#qos-and-what-at-least-once-means-here)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from conf.settings.base import load_settings
from conf.settings.producer import ProducerSettings
from contract.devices import device_name
from lake.reader import LakeReader
from local_stack import kafka as local_kafka
from local_stack import mosquitto as local_mosquitto
from local_stack.server import free_port
from producer.fleet import build_fleet
from producer.generator import Message, MessageGenerator
from tests.support.brokers import Broker
from tests.support.drills import start_job, wait_for_more_deliveries
from tests.support.kafka_io import consume_all
from tests.support.mqtt_io import STARTED, scrape, start_bridge, stop_bridge
from tests.support.polling import STUCK, wait_until
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl
from topics.admin import create_topic

pytestmark = [pytest.mark.slow, pytest.mark.jvm, pytest.mark.mqtt]

OUTAGE = 60.0  # seconds Kafka stays stopped: the outage the issue names
LANDED = 120.0  # seconds a step of the path gets (a reconnection, a backlog drained)
RECEIVED = "sensorwatch_bridge_messages_received_total"
IN_FLIGHT = "sensorwatch_bridge_messages_in_flight"
CLIENT_ID = "bridge-drill"  # one session for every bridge of the drill

# The producer: simulated time from a fixed start, so its messages can be made again
# here; malformed payloads, and no fault of its own that holds messages back (late,
# out-of-order, duplicates), so its sequence is the generator's, cut where it stopped.
PRODUCER = {
    "sensors": 60, "seed": 29, "rate": 200, "start_time": "2026-01-01T00:00:00Z",
    "late_fraction": 0, "out_of_order_fraction": 0, "duplicate_fraction": 0,
    "malformed_fraction": 0.05,
}  # fmt: skip


def producer_flags() -> list[str]:
    """PRODUCER as ``python -m producer`` flags."""
    return [f for k, v in PRODUCER.items() for f in ("--" + k.replace("_", "-"), str(v))]


def start_producer(broker: local_mosquitto.MosquittoInfo, tmp: Path) -> Running:
    """The producer publishing as the fleet's devices, until SIGTERM."""
    return Running(
        [sys.executable, "-m", "producer", *producer_flags(), "--transport", "mqtt",
         "--mqtt-port", str(broker.port),
         "--mqtt-credentials-dir", str(broker.data_dir / "credentials"),
         "--metrics", "false", "--progress-interval", "1",
         "--manifest", str(tmp / "manifest.jsonl"), "--registry-out", str(tmp / "fleet.jsonl")],
        cwd=PROJECT_ROOT,
    )  # fmt: skip


def sent_messages(event_ids: set[str]) -> dict[str, Message]:
    """The producer's messages, made again from its seed and simulated start, by event_id,
    until every one of ``event_ids`` is found (its sequence holds nothing back)."""
    settings = load_settings(ProducerSettings, dict(PRODUCER))
    assert settings.seed is not None
    generator = MessageGenerator(
        settings, build_fleet(settings.sensors, settings.seed), settings.seed
    )
    found: dict[str, Message] = {}
    for made, message in enumerate(generator.messages(None)):
        found[message.event_id] = message
        if event_ids <= found.keys():
            return found
        assert made < 2 * len(event_ids) + 10_000, "the manifest holds messages never generated"
    raise AssertionError("unreachable: the generator runs without end")


def kill_when(
    bridge: Running, ready: Callable[[dict[str, float]], bool], what: str
) -> tuple[int, int]:
    """SIGKILL the bridge as soon as its /metrics satisfy ``ready`` (polled); returns
    (received, in flight) as last seen."""
    samples = wait_until(
        lambda: s if ready(s := scrape(bridge)) else None,
        LANDED, f"the bridge {what}", every=0.01,
        detail=lambda: "\n".join(bridge.output()[-10:]),
    )  # fmt: skip
    bridge.interrupt_group(signal.SIGKILL)
    bridge.finish(STARTED)
    return int(samples[RECEIVED]), int(samples[IN_FLIGHT])


def test_the_fleet_over_mqtt_lands_once_through_bridge_kills_and_broker_outages(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    fleet = build_fleet(int(PRODUCER["sensors"]), int(PRODUCER["seed"]))
    devices = sorted({device_name(sensor.site) for sensor in fleet})
    mqtt_data, mqtt_port = tmp_path / "mosquitto", free_port()
    kafka_data, kafka_port = tmp_path / "kafka", free_port()
    lake, topic = tmp_path / "lake", "drill"
    mosquitto = local_mosquitto.start(mqtt_data, mqtt_port, device_names=devices)
    producer = bridge = job = None
    kills: list[tuple[int, int]] = []  # (received, in flight) of each bridge killed
    try:
        # Its own broker: the drill stops it (on the same port and data, as an operator).
        kafka = Broker(local_kafka.start(kafka_data, kafka_port).bootstrap, "drill broker")
        create_topic(kafka.bootstrap, topic)
        bridge = start_bridge(kafka, topic, mosquitto, CLIENT_ID)
        producer = start_producer(mosquitto, tmp_path)
        producer.wait_for_line(lambda line: " delivered (" in line, LANDED, "deliveries")

        # Kafka stopped for a minute under the bridge: it says so once, acknowledges
        # nothing meanwhile (Mosquitto queues for its session, the producer goes on), and
        # resumes once it is back.
        local_kafka.stop(kafka_data)
        bridge.wait_for_line(lambda line: "unreachable" in line, LANDED, "the outage said")
        time.sleep(OUTAGE)  # the outage under test, not a synchronisation
        broker = local_kafka.start(kafka_data, kafka_port)
        # The job from now on (its JVM starts while the drill goes on): it reads the
        # topic from its start.
        job = start_job(kafka, topic, lake, tmp_path / "fleet.jsonl")
        bridge.wait_for_line(lambda line: "Kafka confirms again" in line, LANDED, "resumed")
        outage_said = [line for line in bridge.lines if "unreachable" in line]
        assert len(outage_said) == 1, outage_said

        # Kill 1 while Kafka stalls (its process paused, as in a long GC pause): the bridge
        # holds every reading it receives meanwhile, none confirmed, and dies holding 200.
        # (A bridge that acknowledged before Kafka confirmed loses them all here; a drain
        # of the minute's backlog was too quick to kill into reliably.)
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            kills.append(kill_when(bridge, lambda s: s[IN_FLIGHT] >= 200, "holding 200 readings"))
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        bridge = start_bridge(kafka, topic, mosquitto, CLIENT_ID)
        assert any("session resumed" in line for line in bridge.lines), bridge.lines

        # Mosquitto restarted under the bridge and the producer's devices: both connect
        # again, and what was not acknowledged is sent again.
        local_mosquitto.stop(mqtt_data)
        local_mosquitto.start(mqtt_data, mqtt_port)
        bridge.wait_for_line(lambda line: "MQTT connection back" in line, LANDED, "reconnected")
        wait_for_more_deliveries(producer, LANDED, "after Mosquitto restarted")

        # Kills 2 and 3 mid-stream, each 500 messages on, with messages in flight.
        for _ in range(2):
            at = scrape(bridge)[RECEIVED] + 500
            kills.append(
                kill_when(
                    bridge, lambda s, at=at: s[RECEIVED] >= at and s[IN_FLIGHT] >= 1,
                    f"with {at:.0f} received, some in flight",
                )
            )  # fmt: skip
            bridge = start_bridge(kafka, topic, mosquitto, CLIENT_ID)
        wait_for_more_deliveries(producer, LANDED, "after the last kill")

        producer.terminate()
        assert producer.finish(LANDED) == 0, "\n".join(producer.lines[-20:])
        done = next(line for line in producer.lines if "done: " in line)
        assert ", 0 failed in " in done, done

        manifest = read_jsonl(tmp_path / "manifest.jsonl")
        sent = sent_messages({line["event_id"] for line in manifest})
        # (Payloads, not event_ids: a malformed one may have none, and two may be equal.)
        payload = {line["event_id"]: as_bytes(sent[line["event_id"]].value) for line in manifest}
        published = Counter(payload.values())
        records: list = []

        def all_in_kafka() -> bool:
            records[:] = consume_all(kafka.bootstrap, topic)
            return published <= Counter(r.value() for r in records)

        wait_until(
            all_in_kafka, LANDED, f"the {len(manifest):,} delivered messages in Kafka",
            every=1, detail=lambda: f"{(published - Counter(r.value() for r in records)).total()}"
            " delivered messages are not in Kafka; the bridge said:\n"
            + "\n".join(bridge.output()[-20:]),
        )  # fmt: skip
        said = stop_bridge(bridge)
        assert said.endswith(" acknowledged"), said  # nothing left in flight
        records[:] = consume_all(kafka.bootstrap, topic)  # all of it, with the last few

        # The job catches up with the topic: every record in readings or quarantine.
        wait_until(
            lambda: sum(positions(lake).values()) >= len(records), STUCK,
            f"the job to land the topic's {len(records):,} records", every=1,
            detail=lambda: "\n".join(job.output()[-30:]),
        )  # fmt: skip
        job.terminate()
        assert job.finish(STUCK) == 0, "\n".join(job.lines[-30:])
    finally:
        for running in (producer, bridge, job):
            if running is not None:
                running.kill()
        local_mosquitto.stop(mqtt_data)
        local_kafka.stop(kafka_data)

    # Kafka: every delivered message at least once, nothing that was not made; the
    # copies beyond the first are redeliveries of messages not yet acknowledged.
    copies = Counter(r.value() for r in records)
    assert set(copies) <= {as_bytes(m.value) for m in sent.values()}, "a payload never made"
    missing = published - copies
    assert not missing, f"{missing.total()} delivered messages lost, e.g. {list(missing)[:2]}"

    # The lake: each Kafka record exactly once, in readings or quarantine.
    landed = positions(lake)
    assert set(landed.values()) == {1}, "a Kafka record landed twice"
    assert set(landed) == {(r.partition(), r.offset()) for r in records}

    # Each delivered message where it belongs: a valid one in readings under its event_id
    # (as often as Kafka holds it: the windows count it once), a malformed one in
    # quarantine with its reason.
    reader = LakeReader(lake)
    readings = Counter(r["event_id"] for r in reader.read("readings", ["event_id"]).to_pylist())
    reasons: dict[bytes, set[str]] = {}
    for row in reader.read("quarantine", ["raw_value", "error"]).to_pylist():
        reasons.setdefault(row["raw_value"].encode("utf-8"), set()).add(row["error"])
    labels: dict[bytes, set[str]] = {}
    for line in manifest:
        if line["kind"] == "malformed":
            labels.setdefault(payload[line["event_id"]], set()).add(line["malformation"])
        else:
            assert readings[line["event_id"]] == copies[payload[line["event_id"]]], line
    assert reasons == labels, "quarantine's reasons differ from the producer's malformations"
    malformed = sum(line["kind"] == "malformed" for line in manifest)
    assert malformed > 0
    print(
        f"\n{len(manifest):,} delivered ({malformed:,} malformed), {len(records):,} Kafka "
        f"records ({sum(copies.values()) - len(copies):,} redelivered copies); bridges killed "
        f"at (received, in flight) {kills}; {time.monotonic() - started:.0f}s"
    )


def as_bytes(value: str | bytes) -> bytes:
    """A message's payload as sent."""
    return value.encode("utf-8") if isinstance(value, str) else value


def positions(lake: Path) -> Counter:
    """How often each Kafka (partition, offset) is in readings and quarantine (none yet
    before the job's first commit)."""
    reader = LakeReader(lake)
    return Counter(
        (r["kafka_partition"], r["kafka_offset"])
        for table in ("readings", "quarantine")
        if reader.has_table(table)
        for r in reader.read(table, ["kafka_partition", "kafka_offset"]).to_pylist()
    )
