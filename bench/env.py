"""What the measurements run against: the local broker, topics, the producer process,
memory sampling and the streaming queries' progress."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.streaming import StreamingQueryListener

from bench.processes import answers, end_process, wait_for
from common.waiting import poll_until
from conf.paths import PROJECT_ROOT
from contract.times import parse_instant
from local_stack import alertmanager as local_alertmanager
from local_stack import kafka as local_kafka
from local_stack.server import free_port
from topics.admin import create_topic

_SUMMARY = re.compile(r"done: ([\d,]+) delivered, ([\d,]+) failed in ([\d.]+)s \(([\d,]+) msg/s\)")


@contextmanager
def local_broker(data_dir: Path) -> Iterator[local_kafka.BrokerInfo]:
    """A local broker on a free port in ``data_dir``, stopped on the way out (also on
    Ctrl-C: the broker runs in its own session, so only this stops it)."""
    info = local_kafka.start(data_dir, free_port())
    try:
        yield info
    finally:
        local_kafka.stop(data_dir)


class AlertmanagerWatch:
    """A local Alertmanager, the notifier (``python -m ops.notify``) syncing ``lake`` into
    it every second, and a poller that notes when each incident first shows as active in
    Alertmanager's API (wall clock, UTC). Use as a context manager."""

    def __init__(
        self,
        workdir: Path,
        lake: str | Path,
        lane: tuple[str, str] | None = None,
        poll_s: float = 0.2,
    ) -> None:
        """``lane``: (bootstrap servers, alerts topic) of the real-time path, which the
        notifier then posts from as well; None: the incidents only."""
        self.data_dir, self.lake, self.poll_s = workdir / "alertmanager", lake, poll_s
        self.lane = lane
        self.first_seen: dict[str, datetime] = {}
        self._stop = threading.Event()
        self._notifier: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._poll, name="bench-am-poll", daemon=True)
        self.url = ""

    def __enter__(self) -> AlertmanagerWatch:
        self.url = local_alertmanager.start(self.data_dir, free_port()).url
        lane = (
            ["--bootstrap-servers", self.lane[0], "--alerts-topic", self.lane[1]]
            if self.lane
            else ["--realtime-alerts", "false"]
        )
        self._notifier = subprocess.Popen(
            [sys.executable, "-m", "ops.notify", "--lake", str(self.lake),
             "--alertmanager-url", self.url, "--interval", "1", *lane],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._thread.start()
        return self

    @property
    def notifier_pid(self) -> int:
        """The notifier's process id (left out of the job's memory and CPU)."""
        assert self._notifier is not None, "not entered"
        return self._notifier.pid

    def _poll(self) -> None:
        while not self._stop.is_set():
            with suppress(OSError, ValueError):
                request = f"{self.url}/api/v2/alerts?active=true&silenced=false&inhibited=false"
                with urllib.request.urlopen(request, timeout=5) as answer:
                    alerts = json.loads(answer.read())
                now = datetime.now(UTC)
                for alert in alerts:
                    incident = alert.get("labels", {}).get("incident_id")
                    if incident and alert.get("status", {}).get("state") == "active":
                        self.first_seen.setdefault(incident, now)
            self._stop.wait(self.poll_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        end_process(self._notifier)
        local_alertmanager.stop(self.data_dir)


class AlertsTopicListener:
    """Reads the real-time path's topic on a thread: per message, its Kafka time minus
    the reading's (``reading_at``), in seconds; the alert_ids seen."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.latencies: list[float] = []
        self.sent_at: list[float] = []  # each message's Kafka time (epoch seconds)
        self.alert_ids: set[str] = set()
        self._stop = threading.Event()
        self._last = time.monotonic()
        self._thread = threading.Thread(target=self._read, name="bench-alerts", daemon=True)

    def start(self) -> None:
        """Start reading (from the topic's beginning: the job makes it)."""
        self._thread.start()

    def _read(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"bench-{self.topic}",
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,  # the topic appears with the job
                "log_level": 0,
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for message in consumer.consume(1000, timeout=0.2):
                    if message.error() is not None:
                        continue
                    value = json.loads(message.value())
                    sent = message.timestamp()[1] / 1000
                    reading = parse_instant(value["reading_at"]).timestamp()
                    self.latencies.append(sent - reading)
                    self.sent_at.append(sent)
                    self.alert_ids.add(value["alert_id"])
                    self._last = time.monotonic()
        finally:
            consumer.close()

    def stop(self, quiet_s: float = 2.0, timeout: float = 30.0) -> None:
        """Stop reading once nothing new came for ``quiet_s`` (the last messages of a
        stopped job are in by then), or after ``timeout``."""
        poll_until(lambda: time.monotonic() - self._last >= quiet_s, timeout, 0.2)
        self._stop.set()
        self._thread.join(timeout=30)


class DashboardWatch:
    """The dashboard (``python -m ops.dashboard``) following the real-time path's topic,
    and a page's stream of it (``/api/alerts/live``) read on a thread: per new alert, the
    moment it reached the page minus the reading's Kafka time (``reading_at``), in
    seconds. Use as a context manager."""

    def __init__(self, lake: str | Path, bootstrap: str, topic: str) -> None:
        self.lake, self.bootstrap, self.topic = lake, bootstrap, topic
        self.latencies: list[float] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._read, name="bench-dashboard", daemon=True)
        self.url = ""

    def __enter__(self) -> DashboardWatch:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ops.dashboard", "--lake", str(self.lake), "--port", str(port),
             "--bootstrap-servers", self.bootstrap, "--alerts-topic", self.topic,
             "--realtime-alerts", "true"],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        proc = self.proc

        def alive() -> None:
            if proc.poll() is not None:
                raise RuntimeError(f"the dashboard ended (status {proc.returncode})")

        wait_for("the dashboard", lambda: answers(self.url + "/healthz"), 60, alive)
        self._thread.start()
        return self

    def _read(self) -> None:
        event = ""
        with (
            suppress(OSError),
            urllib.request.urlopen(self.url + "/api/alerts/live", timeout=60) as stream,
        ):
            for raw in stream:  # the stream ends when the dashboard stops
                line = raw.decode("utf-8").rstrip("\n")
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "alert":
                    shown = time.time()
                    alert = json.loads(line.removeprefix("data: "))
                    self.latencies.append(shown - parse_instant(alert["reading_at"]).timestamp())

    def __exit__(self, *exc: object) -> None:
        end_process(self.proc)  # its page's stream ends with it
        self._thread.join(timeout=10)


def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """A fresh, uniquely named topic, ready to use."""
    name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, partitions)
    return name


def topic_size(bootstrap: str, topic: str, partitions: int) -> int:
    """Messages in the topic now (sum of the partitions' high watermarks)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-size"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        )
    finally:
        consumer.close()


@dataclass(frozen=True)
class ProducerRun:
    """What ``python -m producer`` reported."""

    delivered: int
    failed: int
    seconds: float
    rate: float
    wall_seconds: float


def parse_summary(stderr: str) -> tuple[int, int, float, float]:
    """(delivered, failed, seconds, msg/s) from the producer's final summary line.

    Raises:
        ValueError: no summary line (the producer failed before sending).
    """
    found = _SUMMARY.search(stderr)
    if found is None:
        raise ValueError(f"no summary in the producer's output:\n{stderr[-2000:]}")
    delivered, failed, seconds, per_second = found.groups()
    return (
        int(delivered.replace(",", "")),
        int(failed.replace(",", "")),
        float(seconds),
        float(per_second.replace(",", "")),
    )


class Producer:
    """``python -m producer`` as a child process, as a user runs it."""

    def __init__(self, bootstrap: str, topic: str, *args: object) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "producer",
                "--bootstrap-servers",
                bootstrap,
                "--topic",
                topic,
                "--progress-interval",
                "3600",
                *map(str, args),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        )

    @property
    def pid(self) -> int:
        """The process id (the memory sampler leaves it out)."""
        return self.proc.pid

    def finish(self, timeout: float = 600) -> ProducerRun:
        """Wait for the summary.

        Raises:
            RuntimeError: the producer failed or lost messages.
        """
        _, stderr = self.proc.communicate(timeout=timeout)
        wall = time.monotonic() - self.started
        if self.proc.returncode != 0:
            raise RuntimeError(f"producer exited {self.proc.returncode}:\n{stderr[-2000:]}")
        return ProducerRun(*parse_summary(stderr), wall_seconds=wall)

    def stop(self) -> None:
        """Kill it if it still runs (an interrupted benchmark)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def produce(bootstrap: str, topic: str, *args: object) -> ProducerRun:
    """Run the producer to completion."""
    producer = Producer(bootstrap, topic, *args)
    try:
        return producer.finish()
    finally:
        producer.stop()


def _resident(process: psutil.Process) -> int:
    """Bytes of memory a process holds, its share of shared pages counted once (PSS).

    Spark's Python workers are forked from one daemon and share most of their pages, which
    a sum of RSS counts once per worker. RSS where the system does not report PSS.
    """
    try:
        return int(process.memory_full_info().pss)
    except (AttributeError, psutil.AccessDenied):
        return int(process.memory_info().rss)


class MemorySampler:
    """Peak resident memory of this process and its children (Spark's JVM and Python
    workers), sampled in a background thread; the broker and producers are left out."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.excluded: set[int] = set()
        self.peak_bytes = 0
        self._phase_peak = 0
        self._phase_parts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-memory", daemon=True)

    def exclude(self, pid: int) -> None:
        """Leave out ``pid`` and its descendants."""
        self.excluded.add(pid)

    def sample(self) -> dict[str, int]:
        """Memory held now (PSS): this process, Java children (Spark's JVM), other
        children (Spark's Python workers)."""
        me = psutil.Process()
        skip: set[int] = set()
        children = me.children(recursive=True)
        for child in children:
            if child.pid in self.excluded:
                skip.add(child.pid)
                with suppress(psutil.Error):  # it may just have ended
                    skip.update(p.pid for p in child.children(recursive=True))
        parts = {"driver_python": _resident(me), "jvm": 0, "python_workers": 0}
        for child in children:
            if child.pid in skip:
                continue
            try:
                kind = "jvm" if child.name() == "java" else "python_workers"
                parts[kind] += _resident(child)
            except psutil.Error:
                continue  # ended between listing and reading
        return parts

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by this process and its children that are
        not left out (Spark's JVM and its Python workers, ended ones included)."""
        me = psutil.Process()
        used = me.cpu_times()
        total = used.user + used.system  # not its ended children: the producers
        for child in me.children():
            if child.pid in self.excluded:
                continue
            with suppress(psutil.Error):  # it may just have ended
                for process in (child, *child.children(recursive=True)):
                    times = process.cpu_times()
                    total += times.user + times.system + times.children_user
                    total += times.children_system
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            parts = self.sample()
            now = sum(parts.values())
            self.peak_bytes = max(self.peak_bytes, now)
            if now > self._phase_peak:
                self._phase_peak, self._phase_parts = now, parts

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout=5)

    def phase(self) -> None:
        """Start a new phase: :meth:`phase_peak_mb` reports from here on."""
        self._phase_parts = self.sample()
        self._phase_peak = sum(self._phase_parts.values())

    def phase_peak_mb(self) -> float:
        """Peak since the last :meth:`phase`, in MiB."""
        return round(self._phase_peak / 2**20, 1)

    def phase_peak_parts_mb(self) -> dict[str, float]:
        """The parts of that peak (driver_python, jvm, python_workers), in MiB."""
        return {k: round(v / 2**20, 1) for k, v in self._phase_parts.items()}


class ProgressRecorder(StreamingQueryListener):
    """Keeps every progress event of every query (as JSON objects) for the profile."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        # Spark's word that a query waits for new data (instead of a progress without
        # rows): {"id": the query's id, "timestamp": ISO-8601}.
        self.idle: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        """Nothing to keep."""

    def onQueryProgress(self, event: Any) -> None:
        """Keep the progress."""
        with self._lock:
            self.events.append(json.loads(event.progress.json))

    def onQueryIdle(self, event: Any) -> None:
        """Keep when the query was idle."""
        with self._lock:
            self.idle.append({"id": str(event.id), "timestamp": event.timestamp})

    def onQueryTerminated(self, event: Any) -> None:
        """Nothing to keep."""

    def latest(self, query: str) -> dict[str, Any] | None:
        """The newest progress of the query named ``query``, if any."""
        with self._lock:
            for event in reversed(self.events):
                if event.get("name") == query:
                    return event
        return None

    def kept(self) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        """Every progress and idle event kept so far, oldest first (copies)."""
        with self._lock:
            return list(self.events), list(self.idle)

    def take(self) -> list[dict[str, Any]]:
        """The events since the last call."""
        with self._lock:
            events, self.events = self.events, []
        return events
