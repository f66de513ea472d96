"""``scripts/bench --bridge``: what MQTT in costs (issue 70): readings published with QoS 1
by devices into a local Mosquitto, through ``python -m bridge`` into a Kafka topic.

Two figures, on one broker, bridge and topic:

- **throughput**: ``publishers`` devices (processes of bench/mqtt_publish.py) publish
  ``messages`` readings in all as fast as the broker acknowledges them; readings/s from
  the first publish to the last reading's arrival in Kafka (a consumer counts them);
- **latency**: one device publishes at ``rate`` readings/s for ``seconds``; each
  reading's time from its publish to a Kafka consumer's receipt (both on this machine's
  wall clock): p50, p95, p99, max. The bridge acknowledges a reading to MQTT only once
  Kafka confirmed it (bridge/acks.py), so this is the at-least-once path's latency.

The job is not part of it: ``scripts/bench`` measures the job from Kafka on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from bench.stats import percentile
from conf.paths import PROJECT_ROOT
from conf.settings import env_name
from local_stack import mosquitto as local_mosquitto
from local_stack.kafka import free_port


@dataclass(frozen=True)
class BridgePlan:
    """What one ``--bridge`` run measures."""

    messages: int = 200_000
    publishers: int = 4
    rate: float = 5_000.0
    seconds: float = 30.0


def _consumer(bootstrap: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-bridge-{time.monotonic_ns()}",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)  # joined: the readings published from now on are seen
    return consumer


def _publishers(info: local_mosquitto.MosquittoInfo, sites: list[str], count: int,
                rate: float) -> list[subprocess.Popen]:  # fmt: skip
    procs = []
    for site in sites:
        user = local_mosquitto.credential(info.data_dir, site)
        argv = [sys.executable, "-m", "bench.mqtt_publish", str(info.port), site,
                str(user.password_file), str(count), str(rate)]  # fmt: skip
        procs.append(
            subprocess.Popen(
                argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    return procs


def _outputs(procs: list[subprocess.Popen], timeout: float = 120.0) -> list[str]:
    """Each publisher's last line once it ended; one still running after ``timeout``
    seconds in all is killed (its line says so)."""
    deadline = time.monotonic() + timeout
    lines = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            lines.append(out.strip())
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            lines.append(f"killed after {timeout:g} s")
    return lines


def _receive(consumer: Consumer, expected: int, timeout: float) -> list[tuple[float, int]]:
    """(receipt, sent) wall-clock nanoseconds of ``expected`` readings, or those that came
    before ``timeout`` seconds without one."""
    got: list[tuple[float, int]] = []
    quiet_since = time.monotonic()
    while len(got) < expected and time.monotonic() - quiet_since < timeout:
        # poll, not consume(n, timeout): consume waits for n records or the whole timeout,
        # which would add up to that timeout to every reading's time.
        record = consumer.poll(0.1)
        if record is None or record.error():
            continue
        now = time.time_ns()
        got.append((now, json.loads(record.value())["bench_sent_ns"]))
        quiet_since = time.monotonic()
    return got


def measure(
    plan: BridgePlan, workdir: Path, figures: dict[str, Any], say: Callable[[str], None]
) -> None:
    """Run the plan on a local broker of its own, filling ``figures``."""
    from bench.env import local_broker

    with local_broker(workdir / "kafka") as broker:
        measure_on(broker.bootstrap, plan, workdir, figures, say)


def measure_on(
    bootstrap: str,
    plan: BridgePlan,
    workdir: Path,
    figures: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Run the plan against the Kafka broker at ``bootstrap`` (a topic of its own), with a
    Mosquitto and a bridge of its own under ``workdir``."""
    from bench.env import new_topic

    sites = [f"bench-site-{n}" for n in range(max(plan.publishers, 1))]
    topic = new_topic(bootstrap, "bridge", 6)
    info = local_mosquitto.start(workdir / "mosquitto", free_port(), device_names=sites)
    env = {
        **os.environ,
        **local_mosquitto.client_env(info),
        env_name("bootstrap_servers"): bootstrap,
        env_name("topic"): topic,
        env_name("metrics_port"): "0",
        env_name("mqtt_client_id"): "bench-bridge",
    }
    bridge = subprocess.Popen(
        [sys.executable, "-m", "bridge"], cwd=PROJECT_ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert bridge.stderr is not None
        for line in bridge.stderr:
            if "bridge: connected to" in line:
                break
        else:
            raise RuntimeError("the bridge stopped before it connected")
        consumer = _consumer(bootstrap, topic)
        try:
            say(f"bridge: {plan.messages:,} readings from {plan.publishers} devices, unpaced")
            per = plan.messages // plan.publishers
            started = time.time_ns()
            procs = _publishers(info, sites[: plan.publishers], per, 0.0)
            got = _receive(consumer, per * plan.publishers, 30.0)
            outputs = _outputs(procs)
            last = max(r for r, _ in got) if got else started
            figures["throughput"] = {
                "published": per * plan.publishers,
                "arrived": len(got),
                "seconds": round((last - started) / 1e9, 2),
                "readings_per_s": round(len(got) / max((last - started) / 1e9, 1e-9)),
                "publishers": outputs,
            }
            say(f"bridge: throughput {figures['throughput']['readings_per_s']:,}/s")
            count = int(plan.rate * plan.seconds)
            say(f"bridge: latency at {plan.rate:,.0f}/s for {plan.seconds:g} s")
            procs = _publishers(info, sites[:1], count, plan.rate)
            got = _receive(consumer, count, 30.0)
            outputs = _outputs(procs)
            ms = sorted((r - s) / 1e6 for r, s in got)
            figures["latency"] = {
                "rate": plan.rate,
                "published": count,
                "arrived": len(got),
                "ms": {
                    "p50": round(percentile(ms, 50), 1),
                    "p95": round(percentile(ms, 95), 1),
                    "p99": round(percentile(ms, 99), 1),
                    "max": round(ms[-1], 1) if ms else None,
                },
                "publishers": outputs,
            }
        finally:
            consumer.close()
    finally:
        try:
            bridge.terminate()
            try:
                bridge.wait(timeout=60)
            except subprocess.TimeoutExpired:
                bridge.kill()
                bridge.wait()
        finally:
            local_mosquitto.stop(info.data_dir)


def main(args: argparse.Namespace, say: Callable[[str], None], machine: dict[str, Any]) -> int:
    """``scripts/bench --bridge``: writes bridge.json to ``args.out``, prints the figures."""
    from bench.report import write_json

    plan = BridgePlan(
        messages=args.bridge_messages, publishers=args.bridge_publishers,
        rate=args.bridge_rate, seconds=args.bridge_seconds,
    )  # fmt: skip
    figures: dict[str, Any] = {
        "mode": "bridge",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "plan": asdict(plan),
    }
    with tempfile.TemporaryDirectory(prefix="sensorwatch-bridge-") as tmp:
        measure(plan, Path(tmp), figures, say)
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(figures, args.out / "bridge.json")
    put, lat = figures["throughput"], figures["latency"]
    print(
        f"bridge: {put['arrived']:,} of {put['published']:,} readings from "
        f"{plan.publishers} devices in {put['seconds']:.1f} s: {put['readings_per_s']:,}/s\n"
        f"bridge: at {plan.rate:,.0f}/s, publish -> Kafka consumer: p50 {lat['ms']['p50']} ms, "
        f"p95 {lat['ms']['p95']} ms, p99 {lat['ms']['p99']} ms, max {lat['ms']['max']} ms "
        f"({lat['arrived']:,} of {lat['published']:,})"
    )
    return 0 if put["arrived"] == put["published"] and lat["arrived"] == lat["published"] else 1
