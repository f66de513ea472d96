"""scripts/run-local as a newcomer meets it (issue 14): broker, producer, job, dashboard,
Alertmanager and notifier under one command, an alert printed, every printed URL
answering, and Ctrl-C stopping everything quietly with a summary. How soon the first alert
comes (the README says within a minute) is a benchmark figure: `scripts/bench` part
first-alert. ``--mqtt`` (issue 70): the same demo with the fleet publishing to Mosquitto
as devices and the bridge bringing the readings into Kafka.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import pytest
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT
from contract.devices import HEADER_MQTT_TOPIC
from local_stack.server import free_port
from tests.support.kafka_io import consume_messages
from tests.support.polling import STUCK, wait_until
from tests.support.processes import Running, without_settings

URL = re.compile(r"https?://[^\s)\"'<>,]+")
# Words that must never reach a newcomer's terminal, as the held-out check reads them.
FORBIDDEN = ("Traceback", "Exception", " WARN ")

# The whole demo (broker, job, and the rest): not for the edit-test loop (--quick).
pytestmark = [pytest.mark.jvm, pytest.mark.slow]


def is_job_start(line: str) -> bool:
    """The job's first line: ``jobs.stream: <topic> at <broker> -> <lake> (<trigger>)``."""
    return line.startswith("jobs.stream: ") and " -> " in line


def is_alert(line: str) -> bool:
    """A line the job prints per alert or per incident opening."""
    return line.startswith("jobs.stream: ALERT ") or line.startswith("jobs.stream: INCIDENT ")


def seen(running: Running, matches: Callable[[str], bool], timeout: float) -> str:
    """The first output line, printed already or within ``timeout``, that ``matches``."""
    earlier = [line for line in running.lines if matches(line)]
    return earlier[0] if earlier else running.wait_for_line(matches, timeout)


def noisy_lines(lines: list[str]) -> list[str]:
    """Lines a quiet demo never prints: stack traces, exceptions, log WARN lines (Spark's
    log4j ``HH:MM:SS WARN Logger: ...``) and the JVM's own ``WARNING:`` lines."""
    return [
        line
        for line in lines
        if any(word in line for word in FORBIDDEN) or line.startswith("WARNING:")
    ]


def scraped(prometheus: str, job: str) -> bool:
    """True once Prometheus' last scrape of ``job`` succeeded."""
    with urllib.request.urlopen(f"{prometheus}/api/v1/targets", timeout=10) as reply:
        active = json.loads(reply.read())["data"]["activeTargets"]
    return any(t["labels"]["job"] == job and t["health"] == "up" for t in active)


def stop_servers(data: Path) -> list[str]:
    """Stop the local servers run-local started under ``data`` (each in a session of its
    own, so killing run-local's group leaves them): what a failed test would leave
    running. Returns the ones that were still running."""
    from local_stack import alertmanager, kafka, mosquitto, prometheus

    servers = {"kafka": kafka, "alertmanager": alertmanager, "prometheus": prometheus,
               "mosquitto": mosquitto}  # fmt: skip
    return [name for name, module in servers.items() if module.stop(data / name)]


