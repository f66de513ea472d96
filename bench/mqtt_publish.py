"""A device for ``scripts/bench --bridge``: publishes readings with QoS 1 as one site's
device, each carrying the wall-clock nanosecond it was handed to the client
(``bench_sent_ns``), paced at a rate or as fast as the broker acknowledges.

``python -m bench.mqtt_publish --port N --user SITE --password-file F --count N --rate R
[--hot-every N --hot-log F]`` (rate 0: unpaced); prints ``published N acknowledged M in
S`` on stdout when every message is acknowledged. With --hot-every, every N-th reading is
hot (above every overheat threshold) and from a sensor of its own, so the real-time path
sends one alert for it alone; --hot-log gets a line ``sensor_id sent_ns`` per hot reading.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import BaseModel, Field

from conf.cli import read_options
from contract.devices import TopicLayout
from contract.times import iso, utc_now
from local_stack.server import LOOPBACK

# Messages handed to the client before their acknowledgements: enough to keep a local
# broker busy without a queue that hides the pace.
IN_FLIGHT = 1_000


# A hot reading's temperature: above conf/rules.toml's overheat threshold (45 °C) for an
# unregistered sensor.
HOT_C = 60.0


def reading(sensor_id: str, seq: int = 0, temperature_c: float = 21.5, **extra: object) -> bytes:
    """A valid reading of docs/architecture.md#the-event, as a device sends it now (with
    ``extra`` fields of the sender's own)."""
    return json.dumps(
        {
            "event_id": str(uuid.uuid4()),
            "sensor_id": sensor_id,
            "event_time": iso(utc_now()),
            "temperature_c": temperature_c,
            "humidity_pct": 40.0,
            "battery_pct": 90.0,
            "seq": seq,
            **extra,
        }
    ).encode()


def payload(sensor_id: str, seq: int, temperature_c: float = 21.5) -> bytes:
    """A reading, plus the instant it is sent (``bench_sent_ns``)."""
    return reading(sensor_id, seq, temperature_c, bench_sent_ns=time.time_ns())


class PublishOptions(BaseModel):
    """One bench device's command line."""

    port: int = Field(ge=1, le=65535, description="the broker's MQTT port on 127.0.0.1")
    user: str = Field(min_length=1, description="the device (its site's login)")
    password_file: Path = Field(description="the file holding its password")
    count: int = Field(ge=1, description="readings to publish")
    rate: float = Field(ge=0, description="readings/s; 0: as fast as acknowledged")
    hot_every: int = Field(0, ge=0, description="every N-th reading hot; 0: none")
    hot_log: Path | None = Field(None, description="where each hot reading's send is noted")


def main(argv: list[str] | None = None) -> int:
    """Publish; returns 0 once every message is acknowledged, 1 otherwise."""
    options = read_options(
        PublishOptions, argv, prog="python -m bench.mqtt_publish",
        description="A device for scripts/bench --bridge.", say_as="bench.mqtt_publish",
    )  # fmt: skip
    port, user, password_file = options.port, options.user, options.password_file
    total, pace, hot_every = options.count, options.rate, options.hot_every
    hot_log = (
        None if options.hot_log is None else open(options.hot_log, "w", encoding="utf-8")  # noqa: SIM115
    )
    acknowledged = threading.Semaphore(0)
    room = threading.Semaphore(IN_FLIGHT)
    connected = threading.Event()

    def on_connect(client, userdata, flags, reason, properties) -> None:  # type: ignore[no-untyped-def]
        if not reason.is_failure:
            connected.set()

    def on_publish(client, userdata, mid, reason, properties) -> None:  # type: ignore[no-untyped-def]
        room.release()
        acknowledged.release()

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"bench-{user}-{uuid.uuid4().hex[:6]}",
        protocol=mqtt.MQTTv5,
    )
    with open(password_file, encoding="utf-8") as secret:
        client.username_pw_set(user, secret.read().strip())
    client.max_inflight_messages_set(IN_FLIGHT)
    client.max_queued_messages_set(0)
    client.on_connect, client.on_publish = on_connect, on_publish
    client.connect(LOOPBACK, port)
    client.loop_start()
    if not connected.wait(30):
        print(f"{user}: could not connect", file=sys.stderr)
        return 1
    layout = TopicLayout()
    sensors = [f"{user}-sensor-{n:03d}" for n in range(50)]
    topics = [layout.topic(user, s) for s in sensors]
    started = time.monotonic()
    for seq in range(total):
        if pace:
            due = started + seq / pace
            while (ahead := due - time.monotonic()) > 0:
                time.sleep(ahead)
        room.acquire()
        if hot_every and seq % hot_every == hot_every - 1:
            sensor = f"{user}-hot-{seq:08d}"
            sent = time.time_ns()
            client.publish(layout.topic(user, sensor), payload(sensor, seq, HOT_C), qos=1)
            if hot_log is not None:
                hot_log.write(f"{sensor} {sent}\n")
            continue
        n = seq % len(sensors)
        client.publish(topics[n], payload(sensors[n], seq), qos=1)
    deadline = time.monotonic() + 60  # for every acknowledgement still missing, together
    done = 0
    while done < total and acknowledged.acquire(timeout=max(0.0, deadline - time.monotonic())):
        done += 1
    seconds = time.monotonic() - started
    client.disconnect()
    client.loop_stop()
    if hot_log is not None:
        hot_log.close()
    print(f"published {total} acknowledged {done} in {seconds:.3f}")
    return 0 if done == total else 1


if __name__ == "__main__":
    sys.exit(main())
