"""``scripts/bench --bridge``: what MQTT in costs (issue 70): readings published with QoS 1
by devices into a local Mosquitto, through ``python -m bridge`` into a Kafka topic.

Two figures, on one broker, bridge and topic:

- **throughput**: ``publishers`` devices (bench/mqtt_devices.py, compiled: one process,
  a connection each) publish ``messages`` readings in all as fast as the broker
  acknowledges them; readings/s from the first publish to the last reading's arrival in
  Kafka (a consumer counts them), and each process' CPU per reading;
- **latency**: one device publishes at ``rate`` readings/s for ``seconds``; each
  reading's time from its publish to a Kafka consumer's receipt (both on this machine's
  wall clock): p50, p95, p99, max. The bridge acknowledges a reading to MQTT only once
  Kafka confirmed it (bridge/engine/book.go), so this is the at-least-once path's latency.

With ``job`` (``--bridge-job``) the job runs too, every query on (the real-time path
included), reading the bridge's topic: both figures are then taken with it on, and the
latency run's devices also publish a hot reading every ``hot_every`` readings, each from a
sensor of its own; its time from the publish to the real-time path's alert on the alerts
topic (the alert's Kafka time) is the third figure, ``to_alerts``; the latency run starts
once the job's lake path has taken in the throughput run's readings. Without ``job``,
``scripts/bench`` measures the job from Kafka on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer
from prometheus_client.parser import text_string_to_metric_families
from pydantic import Field

from bench import mqtt_devices
from bench.report import OutputOptions
from bench.stats import percentile
from conf.paths import PROJECT_ROOT
from conf.settings.base import env_name
from contract.devices import HEADER_RECEIVED_AT
from contract.times import parse_instant, to_epoch_ms
from local_stack import mosquitto as local_mosquitto
from local_stack.server import free_port

# How long the latency run waits for the job's lake path to take in the throughput run's
# readings (100,000 took 57 to 103 s on 2 cores).
CATCH_UP_SECONDS = 600.0


@dataclass(frozen=True)
class BridgePlan:
    """What one ``--bridge`` run measures."""

    messages: int = 200_000
    publishers: int = 4
    rate: float = 5_000.0
    seconds: float = 30.0
    job: bool = False
    hot_every: int = 50  # with the job: 100 alerts/s at 5,000 readings/s


def _consumer(bootstrap: str, topic: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-bridge-{time.monotonic_ns()}",
            # The topic is the run's own, new and empty: from its start, every reading is
            # seen. ("latest" is resolved at the first fetch, after joining: readings
            # the devices publish within milliseconds of the start would be skipped.)
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
        }
    )
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)  # joined: the first phase's timing starts with the consumer in
    return consumer


def _cpu(proc: psutil.Process) -> tuple[float, float]:
    """CPU seconds in user and in system mode ``proc`` and its threads have used so far."""
    times = proc.cpu_times()
    return times.user, times.system


def _forward_histogram(url: str) -> list[tuple[float, float]]:
    """The bridge's forward latency histogram now: (upper bound, cumulative count) pairs
    of ``sensorwatch_bridge_forward_seconds`` on its /metrics."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    buckets = []
    for family in text_string_to_metric_families(text):
        if family.name == "sensorwatch_bridge_forward_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    buckets.append((float(sample.labels["le"]), sample.value))
    return sorted(buckets)


