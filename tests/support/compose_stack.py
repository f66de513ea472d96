"""`docker compose` driven as a user drives it, for the tests that run the stack for real.

Each stack runs under a project name of its own with free host ports, so a demo already
running on the machine is left alone, and ``down --volumes`` removes everything it made.
The images are whatever the environment names (``PYTHON_IMAGE``, ``KAFKA_IMAGE``,
``ALERTMANAGER_IMAGE``): the official ones, a mirror's, or the engine lane's stand-ins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conf.paths import PROJECT_ROOT
from local_stack.server import free_port

# Run inside a container of the stack (the app image has the project and deltalake):
# the named tables of a lake as JSON, {table: rows or null}, read with the ops reader.
_DUMP_TABLES = """
import json, sys
from lake.reader import LakeReader
reader = LakeReader(sys.argv[1])
wanted = json.loads(sys.argv[2])
out = {}
for name, columns in wanted.items():
    data = reader.read(name, columns)
    out[name] = None if data is None else data.to_pylist()
print(json.dumps(out, default=str))
"""


def read_host_lake(tables: dict[str, list[str] | None], lake: Path) -> dict[str, Any]:
    """A lake on this machine read by the very script :meth:`ComposeStack.read_lake` runs
    in a container, so that a stack's lake and a local one compare value for value."""
    done = subprocess.run(
        [sys.executable, "-c", _DUMP_TABLES, str(lake), json.dumps(tables)],
        capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def compose_unavailable_reason() -> str | None:
    """None when ``docker compose`` (v2) runs, else why not (for skip messages)."""
    try:
        done = subprocess.run(
            ["docker", "compose", "version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker compose cannot run ({exc})"
    if done.returncode != 0:
        return "the docker compose plugin (Compose v2) is missing: scripts/docker-lane up"
    return None


@dataclass
class ComposeStack:
    """One compose project: the project's file plus ``overrides``, ``profiles`` on."""

    overrides: Sequence[Path] = ()
    profiles: Sequence[str] = ()
    name: str = field(default_factory=lambda: f"sensorwatch-test-{uuid.uuid4().hex[:8]}")
    ports: dict[str, int] = field(
        default_factory=lambda: {
            name: free_port()
            for name in (
                "KAFKA_HOST_PORT",
                "DASHBOARD_PORT",
                "ALERTMANAGER_PORT",
                "PROMETHEUS_PORT",
                "SPARK_UI_PORT",
                "MQTT_PORT",
                "MQTT_TLS_PORT",
            )
        }
    )

    def env(self) -> dict[str, str]:
        """The environment every compose command of this stack runs with."""
        return {**os.environ, **{k: str(v) for k, v in self.ports.items()}}

    def command(self, *args: str) -> list[str]:
        files = ["-f", "docker-compose.yml"]
        for path in self.overrides:
            files += ["-f", str(path)]
        profiles = [part for p in self.profiles for part in ("--profile", p)]
        return ["docker", "compose", "-p", self.name, *files, *profiles, *args]

    def run(
        self, *args: str, timeout: float = 600, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """``docker compose <args>``; with ``check``, a failure shows its output."""
        done = subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=timeout,
            cwd=PROJECT_ROOT, env=self.env(),
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"docker compose {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def build(self, timeout: float = 1200) -> None:
        """Build each image the stack builds once, one after the other.

        Every app service names the same image; ``compose build`` would build it once per
        service, all at once (the classic builder shares no layer still being built): six
        copies of a 2 GB image competing for the same cores. One service per image, in
        turn, lets each later build reuse the earlier one's layers.
        """
        config = json.loads(self.run("config", "--format", "json").stdout)
        builders: dict[str, str] = {}
        for service, spec in sorted(config["services"].items()):
            if "build" in spec:
                builders.setdefault(spec.get("image", service), service)
        for service in builders.values():
            done = self.run("build", service, timeout=timeout)
            # A step may fail quietly (a clean-up ending in `|| true`); its traceback in
            # every user's build is still a bug: the image's set-up once missed a module.
            said = done.stdout + done.stderr
            start = said.find("Traceback (most recent call last)")
            if start >= 0:
                raise AssertionError(
                    f"building {service} printed a traceback:\n{said[start:][:3000]}"
                )

    def containers(self) -> list[dict[str, Any]]:
        """``docker compose ps --all`` as dicts (Service, State, Health, ExitCode, ...)."""
        out = self.run("ps", "--all", "--format", "json").stdout
        # Compose 2.21+ prints one JSON object per line; older releases one JSON array.
        text = out.strip()
        if text.startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def health(self, containers: list[dict[str, Any]] | None = None) -> dict[str, str]:
        """Each service's state: its health when it has a healthcheck, else its state
        (from ``containers``, one :meth:`containers` call, when given)."""
        found = self.containers() if containers is None else containers
        return {c["Service"]: c.get("Health") or c["State"] for c in found}

    def health_report(self, services: Sequence[str] | set[str]) -> str:
        """For each of ``services`` that is not healthy: its state and what its last
        probes answered (exit code, output), so a failed wait says which probe failed."""
        containers = self.containers()
        lines = [
            f"{s}: no container" for s in sorted(set(services) - {c["Service"] for c in containers})
        ]
        for c in containers:
            state = c.get("Health") or c["State"]
            if c["Service"] not in services or state == "healthy":
                continue
            done = subprocess.run(
                ["docker", "inspect", "--format", "{{json .State.Health}}", c["ID"]],
                capture_output=True, text=True, timeout=60, check=False, env=self.env(),
            )  # fmt: skip
            probes = (json.loads(done.stdout or "null") or {}).get("Log") or []
            lines.append(f"{c['Service']}: {state}")
            lines += [
                f"  probe at {p['Start'][:19]}: exit {p['ExitCode']}, {p['Output'].strip()[:300]!r}"
                for p in probes[-3:]
            ]
        return "\n".join(lines) or "every one of them healthy"

    def exit_code(self, service: str) -> int | None:
        """The exit code of a service's container once it has exited, else None."""
        return self.exit_codes().get(service)

    def exit_codes(self, containers: list[dict[str, Any]] | None = None) -> dict[str, int]:
        """The exit code of each service whose container has exited (from ``containers``,
        one :meth:`containers` call, when given)."""
        found = self.containers() if containers is None else containers
        return {c["Service"]: int(c["ExitCode"]) for c in found if c["State"] == "exited"}

    def users(self) -> dict[str, str]:
        """The user each service's container runs as (its image's unless overridden),
        one-shots that have exited included."""
        containers = self.containers()
        done = subprocess.run(
            ["docker", "inspect", "--format", "{{.Config.User}}", *(c["ID"] for c in containers)],
            capture_output=True, text=True, timeout=60, check=True, env=self.env(),
        )  # fmt: skip
        return dict(zip((c["Service"] for c in containers), done.stdout.splitlines(), strict=True))

    def container_id(self, service: str) -> str:
        return self.run("ps", "--quiet", service).stdout.strip()

    def logs(self, *services: str, tail: int = 60) -> str:
        return self.run("logs", "--no-color", "--tail", str(tail), *services, check=False).stdout

    def said(self, service: str, text: str) -> int:
        """How many lines of a service's log hold ``text``: a poll's cheap first look (a
        call to the engine, a fifth of a CPU second) before :meth:`read_lake`, which
        starts a container and a Python that imports the Delta reader (over a second)."""
        return sum(text in line for line in self.logs(service, tail=1_000_000).splitlines())

    def read_lake(
        self, tables: dict[str, list[str] | None], lake: str = "/data/lake"
    ) -> dict[str, list[dict[str, Any]] | None]:
        """Tables of a lake in the stack's ``lake`` volume (or, the s3 profile, its
        bucket), read in a one-off container with the dashboard service's mounts and
        start (scripts/compose-run: the bucket's variables)."""
        done = self.run(
            "run", "--rm", "--no-deps", "-T", "--entrypoint", "scripts/compose-run", "dashboard",
            "python", "-c", _DUMP_TABLES, lake, json.dumps(tables), timeout=300,
        )  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    def http_json(self, port_name: str, path: str, query: dict[str, str] | None = None) -> Any:
        """GET a published port of the stack (on 127.0.0.1) and decode the JSON reply."""
        url = f"http://127.0.0.1:{self.ports[port_name]}{path}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as reply:
            return json.load(reply)

    def down(self) -> None:
        """Remove the stack's containers, networks and volumes. Killed, not stopped: their
        volumes go with them, so a clean stop would keep nothing, and it cost the Docker
        tests 8 to 15 s a stack (the job finishing its batch, Kafka its controlled
        shutdown). The compose drill runs `down` as a user does, volumes kept, where
        that is what it tests (tests/containers/test_docker_compose.py)."""
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "0", check=False)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.support.compose_stack build``: build every image the Docker tests use.

    scripts/test runs it beside the tests that need no JVM, so the cold build of the app
    image (minutes) overlaps them instead of starting the JVM phase; the Docker tests'
    own ``ComposeStack.build`` then finds every layer made.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.support.compose_stack")
    parser.add_argument("action", choices=["build"])
    parser.parse_args(argv)
    from tests.support.brokers import docker_unavailable_reason

    reason = docker_unavailable_reason() or compose_unavailable_reason()
    if reason:
        print(f"tests.support.compose_stack: nothing built: {reason}")
        return 0
    # Its time, in CI's log: the tests without a JVM wait for it, and beside them it can
    # be what that phase lasts (docs/testing.md).
    started = time.monotonic()
    ComposeStack(profiles=["cluster", "s3"]).build()
    took = time.monotonic() - started
    print(f"tests.support.compose_stack: every image of the Docker tests is built ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
