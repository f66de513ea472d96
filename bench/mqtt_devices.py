"""The devices of ``scripts/bench --bridge``: bench/devices/, a Go program, built here on
first use (into .cache/bench/) and started as one process whose devices each hold an MQTT
connection with their site's login and publish readings with QoS 1.

Compiled so that the figures are the broker's and the bridge's, not a Python client's:
paho-mqtt in Python took more CPU per reading than the bridge's engine (docs/benchmarks.md,
"The bench's devices in Go").
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conf.paths import CACHE_DIR, PROJECT_ROOT
from contract.devices import TopicLayout
from local_stack import go_build
from local_stack import mosquitto as local_mosquitto

DEVICES_SOURCE = PROJECT_ROOT / "bench" / "devices"
DEVICES = CACHE_DIR / "bench" / "sensorwatch-bench-devices"


@dataclass(frozen=True)
class DeviceResult:
    """One device's line: readings published and acknowledged by the broker, and how
    long from its first publish to its last acknowledgement."""

    device: str
    published: int
    acknowledged: int
    seconds: float
    error: str = ""


def ensure_built(say: Callable[[str], None]) -> Path:
    """The devices' program, built first unless current.

    Raises:
        go_build.BuildError: it could not be built (the message says why).
    """
    if not go_build.is_current(DEVICES_SOURCE, DEVICES):
        say("bridge: building the bench's devices (bench/devices, go build) ...")
        go_build.build(DEVICES_SOURCE, DEVICES, say=lambda m: say(f"bridge: {m}"))
    return DEVICES


def start(
    info: local_mosquitto.MosquittoInfo,
    sites: list[str],
    count: int,
    rate: float,
    hot: tuple[int, Path] | None = None,
) -> subprocess.Popen[str]:
    """One device per site publishing ``count`` readings at ``rate`` readings/s each (0:
    as fast as acknowledged); with ``hot`` (every, prefix), every ``every``-th reading is
    hot and from a sensor of its own, its send noted in ``prefix.SITE.log``."""
    argv = [str(DEVICES), "-port", str(info.port), "-count", str(count), "-rate", str(rate),
            "-topic", TopicLayout().template]  # fmt: skip
    if hot is not None:
        argv += ["-hot-every", str(hot[0]), "-hot-log", str(hot[1])]
    argv += [
        f"{site}={local_mosquitto.credential(info.data_dir, site).password_file}" for site in sites
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@dataclass(frozen=True)
class DevicesRun:
    """What the program said when it ended: each device's result, and the CPU seconds the
    whole program used in user and in system mode (None if it said none)."""

    devices: list[DeviceResult]
    cpu_seconds: tuple[float, float] | None = None


def results(proc: subprocess.Popen[str], timeout: float = 120.0) -> DevicesRun:
    """The program's results once it ended; killed after ``timeout`` seconds (its
    devices then say so)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return DevicesRun([DeviceResult("all", 0, 0, timeout, f"killed after {timeout:g} s")])
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    devices = sorted(
        (DeviceResult(**line) for line in lines if "device" in line), key=lambda r: r.device
    )
    if not devices:
        devices = [DeviceResult("all", 0, 0, 0.0, err.strip() or f"exit {proc.returncode}")]
    cpu = next(
        ((line["cpu_user_s"], line["cpu_system_s"]) for line in lines if "cpu_user_s" in line),
        None,
    )
    return DevicesRun(devices, cpu)
