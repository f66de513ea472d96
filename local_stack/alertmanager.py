"""A real Prometheus Alertmanager on loopback, without Docker: ``scripts/alertmanager-local``.

Runs Debian's ``prometheus-alertmanager`` (scripts/setup installs it) on 127.0.0.1 only,
with clustering off (no gossip port). One Alertmanager per data directory; several can
run side by side on different ports and data directories. The data directory holds:

    alertmanager.yml    the config, rendered from conf/alertmanager.yml on each start
    data/               Alertmanager's storage: notification log and silences, written
                        on a clean stop, so a restart neither re-notifies nor forgets
                        a silence
    alertmanager.log    its log (logfmt)
    alertmanager.json   pid, port and URL of the running Alertmanager

Usage::

    scripts/alertmanager-local start [--data-dir DIR] [--port N] [--webhook-url URL]
                                     [--config PATH]  # prints alertmanager=http://127.0.0.1:N
    scripts/alertmanager-local status [--data-dir DIR]
    scripts/alertmanager-local stop [--data-dir DIR]
    scripts/alertmanager-local render [--webhook-url URL] [--config PATH] [--out FILE]
                                      # the config, printed or written to FILE
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.paths import PROJECT_ROOT, VAR_DIR
from conf.settings.base import SHARED_FILE, load_settings
from local_stack.server import (
    LOOPBACK,
    LocalServer,
    entry_point,
    fill_template,
    http_ready,
    logfmt_value,
    wait_for_server,
)
from local_stack.settings import AlertmanagerLocalSettings

DEFAULT_DATA_DIR = VAR_DIR / "alertmanager"
DEFAULT_PORT = 9093

TEMPLATE = PROJECT_ROOT / "conf" / "alertmanager.yml"
# Debian's package name first; "alertmanager" is the upstream release's binary.
BINARIES = ("/usr/bin/prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")


class AlertmanagerError(RuntimeError):
    """Alertmanager could not be started, reached or stopped; the message says why."""


SERVER = LocalServer(
    "alertmanager-local",
    "alertmanager.json",
    "alertmanager.log",
    AlertmanagerError,
    marker=lambda data_dir: f"--storage.path={data_dir / 'data'}",
)


@dataclass(frozen=True)
class Timings:
    """The route's timings (Alertmanager durations such as ``10s``, ``4h``)."""

    group_wait: str = "10s"
    group_wait_critical: str = "2s"
    group_interval: str = "30s"
    repeat_interval: str = "4h"


@dataclass(frozen=True)
class AlertmanagerInfo:
    """A running local Alertmanager."""

    pid: int
    port: int
    data_dir: Path
    webhook_url: str | None = None
    tls: bool = False

    @property
    def url(self) -> str:
        """Base URL of its API and web page."""
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"


def find_binary() -> str:
    """The Alertmanager executable (AlertmanagerError: none is installed)."""
    return SERVER.find_binary(BINARIES, "prometheus-alertmanager")


def render_config(
    template: str, webhook_url: str | None = None, timings: Timings = Timings()
) -> str:
    """The config with its ``${NAME}`` placeholders filled in.

    Comment lines are left as they are: a commented example may carry a placeholder that
    is filled in once it is uncommented.

    Raises:
        AlertmanagerError: a placeholder this program does not know.
    """
    # JSON is YAML (flow style) and quotes the URL safely.
    configs = [{"url": webhook_url, "send_resolved": True}] if webhook_url else []
    values = {
        "WEBHOOK_CONFIGS": json.dumps(configs),
        "GROUP_WAIT": timings.group_wait,
        "GROUP_WAIT_CRITICAL": timings.group_wait_critical,
        "GROUP_INTERVAL": timings.group_interval,
        "REPEAT_INTERVAL": timings.repeat_interval,
    }

    return fill_template(template, values, AlertmanagerError)


def read_template(path: Path = TEMPLATE) -> str:
    """The text of a config template (AlertmanagerError: it cannot be read)."""
    return SERVER.read_config(path)


def _storage(data_dir: Path) -> Path:
    return data_dir / "data"


def running(data_dir: Path = DEFAULT_DATA_DIR) -> AlertmanagerInfo | None:
    """The Alertmanager running on ``data_dir``, or None (a stale state file is removed)."""
    state = SERVER.found(data_dir)
    return (
        None
        if state is None
        else AlertmanagerInfo(
            state["pid"],
            state["port"],
            data_dir.resolve(),
            state.get("webhook_url"),
            state.get("tls", False),
        )
    )


def wait_until_ready(
    url: str, timeout: float = 30.0, alive: Callable[[], bool] | None = None, guarded: bool = False
) -> None:
    """Block until Alertmanager answers ``/-/ready``.

    Raises:
        AlertmanagerError: when ``timeout`` passes first or ``alive`` reports it died.
    """
    wait_for_server(
        f"Alertmanager at {url}",
        lambda: http_ready(url, guarded=guarded),
        timeout,
        0.1,
        alive,
        AlertmanagerError,
    )


def startup_error(log: str, config: Path) -> str | None:
    """What the log of a failed start says went wrong, in plain words, if it says."""
    for line in log.splitlines():
        if 'msg="Loading configuration file failed"' in line:
            # The way `amtool check-config` reports it.
            return f"config invalid: Checking '{config}'  FAILED: {logfmt_value(line, 'err')}"
        if "level=error" in line and "address already in use" in line:
            return f"port in use: {logfmt_value(line, 'err')}"
    return None