def test_run_local_demo_alerts_and_stops_quietly_on_ctrl_c(tmp_path, monkeypatch) -> None:
    # The demo as run-local's defaults make it: no SENSORWATCH_* setting of the caller's,
    # except the test run's own (Spark's scratch in the run's folder, not var/scratch).
    kept = without_settings(os.environ)
    for key in [k for k in os.environ if k not in kept]:
        monkeypatch.delenv(key)
    ports = {
        "SENSORWATCH_LOCAL_PORT": free_port(),
        "SENSORWATCH_DASHBOARD_PORT": free_port(),
        "SENSORWATCH_ALERTMANAGER_PORT": free_port(),
        "SENSORWATCH_PROMETHEUS_PORT": free_port(),
        "SENSORWATCH_JOB_METRICS_PORT": free_port(),
        "SENSORWATCH_NOTIFIER_METRICS_PORT": free_port(),
        "SENSORWATCH_PRODUCER_METRICS_PORT": free_port(),
    }
    print("run-local ports:", ports)  # shown with the output when the test fails
    with_alertmanager = bool(
        shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    )
    with_prometheus = bool(shutil.which("prometheus"))
    running = Running(
        [str(PROJECT_ROOT / "scripts" / "run-local")],
        env={"SENSORWATCH_LOCAL_DIR": str(tmp_path), **{k: str(v) for k, v in ports.items()}},
    )
    try:
        # Set-up (already done here; minutes on a fresh clone), Alertmanager, the broker.
        running.wait_for_line(is_job_start, STUCK, "the job's start")
        job_started = time.monotonic()
        # How soon is a benchmark figure (docs/benchmarks.md); this deadline means stuck.
        alert = running.wait_for_line(is_alert, STUCK, "the first alert line")
        print(f"first alert {time.monotonic() - job_started:.1f} s after the job's start: {alert}")

        dashboard_url = f"http://127.0.0.1:{ports['SENSORWATCH_DASHBOARD_PORT']}"
        seen(running, lambda line: line == f"run-local: dashboard {dashboard_url}", STUCK)
        printed = {url.rstrip("."): line for line in running.lines for url in URL.findall(line)}
        urls = sorted(printed)
        print("URLs printed:", urls)
        assert dashboard_url in urls
        if with_alertmanager:
            assert f"http://127.0.0.1:{ports['SENSORWATCH_ALERTMANAGER_PORT']}" in urls
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=10) as reply:
                    assert reply.status == 200, url
            except urllib.error.HTTPError as exc:
                raise AssertionError(
                    f"{url} answers {exc.code}, printed in: {printed[url]}"
                ) from None
        if with_prometheus:
            prometheus = f"http://127.0.0.1:{ports['SENSORWATCH_PROMETHEUS_PORT']}"
            assert prometheus in urls
            for port in ("JOB", "PRODUCER") + (("NOTIFIER",) if with_alertmanager else ()):
                metrics = ports[f"SENSORWATCH_{port}_METRICS_PORT"]
                assert f"http://127.0.0.1:{metrics}/metrics" in urls
            wait_until(
                lambda: scraped(prometheus, "sensorwatch-job"), STUCK,
                "Prometheus scraping the job's /metrics",
            )  # fmt: skip
            # The default demo runs no bridge: the pipeline view has none to show.
            view_url = f"{dashboard_url}/api/pipeline/prometheus"
            with urllib.request.urlopen(view_url, timeout=10) as reply:
                view = json.loads(reply.read())
            assert view["error"] is None and view["bridge"] is None, view

        # Both queries running (the windows query's first batch), then Ctrl-C.
        seen(running, lambda line: line.startswith("jobs.stream: windows #"), STUCK)
        broker_pid = json.loads((tmp_path / "kafka" / "broker.json").read_text())["pid"]
        prometheus_pid = None
        if with_prometheus:
            state = json.loads((tmp_path / "prometheus" / "prometheus.json").read_text())
            prometheus_pid = state["pid"]
        alertmanager_pid = None
        if with_alertmanager:
            state = json.loads((tmp_path / "alertmanager" / "alertmanager.json").read_text())
            alertmanager_pid = state["pid"]
        children = psutil.Process(running.proc.pid).children(recursive=True)
        before_stop = len(running.lines)

        running.interrupt_group()  # Ctrl-C in a terminal: SIGINT to the process group

        assert running.finish(timeout=120) == 0, "\n".join(running.lines[-40:])
    finally:
        running.kill()
        left = stop_servers(tmp_path)
    assert left == [], f"run-local left {left} running"

    output = running.lines
    after_stop = output[before_stop:]
    # The summary: each program's last words; run-local says where the lake is.
    assert "jobs.stream: stopped" in after_stop, "\n".join(after_stop)
    assert any(line.startswith("producer: done:") and " 0 failed" in line for line in after_stop), (
        "\n".join(after_stop)
    )
    assert "run-local: broker stopped" in after_stop
    assert f"run-local: the lake is in {tmp_path / 'lake'}" in after_stop, "\n".join(after_stop)
    # Where the job's summary counts readings and alerts, it counts some: an alert was shown.
    for line in after_stop:
        if line.startswith("jobs.stream: ") and re.search(r"\breadings\b", line):
            counts = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", line)]
            assert any(counts), line
        if line.startswith("jobs.stream: ") and (alerts := re.search(r"\balerts (\d[\d,]*)", line)):
            assert int(alerts[1].replace(",", "")) > 0, line
    assert not psutil.pid_exists(broker_pid)
    if with_prometheus:
        assert "run-local: Prometheus stopped" in after_stop
        assert not psutil.pid_exists(prometheus_pid)
    if with_alertmanager:
        assert any(line.startswith("notify: keeping Alertmanager") for line in output)
        assert "run-local: Alertmanager stopped" in after_stop
        assert not psutil.pid_exists(alertmanager_pid)
    else:
        assert any(line.startswith("run-local: no Alertmanager installed") for line in output)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    lake = tmp_path / "lake"
    assert DeltaTable(str(lake / "readings")).to_pyarrow_table(columns=["event_id"]).num_rows > 0
    assert DeltaTable(str(lake / "alerts")).to_pyarrow_table(columns=["alert_id"]).num_rows > 0
    # Quiet: nothing a newcomer would take for a failure, from start to stop.
    noisy = noisy_lines(output)
    if noisy:
        pytest.fail(f"{len(noisy)} noisy line(s) in run-local's output:\n" + "\n".join(noisy))


