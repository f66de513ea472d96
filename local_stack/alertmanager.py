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
from typing import ClassVar

from pydantic import Field

from conf.paths import PROJECT_ROOT, VAR_DIR
from conf.settings.base import SHARED_FILE, load_settings
from local_stack.prometheus_project import (
    PrometheusProjectServer,
    RenderingOptions,
)
from local_stack.server import (
    LOOPBACK,
    LocalServerError,
    RunningHttpServer,
    entry_point,
    logfmt_value,
)
from local_stack.settings import AlertmanagerLocalSettings

DEFAULT_DATA_DIR = VAR_DIR / "alertmanager"
DEFAULT_PORT = 9093

TEMPLATE = PROJECT_ROOT / "conf" / "alertmanager.yml"
# Debian's package name first; "alertmanager" is the upstream release's binary.
BINARIES = ("/usr/bin/prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")


class AlertmanagerError(LocalServerError):
    """A LocalServerError of Alertmanager (scripts/alertmanager-local)."""


@dataclass(frozen=True)
class Timings:
    """The route's timings (Alertmanager durations such as ``10s``, ``4h``)."""

    group_wait: str = "10s"
    group_wait_critical: str = "2s"
    group_interval: str = "30s"
    repeat_interval: str = "4h"


@dataclass(frozen=True)
class AlertmanagerInfo(RunningHttpServer):
    """A running local Alertmanager."""

    webhook_url: str | None = None
    tls: bool = False

    URL_NAME: ClassVar[str] = "alertmanager"

    @property
    def url(self) -> str:
        """Base URL of its API and web page."""
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"

    @property
    def detail(self) -> str:
        """Where it sends notifications."""
        return f"webhook {self.webhook_url or 'none'}"


SERVER = PrometheusProjectServer.named(
    "alertmanager", "Alertmanager", AlertmanagerError, AlertmanagerInfo, TEMPLATE,
    ("prometheus-alertmanager", DEFAULT_PORT, DEFAULT_DATA_DIR), "--storage.path",
)  # fmt: skip


def find_binary() -> str:
    """The Alertmanager executable (AlertmanagerError: none is installed)."""
    return SERVER.find_binary(BINARIES, SERVER.package)


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

    return SERVER.fill(template, values)


# The text of a config template (its own by default; the server's error: unreadable).
read_template = SERVER.read_template


# The Alertmanager running on a data directory, or None (LocalServer.running).
running = SERVER.running


def wait_until_ready(
    url: str, timeout: float = 30.0, alive: Callable[[], bool] | None = None, guarded: bool = False
) -> None:
    """Block until Alertmanager answers ``/-/ready``.

    Raises:
        AlertmanagerError: when ``timeout`` passes first or ``alive`` reports it died.
    """
    SERVER.wait_until_ready(url, timeout, alive, guarded)


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
        if SERVER.config_differs(data_dir, rendered):
            print(
                "alertmanager-local: note: it keeps the config it was started with; "
                "stop and start it to apply the new one",
                file=sys.stderr,
            )
        return current
    binary = find_binary()
    SERVER.prepare(data_dir, port, rendered)
    url = f"{'https' if tls else 'http'}://{LOOPBACK}:{port}"
    command = SERVER.command(binary, data_dir, port, url, [
        *([f"--web.config.file={web_config}"] if web_config is not None else []),
        # Empty: no cluster, so no gossip port (and no warning about one).
        "--cluster.listen-address=",
    ])  # fmt: skip

    def explain(log: str) -> str | None:
        reason = startup_error(log, SERVER.config_file(data_dir))
        return None if reason is None else f"{reason}\n(rendered from {config})"

    proc = SERVER.launch(
        command, data_dir=data_dir,
        state={"port": port, "url": url, "webhook_url": webhook_url, "tls": tls},
        wait=lambda alive: wait_until_ready(url, timeout, alive, guarded=web_config is not None),
        explain=explain,
    )  # fmt: skip
    return AlertmanagerInfo(proc.pid, port, data_dir, webhook_url, tls)


# Stop it cleanly (LocalServer.stop; True if one ran): it writes its notification log
# and silences first, so the next start knows what was already sent.
stop = SERVER.stop


class Options(RenderingOptions):
    """The options of scripts/alertmanager-local that are not settings."""

    data_dir: Path = Field(DEFAULT_DATA_DIR, description="its config, storage and log")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="API and web port on 127.0.0.1")
    config: Path = Field(TEMPLATE, description="config template to render")


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
    """start or render (LocalServer.main answers stop and status)."""
    settings = load_settings(AlertmanagerLocalSettings, given, SHARED_FILE, flags=FLAGS)
    webhook_url = settings.alert_webhook_url
    if args.command == "render":
        return SERVER.print_or_write(
            render_config(read_template(args.config), webhook_url), args.out
        )
    return SERVER.started(
        start(args.data_dir, args.port, webhook_url=webhook_url, config=args.config)
    )


if __name__ == "__main__":
    entry_point(main)