def _bucket_quantile(
    q: float, before: list[tuple[float, float]], after: list[tuple[float, float]]
) -> float | None:
    """The ``q`` quantile (0 to 1) of what was observed between two scrapes of a histogram,
    interpolated within its bucket as Prometheus' histogram_quantile does."""  # fmt: skip
    counts = [(bound, a - b) for (bound, a), (_, b) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0
    if not total:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, cumulative in counts:
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return lower


def _receive(consumer: Consumer, expected: int, timeout: float) -> list[tuple[float, int]]:
    """(receipt, sent) wall-clock nanoseconds of ``expected`` readings, or those that came
    before ``timeout`` seconds without one."""
    return [(receipt, sent) for receipt, sent, _ in _receive_timed(consumer, expected, timeout)]


def _receive_timed(
    consumer: Consumer, expected: int, timeout: float
) -> list[tuple[float, int, int | None]]:
    """As :func:`_receive`, with the bridge's arrival (its header, nanoseconds to the
    millisecond) of each reading."""
    got: list[tuple[float, int, int | None]] = []
    quiet_since = time.monotonic()
    while len(got) < expected and time.monotonic() - quiet_since < timeout:
        # poll, not consume(n, timeout): consume waits for n records or the whole timeout,
        # which would add up to that timeout to every reading's time.
        record = consumer.poll(0.1)
        if record is None or record.error():
            continue
        now = time.time_ns()
        arrived = dict(record.headers() or ()).get(HEADER_RECEIVED_AT)
        got.append((now, json.loads(record.value())["bench_sent_ns"], _ns(arrived)))
        quiet_since = time.monotonic()
    return got


def _ns(stamp: bytes | None) -> int | None:
    """An ISO-8601 instant of a header as epoch nanoseconds."""
    return to_epoch_ms(parse_instant(stamp.decode())) * 1_000_000 if stamp else None


def measure(
    plan: BridgePlan, workdir: Path, figures: dict[str, Any], say: Callable[[str], None]
) -> None:
    """Run the plan on a local broker of its own, filling ``figures``."""
    from bench.env import local_broker

    with local_broker(workdir / "kafka") as broker:
        if not plan.job:
            measure_on(broker.bootstrap, plan, workdir, figures, say)
            return
        with job_spark(workdir, say) as spark:
            measure_on(broker.bootstrap, plan, workdir, figures, say, spark)


def caught_up(progress: list[dict[str, Any]], idle: list[dict[str, str]], since: datetime) -> bool:
    """Whether the lake path had taken in every reading that came before ``since``, by its
    queries' events (as Spark writes them, oldest first): after ``since``, ingest had a
    batch without rows or was idle, and the windows query, which reads what ingest wrote,
    was too after that."""
    from jobs.queries.ingest import QUERY as INGEST
    from jobs.queries.windows import QUERY as WINDOWS

    names = {event["id"]: event.get("name") for event in progress}
    quiet = sorted(
        [(parse_instant(e["timestamp"]), e.get("name"))
         for e in progress if e.get("numInputRows") == 0]
        + [(parse_instant(e["timestamp"]), names.get(e["id"])) for e in idle],
        key=lambda entry: entry[0],
    )  # fmt: skip
    ingest_quiet = next((at for at, name in quiet if name == INGEST and at > since), None)
    return ingest_quiet is not None and any(
        name == WINDOWS and at > ingest_quiet for at, name in quiet
    )


class RunningJob:
    """The job (every query, the real-time path on) reading ``topic``, in this process;
    its alerts topic read on a thread: the Kafka time of each sensor's first alert."""

    def __init__(self, bootstrap: str, topic: str, workdir: Path, spark: Any) -> None:
        from bench.env import ProgressRecorder

        self.bootstrap, self.topic, self.spark = bootstrap, topic, spark
        self.alerts_topic = f"{topic}-alerts"
        self.lake = workdir / "lake"
        self.progress = ProgressRecorder()
        self.first_alert: dict[str, float] = {}  # sensor_id -> epoch seconds
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, timeout: float = 180.0) -> None:
        """Start the job and the reader; return once the job's first batch is done."""
        from common.waiting import poll_until
        from conf.settings.base import SettingsFile, load_settings
        from conf.settings.job import JobSettings
        from jobs.stream import DEFAULT_CONFIG, run

        settings = load_settings(
            JobSettings,
            {"bootstrap_servers": self.bootstrap, "topic": self.topic, "lake": self.lake,
             "trigger": "2 seconds", "alerts_topic": self.alerts_topic, "realtime": True},
            SettingsFile(DEFAULT_CONFIG),
        )  # fmt: skip
        self.spark.streams.addListener(self.progress)

        def job() -> None:
            try:
                run(settings, self.spark, should_stop=self._stop.is_set)
            except BaseException as exc:  # reported by start and stop
                self.failures.append(exc)

        self._threads = [
            threading.Thread(target=job, name="bench-bridge-job", daemon=True),
            threading.Thread(target=self._read, name="bench-bridge-alerts", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        started = lambda: self.progress.latest("ingest") is not None or bool(self.failures)  # noqa: E731
        poll_until(started, timeout, 0.2)
        if self.progress.latest("ingest") is None:
            raise RuntimeError(f"the job did not start: {self.failures or 'timeout'}")

    def _read(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-{self.alerts_topic}",
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,  # the job makes the topic
                "fetch.wait.max.ms": 5,
                "log_level": 0,
            }
        )
        consumer.subscribe([self.alerts_topic])
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is None or message.error() is not None:
                    continue
                sensor = json.loads(message.value())["sensor_id"]
                self.first_alert.setdefault(sensor, message.timestamp()[1] / 1000)
        finally:
            consumer.close()

    def to_alerts(self, hot: Path) -> dict[str, Any]:
        """Each hot reading's time from its publish (the devices' logs next to ``hot``)
        to its alert: p50, p95, p99, max in ms, and how many never came."""
        sent: dict[str, float] = {}
        for log in hot.parent.glob(f"{hot.name}.*.log"):
            for line in log.read_text(encoding="utf-8").splitlines():
                sensor, ns = line.split()
                sent[sensor] = int(ns) / 1e9
        ms = sorted(
            (self.first_alert[s] - t) * 1000 for s, t in sent.items() if s in self.first_alert
        )
        return {
            "hot_readings": len(sent),
            "alerts": len(ms),
            "missing": len(sent) - len(ms),
            "ms": {f"p{q}": round(percentile(ms, q), 1) if ms else None for q in (50, 95, 99)}
            | {"max": round(ms[-1], 1) if ms else None},
        }

    def wait_caught_up(self, since: datetime, timeout: float) -> float | None:
        """Until the lake path has taken in everything that came before ``since``
        (:func:`caught_up`); the seconds that took, or None after ``timeout`` seconds."""
        from common.waiting import poll_until

        started = time.monotonic()
        done = poll_until(lambda: caught_up(*self.progress.kept(), since), timeout, 0.5)
        return round(time.monotonic() - started, 1) if done else None

    def wait_for(self, sensors: int, timeout: float) -> None:
        """Until ``sensors`` sensors have had an alert, or ``timeout`` seconds."""
        from common.waiting import poll_until

        poll_until(lambda: len(self.first_alert) >= sensors, timeout, 0.2)

    def stop(self) -> None:
        """Stop the job between batches and the reader."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=300)
        if self.failures:
            raise RuntimeError(f"the job failed: {self.failures[0]}")


@contextmanager
def job_spark(workdir: Path, say: Callable[[str], None]) -> Iterator[Any]:
    """Spark in this process, for the job of ``--bridge-job``."""
    from jobs.spark.spark_session import build_spark_session

    say("bridge: starting Spark for the job")
    spark = build_spark_session(
        "sensorwatch-bench-bridge", warehouse_dir=workdir / "warehouse", master="local[8]"
    )
    try:
        yield spark
    finally:
        spark.stop()


def measure_on(
    bootstrap: str,
    plan: BridgePlan,
    workdir: Path,
    figures: dict[str, Any],
    say: Callable[[str], None],
    spark: Any = None,
) -> None:
    """Run the plan against the Kafka broker at ``bootstrap`` (a topic of its own), with a
    Mosquitto and a bridge of its own under ``workdir``; with ``spark``, the job
    (:class:`RunningJob`) started on that topic first."""
    from bench.env import new_topic

    mqtt_devices.ensure_built(say)
    sites = [f"bench-site-{n}" for n in range(max(plan.publishers, 1))]
    topic = new_topic(bootstrap, "bridge", 6)
    running = None
    if spark is not None:
        say("bridge: starting the job (every query, the real-time path on)")
        running = RunningJob(bootstrap, topic, workdir, spark)
        running.start()
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
        metrics_url = ""
        for line in bridge.stderr:
            if line.startswith("bridge: metrics at "):
                metrics_url = line.removeprefix("bridge: metrics at ").strip()
            if "bridge: connected to" in line:
                break
        else:
            raise RuntimeError("the bridge stopped before it connected")
        consumer = _consumer(bootstrap, topic)
        try:
            say(f"bridge: {plan.messages:,} readings from {plan.publishers} devices, unpaced")
            per = plan.messages // plan.publishers
            # The bridge's engine is a child process: its CPU is the bridge's work.
            shell = psutil.Process(bridge.pid)
            watched = {"bridge": shell, "mosquitto": psutil.Process(info.pid)}
            for child in shell.children():
                watched["bridge engine"] = child
            cpu_before = {name: _cpu(proc) for name, proc in watched.items()}
            started = time.time_ns()
            devices = mqtt_devices.start(info, sites[: plan.publishers], per, 0.0)
            got = _receive(consumer, per * plan.publishers, 30.0)
            cpu = {
                name: [now - then for now, then in zip(_cpu(proc), cpu_before[name], strict=True)]
                for name, proc in watched.items()
            }
            outputs = mqtt_devices.results(devices)
            if outputs.cpu_seconds is not None:
                cpu["bench devices"] = list(outputs.cpu_seconds)
            last = max(r for r, _ in got) if got else started
            figures["throughput"] = {
                "published": per * plan.publishers,
                "arrived": len(got),
                "seconds": round((last - started) / 1e9, 2),
                "readings_per_s": round(len(got) / max((last - started) / 1e9, 1e-9)),
                # CPU time per reading, whatever the others on the cores took: what bounds
                # each process' pace on a core of its own.
                "cpu_us_per_reading": {
                    name: {
                        mode: round(seconds * 1e6 / max(len(got), 1), 1)
                        for mode, seconds in zip(("user", "system"), spent, strict=True)
                    }
                    for name, spent in cpu.items()
                },
                "publishers": [asdict(r) for r in outputs.devices],
            }
            per_reading = figures["throughput"]["cpu_us_per_reading"]
            say(
                f"bridge: throughput {figures['throughput']['readings_per_s']:,}/s; CPU per "
                "reading (user + system): "
                + ", ".join(
                    f"{name} {modes['user']} + {modes['system']} us"
                    for name, modes in per_reading.items()
                )
            )
            if running is not None:
                # The latency is the job's at a steady rate: not while its lake path
                # still works through the burst (on two cores, that would fill them).
                say("bridge: waiting for the job's lake path to take in the burst")
                figures["job_caught_up_after_s"] = running.wait_caught_up(datetime.now(UTC), 600.0)
            count = int(plan.rate * plan.seconds)
            say(f"bridge: latency at {plan.rate:,.0f}/s for {plan.seconds:g} s")
            hot = (plan.hot_every, workdir / "hot") if running is not None else None
            forward_before = _forward_histogram(metrics_url) if metrics_url else []
            devices = mqtt_devices.start(info, sites[:1], count, plan.rate, hot)
            timed = _receive_timed(consumer, count, 30.0)
            got = [(receipt, sent) for receipt, sent, _ in timed]
            outputs = mqtt_devices.results(devices)
            # Publish to the bridge's arrival: the device, Mosquitto and the bridge's reading
            # (its header has milliseconds).
            arrivals = sorted((a - s) / 1e6 for _, s, a in timed if a is not None)
            if arrivals:
                figures["publish_to_bridge_ms"] = {
                    name: round(percentile(arrivals, q), 1)
                    for name, q in (("p50", 50), ("p95", 95), ("p99", 99))
                }
            if forward_before:
                # The bridge's own part: its arrival to Kafka's confirmation, from its
                # histogram (so to the resolution of its buckets).
                forward_after = _forward_histogram(metrics_url)
                forward = {
                    name: _bucket_quantile(q, forward_before, forward_after)
                    for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
                }
                figures["bridge_forward_ms"] = {
                    name: None if value is None else round(1000 * value, 1)
                    for name, value in forward.items()
                }
            if running is not None:
                running.wait_for(count // plan.hot_every, 30.0)
                figures["to_alerts"] = running.to_alerts(workdir / "hot")
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
                "publishers": [asdict(r) for r in outputs.devices],
            }
        finally:
            consumer.close()
    finally:
        try:
            if running is not None:
                running.stop()
            bridge.terminate()
            try:
                bridge.wait(timeout=60)
            except subprocess.TimeoutExpired:
                bridge.kill()
                bridge.wait()
        finally:
            local_mosquitto.stop(info.data_dir)


class BridgeOptions(OutputOptions):
    """The flags of ``scripts/bench --bridge``."""

    bridge: bool = Field(
        False,
        description="run it instead of the rest (issue 70; a minute or two): devices publish "
        "with QoS 1 into a local Mosquitto, python -m bridge forwards into Kafka: readings/s "
        "unpaced, and each reading's time from publish to a Kafka consumer at a steady rate. "
        "Writes bridge.json to --out",
    )
    bridge_messages: int = Field(200_000, ge=1, description="readings published unpaced, in all")
    bridge_publishers: int = Field(
        4, ge=1, description="devices publishing them, each a connection"
    )
    bridge_rate: float = Field(5_000.0, gt=0, description="the steady rate of the latency run")
    bridge_seconds: float = Field(30.0, gt=0, description="how long the latency run publishes")
    bridge_job: bool = Field(
        False,
        description="with the job running on the bridge's topic, every query on: also each hot "
        "reading's time from MQTT publish to its alert on the alerts topic",
    )


def main(args: BridgeOptions, say: Callable[[str], None], machine: dict[str, Any]) -> int:
    """``scripts/bench --bridge``: writes bridge.json to ``args.out``, prints the figures."""
    from bench.report import write_json

    plan = BridgePlan(
        messages=args.bridge_messages, publishers=args.bridge_publishers,
        rate=args.bridge_rate, seconds=args.bridge_seconds, job=args.bridge_job,
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
    if arrive := figures.get("publish_to_bridge_ms"):
        print(
            f"bridge: publish -> the bridge's arrival (its header): p50 {arrive['p50']} ms, "
            f"p95 {arrive['p95']} ms, p99 {arrive['p99']} ms"
        )
    if forward := figures.get("bridge_forward_ms"):
        print(
            f"bridge: its own part, arrival -> Kafka's confirmation (its histogram): p50 "
            f"{forward['p50']} ms, p95 {forward['p95']} ms, p99 {forward['p99']} ms"
        )
    ok = True
    if "job_caught_up_after_s" in figures:
        waited = figures["job_caught_up_after_s"]
        print(
            f"bridge: the job's lake path took in the throughput run's readings in {waited} s"
            if waited is not None
            else "bridge: the job's lake path had not taken in the throughput run's readings "
            f"after {CATCH_UP_SECONDS:g} s: the latency run ran beside it"
        )
    if "to_alerts" in figures:
        to = figures["to_alerts"]
        print(
            f"bridge: with the job on, MQTT publish -> alert on the alerts topic: p50 "
            f"{to['ms']['p50']} ms, p95 {to['ms']['p95']} ms, p99 {to['ms']['p99']} ms, max "
            f"{to['ms']['max']} ms ({to['alerts']:,} of {to['hot_readings']:,} hot readings)"
        )
        ok = to["missing"] == 0
    return (
        0 if ok and put["arrived"] == put["published"] and lat["arrived"] == lat["published"] else 1
    )