# run-local's ports by their default and the name its line gives each (local_stack/ports.py).
DEFAULT_PORTS = {
    9092: "Kafka", 8080: "the dashboard", 9093: "Alertmanager", 9090: "Prometheus",
    9108: "the job's /metrics", 9109: "the notifier's /metrics",
    9110: "the producer's /metrics", 1883: "MQTT", 9111: "the bridge's /metrics",
}  # fmt: skip
MOVED = re.compile(r"(.+) (\d+) -> (\d+)")


@contextmanager
def occupied(ports: Iterable[int]) -> Iterator[None]:
    """Something listening on each of ``ports`` on loopback, as an ops laptop's own
    Prometheus or MQTT broker would (a port something else holds already stays so)."""
    with ExitStack() as held:
        for port in ports:
            sock = held.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # taken already: what the test wants
            sock.listen()
        yield


def forwarding_bridge(dashboard: str) -> dict | None:
    """The one bridge of the dashboard's pipeline view once it is connected to MQTT and
    forwards (ops/dashboard/prometheus_view.py); None before."""
    with urllib.request.urlopen(f"{dashboard}/api/pipeline/prometheus", timeout=10) as answer:
        found = json.loads(answer.read())["bridge"]
    if not found:
        return None
    (bridge,) = found["instances"]
    forwarding = bridge["mqtt_connected"] and (bridge["forwarded_per_second"] or 0) > 0
    return bridge if forwarding else None