def start(
    data_dir: Path = DEFAULT_DATA_DIR,
    port: int = DEFAULT_PORT,
    *,
    webhook_url: str | None = None,
    config: Path = TEMPLATE,
    timings: Timings = Timings(),
    timeout: float = 30.0,
    web_config: Path | None = None,
    tls: bool = False,
) -> AlertmanagerInfo:
    """Start an Alertmanager on ``data_dir`` and return once it is ready (idempotent).

    Renders ``config`` into the data dir first. ``web_config`` is Alertmanager's
    ``--web.config.file`` (basic auth users, a TLS certificate: then ``tls``). When one
    already runs on ``data_dir`` at ``port``, it is left as it is (a changed config is
    applied by stop and start).

    Raises:
        AlertmanagerError: no binary, the port is taken, it already runs on another port,
            the config is invalid, or it did not come up (with the tail of its log).
    """
    data_dir = data_dir.resolve()
    rendered = render_config(read_template(config), webhook_url, timings)
    current = running(data_dir)
    if current is not None:
        SERVER.check_same(data_dir, "an Alertmanager", {"--port": current.port}, {"--port": port})
        wait_until_ready(current.url, timeout, guarded=web_config is not None)
        in_use = data_dir / "alertmanager.yml"
        if not in_use.exists() or in_use.read_text(encoding="utf-8") != rendered:
            print(
                "alertmanager-local: note: it keeps the config it was started with; "
                "stop and start it to apply the new one",
                file=sys.stderr,
            )
        return current
    binary = find_binary()
    hint = (
        " (the Debian package's system service? sudo systemctl disable --now "
        "prometheus-alertmanager)"
        if port == DEFAULT_PORT
        else ""
    )
    SERVER.check_free(port, hint=hint)
    _storage(data_dir).mkdir(parents=True, exist_ok=True)
    config_file = data_dir / "alertmanager.yml"
    config_file.write_text(rendered, encoding="utf-8")
    url = f"{'https' if tls else 'http'}://{LOOPBACK}:{port}"
    command = [
        binary,
        f"--config.file={config_file}",
        f"--storage.path={_storage(data_dir)}",
        f"--web.listen-address={LOOPBACK}:{port}",
        f"--web.external-url={url}",
        *([f"--web.config.file={web_config}"] if web_config is not None else []),
        # Empty: no cluster, so no gossip port (and no warning about one).
        "--cluster.listen-address=",
    ]

    def explain(log: str) -> str | None:
        reason = startup_error(log, config_file)
        return None if reason is None else f"{reason}\n(rendered from {config})"

    proc = SERVER.launch(
        command, data_dir=data_dir,
        state={"port": port, "url": url, "webhook_url": webhook_url, "tls": tls},
        wait=lambda alive: wait_until_ready(url, timeout, alive, guarded=web_config is not None),
        explain=explain,
    )  # fmt: skip
    return AlertmanagerInfo(proc.pid, port, data_dir, webhook_url, tls)


def stop(data_dir: Path = DEFAULT_DATA_DIR, timeout: float = 30.0) -> bool:
    """Stop it cleanly (LocalServer.stop; True if one ran): it writes its notification
    log and silences first, so the next start knows what was already sent."""
    return SERVER.stop(data_dir, timeout)


class Options(BaseModel):
    """The options of scripts/alertmanager-local that are not settings."""

    command: CliPositionalArg[Literal["start", "stop", "status", "render"]] = Field(
        description="start, stop, status; render: print the config that start would use"
    )
    data_dir: Path = Field(DEFAULT_DATA_DIR, description="its config, storage and log")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="API and web port on 127.0.0.1")
    config: Path = Field(TEMPLATE, description="config template to render")
    out: Path | None = Field(
        None, description="render: write the config to this file instead of printing it"
    )


# Flags whose name differs from --<setting>.
FLAGS = {"alert_webhook_url": "--webhook-url"}


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | render."""
    return SERVER.main(
        argv, Options,
        description="A real Prometheus Alertmanager on 127.0.0.1 (Debian's "
        "prometheus-alertmanager), configured from conf/alertmanager.yml.",
        command=_command, settings=AlertmanagerLocalSettings, flags=FLAGS,
    )  # fmt: skip


def _command(given: dict[str, object], args: Options) -> int:
    if args.command == "stop":
        return SERVER.stopped(stop(args.data_dir))
    if args.command == "status":
        info = running(args.data_dir)
        if info is not None:
            print(
                f"alertmanager-local: running, pid {info.pid}, data {info.data_dir}, "
                f"webhook {info.webhook_url or 'none'}"
            )
            print(f"alertmanager={info.url}")
            return 0
        return SERVER.status(None, args.data_dir, {})
    settings = load_settings(AlertmanagerLocalSettings, given, SHARED_FILE, flags=FLAGS)
    webhook_url = settings.alert_webhook_url
    if args.command == "render":
        rendered = render_config(read_template(args.config), webhook_url)
        if args.out is None:
            sys.stdout.write(rendered)
        else:
            SERVER.write_config(args.out, rendered)
        return 0
    info = start(args.data_dir, args.port, webhook_url=webhook_url, config=args.config)
    print(
        f"alertmanager-local: running, pid {info.pid}, log {SERVER.log_file(info.data_dir)}, "
        f"webhook {info.webhook_url or 'none'}",
        file=sys.stderr,
    )
    print(f"alertmanager={info.url}", flush=True)
    return 0


if __name__ == "__main__":
    entry_point(main)
