"""The ports of ``scripts/run-local`` on a laptop that runs other things (issue 70).

Each port run-local binds has a default (Prometheus 9090, Alertmanager 9093, the brokers'
9092 and 1883, the programs' /metrics 9108 to 9111, the dashboard's 8080). An ops person
very likely runs a Prometheus or an MQTT broker of their own on some of them. So:

- a port left to its default that something else listens on is replaced by a free one,
  and run-local says so in one line (``run-local: ports taken, so ...``);
- a port set explicitly (its ``SENSORWATCH_*`` variable) that is taken is an error naming
  the setting: the caller asked for that port, and may point other things at it;
- a server of the demo's own still running on its data folder (a broker, Prometheus,
  Alertmanager, Mosquitto left running from an earlier run) keeps its port: run-local
  reuses that server.

Command line (run-local's; prints ``VAR=PORT`` lines for the shell to ``eval``)::

    python -m local_stack.ports --data-dir DIR VAR:SETTING:DEFAULT:WHAT[:SERVER] ...

``VAR`` is run-local's shell variable, ``SETTING`` the environment variable that sets it,
``WHAT`` the words the line uses, ``SERVER`` one of kafka, prometheus, alertmanager,
mosquitto (the folder under ``--data-dir`` its own server runs on). Exit status 2 and one
line on stderr for a taken explicit port.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.cli import read_options
from conf.settings.base import SettingsError
from local_stack import alertmanager, mosquitto, prometheus
from local_stack import kafka as kafka_local
from local_stack.server import LOOPBACK, free_port


class PortError(RuntimeError):
    """A port set explicitly is taken; the message names the setting."""


@dataclass(frozen=True)
class Wanted:
    """One port run-local binds."""

    var: str  # run-local's shell variable
    setting: str  # the environment variable that sets it
    default: int
    what: str  # how the line names it: "Prometheus", "the job's /metrics"
    server: str | None = None  # kafka, prometheus, alertmanager, mosquitto


# The port a demo's own server of each kind runs at on its data folder, if one runs.
SERVERS: dict[str, Callable[[Path], int | None]] = {
    "kafka": lambda d: getattr(kafka_local.running_broker(d), "port", None),
    "prometheus": lambda d: getattr(prometheus.running(d), "port", None),
    "alertmanager": lambda d: getattr(alertmanager.running(d), "port", None),
    "mosquitto": lambda d: getattr(mosquitto.running(d), "port", None),
}


def taken(port: int) -> bool:
    """True when something listens on ``port`` on loopback, or binding it there fails
    (a listener on all interfaces, or on loopback only). SO_REUSEADDR as the servers set
    it, so a port left in TIME_WAIT by a program just stopped counts as free."""
    with socket.socket() as probe:
        if probe.connect_ex((LOOPBACK, port)) == 0:
            return True
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


def parse_wanted(spec: str) -> Wanted:
    """``VAR:SETTING:DEFAULT:WHAT[:SERVER]`` as a :class:`Wanted`.

    Raises:
        ValueError: a malformed spec (run-local's own mistake).
    """
    parts = spec.split(":")
    if len(parts) not in (4, 5) or not parts[2].isdigit():
        raise ValueError(f"expected VAR:SETTING:DEFAULT:WHAT[:SERVER], got {spec!r}")
    server = parts[4] if len(parts) == 5 else None
    if server is not None and server not in SERVERS:
        raise ValueError(f"unknown server {server!r} in {spec!r} (known: {', '.join(SERVERS)})")
    return Wanted(parts[0], parts[1], int(parts[2]), parts[3], server)


def resolve(
    wanted: Sequence[Wanted],
    environ: Mapping[str, str],
    data_dir: Path,
    is_taken: Callable[[int], bool] = taken,
) -> tuple[dict[str, int], list[str]]:
    """The port of each (by ``var``), and what moved (``"Prometheus 9090 -> 41234"``).

    Raises:
        PortError: a port set explicitly (in ``environ``) is taken, or not a port.
    """
    chosen: dict[str, int] = {}
    moved: list[str] = []

    def free() -> int:
        # Below the ephemeral ports (local_stack/server.free_port); none handed out twice.
        port = free_port()
        while port in chosen.values():
            port = free_port()
        return port

    for want in wanted:
        own = SERVERS[want.server](data_dir / want.server) if want.server else None
        given = environ.get(want.setting, "").strip()
        if given:
            if not given.isdigit() or not 0 < int(given) < 65536:
                raise PortError(f"{want.setting}={given}: not a port number")
            port = int(given)
            if port != own and (port in chosen.values() or is_taken(port)):
                raise PortError(
                    f"{want.setting}={port} ({want.what}): port {port} on {LOOPBACK} is "
                    "already in use; free it, or set another port (unset: run-local "
                    "takes a free one)"
                )
            chosen[want.var] = port
        elif own is not None:
            chosen[want.var] = own  # the demo's own server, still running: reused
        elif want.default in chosen.values() or is_taken(want.default):
            chosen[want.var] = free()
            moved.append(f"{want.what} {want.default} -> {chosen[want.var]}")
        else:
            chosen[want.var] = want.default
    return chosen, moved


class PortsOptions(BaseModel):
    """The command line of ``python -m local_stack.ports``."""

    data_dir: Path = Field(description="run-local's data folder")
    wanted: CliPositionalArg[list[str]] = Field(
        min_length=1, description="VAR:SETTING:DEFAULT:WHAT[:SERVER], one or more"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module's docstring."""
    try:
        args = read_options(
            PortsOptions, argv, prog="python -m local_stack.ports",
            description="run-local's ports: defaults where free, free ones where taken.",
        )  # fmt: skip
        wanted = [parse_wanted(spec) for spec in args.wanted]
        chosen, moved = resolve(wanted, os.environ, args.data_dir.resolve())
    except (ValueError, PortError, SettingsError) as exc:
        print(f"run-local: {exc}", file=sys.stderr)
        return 2
    if moved:
        print(f"run-local: ports taken, so free ones instead: {', '.join(moved)}", file=sys.stderr)
    for var, port in chosen.items():
        print(f"{var}={port}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