def test_run_local_mqtt_sends_the_fleet_through_mosquitto_and_the_bridge_on_free_ports(
    tmp_path, monkeypatch
) -> None:
    # Every default port taken (no port setting given): run-local takes free ones, says
    # which in one line, and wires every program to them.
    kept = without_settings(os.environ)
    for key in [k for k in os.environ if k not in kept]:
        monkeypatch.delenv(key)
    with_prometheus = bool(shutil.which("prometheus"))
    with occupied(DEFAULT_PORTS):
        running = Running(
            [str(PROJECT_ROOT / "scripts" / "run-local"), "--mqtt"],
            env={"SENSORWATCH_LOCAL_DIR": str(tmp_path)},
        )
        try:
            said = running.wait_for_line(
                lambda line: line.startswith("run-local: ports taken"), STUCK, "the ports line"
            )
            head = "run-local: ports taken, so free ones instead: "
            assert said.startswith(head), said
            moved = [MOVED.fullmatch(item) for item in said.removeprefix(head).split(", ")]
            assert all(moved), said
            port = {m[1]: int(m[3]) for m in moved if m}
            assert {int(m[2]): m[1] for m in moved if m} == DEFAULT_PORTS, said
            assert len(set(port.values())) == len(port)
            assert not set(port.values()) & set(DEFAULT_PORTS)

            running.wait_for_line(is_job_start, STUCK, "the job's start")
            producer = f"producer: 50 sensors -> mqtt://127.0.0.1:{port['MQTT']} "
            assert any(line.startswith(producer) for line in running.lines), "\n".join(
                running.lines[-30:]
            )
            # An alert: readings went device -> Mosquitto -> bridge -> Kafka -> job.
            running.wait_for_line(is_alert, STUCK, "the first alert line")
            records = consume_messages(f"127.0.0.1:{port['Kafka']}", "sensor-readings", expected=50)
            assert len(records) >= 50
            assert all(dict(r.headers() or [])[HEADER_MQTT_TOPIC].startswith(b"sensors/")
                       for r in records)  # fmt: skip
            dashboard = f"http://127.0.0.1:{port['the dashboard']}"
            seen(running, lambda line: line == f"run-local: dashboard {dashboard}", STUCK)
            if with_prometheus:
                prometheus = f"http://127.0.0.1:{port['Prometheus']}"
                assert f"run-local: Prometheus {prometheus} " in "\n".join(running.lines)
                for job in ("sensorwatch-job", "sensorwatch-producer", "sensorwatch-bridge",
                            "sensorwatch-dashboard"):  # fmt: skip
                    wait_until(
                        lambda job=job: scraped(prometheus, job), STUCK,
                        f"Prometheus scraping {job} on its new port",
                    )  # fmt: skip
                # The dashboard's pipeline view shows the bridge, from that Prometheus.
                bridge = wait_until(
                    lambda: forwarding_bridge(dashboard), STUCK,
                    "the dashboard's pipeline view showing the bridge forwarding",
                )  # fmt: skip
                metrics_port = port["the bridge's /metrics"]
                assert bridge["instance"] == f"127.0.0.1:{metrics_port}"
                assert bridge["up"] is True and bridge["kafka_reachable"] is True
                assert bridge["received_per_second"] > 0
                assert bridge["in_flight"] is not None
            mosquitto_pid = json.loads((tmp_path / "mosquitto" / "mosquitto.json").read_text())[
                "pid"
            ]
            children = psutil.Process(running.proc.pid).children(recursive=True)
            before_stop = len(running.lines)

            running.interrupt_group()

            assert running.finish(timeout=120) == 0, "\n".join(running.lines[-40:])
        finally:
            running.kill()
            left = stop_servers(tmp_path)
    assert left == [], f"run-local left {left} running"

    after_stop = running.lines[before_stop:]
    assert any(line.startswith("producer: done:") and " 0 failed" in line for line in after_stop), (
        "\n".join(after_stop)
    )
    assert any(line.startswith("bridge: stopped: ") for line in after_stop), "\n".join(after_stop)
    assert "run-local: Mosquitto stopped" in after_stop
    assert "run-local: broker stopped" in after_stop
    assert not psutil.pid_exists(mosquitto_pid)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    lake = tmp_path / "lake"
    assert DeltaTable(str(lake / "readings")).to_pyarrow_table(columns=["event_id"]).num_rows > 0
    noisy = noisy_lines(running.lines)
    if noisy:
        pytest.fail(f"{len(noisy)} noisy line(s) in run-local's output:\n" + "\n".join(noisy))
