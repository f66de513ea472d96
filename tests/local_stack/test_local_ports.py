"""run-local's ports (local_stack/ports.py, issue 70): a default that is taken is replaced
by a free one and said; one set explicitly that is taken stops run-local with one line
naming the setting; a server of the demo's own still running keeps its port. The demo
run on taken defaults end to end: tests/local_stack/test_run_local.py (--mqtt)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from local_stack import ports
from local_stack.ports import PortError, Wanted, parse_wanted, resolve, taken
from local_stack.server import FREE_PORTS_FROM, LOOPBACK, free_port
from tests.support.processes import without_settings

PROMETHEUS = Wanted(
    "prometheus_port", "SENSORWATCH_PROMETHEUS_PORT", 9090, "Prometheus", "prometheus"
)
JOB = Wanted("job_metrics_port", "SENSORWATCH_JOB_METRICS_PORT", 9108, "the job's /metrics")
MQTT = Wanted("mqtt_port", "SENSORWATCH_LOCAL_MQTT_PORT", 1883, "MQTT", "mosquitto")


def listening() -> socket.socket:
    """A socket listening on a free loopback port, as someone else's server would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_listening_port_is_taken_and_a_closed_one_is_not() -> None:
    with listening() as sock:
        port = sock.getsockname()[1]
        assert taken(port)
    assert not taken(port)


def test_taken_defaults_are_replaced_by_distinct_free_ports_and_said(tmp_path: Path) -> None:
    chosen, moved = resolve([PROMETHEUS, JOB, MQTT], {}, tmp_path, is_taken=lambda p: p != 9108)

    assert chosen["job_metrics_port"] == 9108  # free: kept
    new = chosen["prometheus_port"], chosen["mqtt_port"]
    assert len(set(new)) == 2 and not {9090, 1883, 9108} & set(new)
    assert moved == [f"Prometheus 9090 -> {new[0]}", f"MQTT 1883 -> {new[1]}"]


def test_an_explicit_port_that_is_taken_fails_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(PortError) as refused:
        resolve([PROMETHEUS], {"SENSORWATCH_PROMETHEUS_PORT": "9090"}, tmp_path, lambda p: True)

    assert str(refused.value).startswith(
        "SENSORWATCH_PROMETHEUS_PORT=9090 (Prometheus): port 9090 on 127.0.0.1 is already in use"
    )
    # Free, it is used as given; two settings on one port are refused too.
    both = {"SENSORWATCH_PROMETHEUS_PORT": "19090", "SENSORWATCH_JOB_METRICS_PORT": "19090"}
    with pytest.raises(PortError, match="SENSORWATCH_JOB_METRICS_PORT=19090"):
        resolve([PROMETHEUS, JOB], both, tmp_path, lambda p: False)
    with pytest.raises(PortError, match="SENSORWATCH_LOCAL_MQTT_PORT=x: not a port number"):
        resolve([MQTT], {"SENSORWATCH_LOCAL_MQTT_PORT": "x"}, tmp_path, lambda p: False)


def test_the_demo_s_own_running_server_keeps_its_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Prometheus left running on run-local's data folder at 9090 (so 9090 is taken, by
    # it): reused, not moved; asked for explicitly on its port, accepted.
    monkeypatch.setitem(
        ports.SERVERS, "prometheus", lambda d: 9090 if d == tmp_path / "prometheus" else None
    )
    for environ in ({}, {"SENSORWATCH_PROMETHEUS_PORT": "9090"}):
        chosen, moved = resolve([PROMETHEUS], environ, tmp_path, is_taken=lambda p: True)
        assert (chosen, moved) == ({"prometheus_port": 9090}, [])


def test_a_bad_spec_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown server 'redis'"):
        parse_wanted("x:SENSORWATCH_X:1:X:redis")
    assert (
        parse_wanted("job_metrics_port:SENSORWATCH_JOB_METRICS_PORT:9108:the job's /metrics") == JOB
    )


def test_run_local_stops_on_a_taken_port_it_was_given(tmp_path: Path) -> None:
    with listening() as sock:
        port = sock.getsockname()[1]
        done = subprocess.run(
            [str(PROJECT_ROOT / "scripts" / "run-local")],
            env={
                **without_settings(os.environ),
                "SENSORWATCH_LOCAL_DIR": str(tmp_path),
                "SENSORWATCH_PROMETHEUS_PORT": str(port),
            },
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"run-local: SENSORWATCH_PROMETHEUS_PORT={port} (Prometheus): port {port} on "
        "127.0.0.1 is already in use; free it, or set another port (unset: run-local takes "
        "a free one)\n"
    )
    assert not (tmp_path / "kafka").exists()  # nothing was started


def test_a_free_port_for_a_server_is_below_the_ephemeral_ports() -> None:
    """A port the kernel hands out to outgoing connections can be taken between the look
    and the server's bind (Mosquitto's 'address already in use' in CI): free_port keeps
    below that range, and what it gives can be bound."""
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(FREE_PORTS_FROM <= port < first_ephemeral for port in ports), ports
    for port in ports:
        with socket.socket() as s:
            s.bind((LOOPBACK, port))
