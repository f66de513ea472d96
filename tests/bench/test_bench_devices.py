"""The bench's devices (bench/devices/, Go; bench/mqtt_devices.py): their Go tests, vet
and format pass, they are built on first use, and a bad command line is refused with a
message before any connection."""

from __future__ import annotations

import subprocess

from bench import mqtt_devices
from local_stack import go_build


def test_the_devices_go_tests_and_vet_pass() -> None:
    tested = go_build.run_go(mqtt_devices.DEVICES_SOURCE, "test", "-count=1", "./...")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    vetted = go_build.run_go(mqtt_devices.DEVICES_SOURCE, "vet", "./...")
    assert vetted.returncode == 0, vetted.stderr
    assert go_build.unformatted(mqtt_devices.DEVICES_SOURCE) == []


def test_the_devices_are_built_on_first_use_and_refuse_a_bad_command_line() -> None:
    said: list[str] = []
    binary = mqtt_devices.ensure_built(said.append)
    assert go_build.is_current(mqtt_devices.DEVICES_SOURCE, binary)
    assert mqtt_devices.ensure_built(said.append) == binary and len(said) <= 1  # once at most
    refused = subprocess.run(
        [str(binary), "-port", "1883", "-count", "5", "site-1"], capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert '"site-1": a device is SITE=PASSWORD_FILE' in refused.stderr
