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

import argparse
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conf.paths import PROJECT_ROOT, VAR_DIR
from conf.settings.base import SHARED_FILE, SettingsError, env_name, load_settings
from local_stack.kafka import LOOPBACK
from local_stack.kafka import _port_in_use as port_in_use
from local_stack.kafka import free_port as free_port  # one definition, used here too
from local_stack.process import (
    fill_template,
    read_text_or,
    running_state,
    stop_process,
    wait_for_server,
    write_state,
)
from local_stack.settings import AlertmanagerLocalSettings

DEFAULT_DATA_DIR = VAR_DIR / "alertmanager"
DEFAULT_PORT = 9093

TEMPLATE = PROJECT_ROOT / "conf" / "alertmanager.yml"
# Debian's package name first; "alertmanager" is the upstream release's binary.
BINARIES = ("/usr/bin/prometheus-alertmanager", "prometheus-alertmanager", "alertmanager")


class AlertmanagerError(RuntimeError):
    """Alertmanager could not be started, reached or stopped; the message says why."""


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
    """The Alertmanager executable.

    Raises:
        AlertmanagerError: none is installed, with how to install it.
    """
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    raise AlertmanagerError(
        "no Alertmanager binary (/usr/bin/prometheus-alertmanager or alertmanager on PATH): "
        "run scripts/setup, or apt-get install prometheus-alertmanager"
    )


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
    """The text of a config template.

    Raises:
        AlertmanagerError: it cannot be read.
    """
    return read_text_or(path, AlertmanagerError)


def _state_file(data_dir: Path) -> Path:
    return data_dir / "alertmanager.json"


def _storage(data_dir: Path) -> Path:
    return data_dir / "data"


def log_file(data_dir: Path) -> Path:
    """The log of the Alertmanager of ``data_dir``."""
    return data_dir.resolve() / "alertmanager.log"


def running(data_dir: Path = DEFAULT_DATA_DIR) -> AlertmanagerInfo | None:
    """The Alertmanager running on ``data_dir``, or None (a stale state file is removed)."""
    data_dir = data_dir.resolve()
    info = running_state(_state_file(data_dir), f"--storage.path={_storage(data_dir)}")
    if info is None:
        return None
    return AlertmanagerInfo(
        info["pid"], info["port"], data_dir, info.get("webhook_url"), info.get("tls", False)
    )


def is_ready(url: str, timeout: float = 2.0, guarded: bool = False) -> bool:
    """True when ``GET {url}/-/ready`` answers 200; ``guarded`` (behind a web config's
    basic auth or TLS, whose credentials this probe does not hold): when it answers at
    all, a 401 or over a certificate it does not check. The clients check both."""
    context = ssl._create_unverified_context() if guarded else None
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=timeout, context=context) as answer:
            return answer.status == 200
    except urllib.error.HTTPError as exc:
        return guarded and exc.code == 401
    except (OSError, urllib.error.URLError):
        return False


def wait_until_ready(
    url: str, timeout: float = 30.0, alive: Callable[[], bool] | None = None, guarded: bool = False
) -> None:
    """Block until Alertmanager answers ``/-/ready``.

    Raises:
        AlertmanagerError: when ``timeout`` passes first or ``alive`` reports it died.
    """
    wait_for_server(
        f"Alertmanager at {url}",
        lambda: is_ready(url, guarded=guarded),
        timeout,
        0.1,
        alive,
        AlertmanagerError,
    )


def _logfmt_value(line: str, key: str) -> str | None:
    match = re.search(rf'\b{key}="((?:[^"\\]|\\.)*)"', line) or re.search(rf"\b{key}=(\S+)", line)
    if match is None:
        return None
    try:
        return json.loads(f'"{match.group(1)}"')  # Go's quoting is close enough to JSON's
    except ValueError:
        return match.group(1)


def startup_error(log: str, config: Path) -> str | None:
    """What the log of a failed start says went wrong, in plain words, if it says."""
    for line in log.splitlines():
        if 'msg="Loading configuration file failed"' in line:
            # The way `amtool check-config` reports it.
            return f"config invalid: Checking '{config}'  FAILED: {_logfmt_value(line, 'err')}"
        if "level=error" in line and "address already in use" in line:
            return f"port in use: {_logfmt_value(line, 'err')}"
    return None


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


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
        if current.port != port:
            raise AlertmanagerError(
                f"an Alertmanager already runs on {data_dir} at port {current.port}; "
                f"stop it first to use port {port}"
            )
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
    if port_in_use(port):
        hint = (
            " (the Debian package's system service? sudo systemctl disable --now "
            "prometheus-alertmanager)"
            if port == DEFAULT_PORT
            else ""
        )
        raise AlertmanagerError(
            f"port {port} on {LOOPBACK} is already in use{hint}; choose another --port"
        )
    _storage(data_dir).mkdir(parents=True, exist_ok=True)
    config_file = data_dir / "alertmanager.yml"
    config_file.write_text(rendered, encoding="utf-8")
    log = log_file(data_dir)
    log_start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        # A session of its own: Ctrl-C in the terminal that started it must not stop it.
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_file}",
                f"--storage.path={_storage(data_dir)}",
                f"--web.listen-address={LOOPBACK}:{port}",
                f"--web.external-url={'https' if tls else 'http'}://{LOOPBACK}:{port}",
                *([f"--web.config.file={web_config}"] if web_config is not None else []),
                # Empty: no cluster, so no gossip port (and no warning about one).
                "--cluster.listen-address=",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    write_state(
        _state_file(data_dir),
        pid=proc.pid,
        port=port,
        url=f"{'https' if tls else 'http'}://{LOOPBACK}:{port}",
        webhook_url=webhook_url,
        tls=tls,
    )
    info = AlertmanagerInfo(proc.pid, port, data_dir, webhook_url, tls)
    try:
        wait_until_ready(
            info.url, timeout, alive=lambda: proc.poll() is None, guarded=web_config is not None
        )
    except AlertmanagerError as exc:
        stop(data_dir)
        if proc.poll() is None:  # not ours to find by the state file any more: end it here
            proc.kill()
        proc.wait(timeout=10)
        with open(log, "rb") as f:
            f.seek(log_start)
            this_start = f.read().decode("utf-8", errors="replace")
        reason = startup_error(this_start, config_file)
        if reason is not None:
            raise AlertmanagerError(f"{reason}\n(rendered from {config})") from None
        raise AlertmanagerError(f"{exc}\n--- {log} (tail) ---\n{_tail(this_start)}") from None
    return info


def stop(data_dir: Path = DEFAULT_DATA_DIR, timeout: float = 30.0) -> bool:
    """Stop the Alertmanager on ``data_dir`` cleanly (SIGTERM, SIGKILL after ``timeout``).

    A clean stop writes the notification log and silences to the data dir, so the next
    start knows what was already sent. Returns True if one was running; returns only
    once its process is gone.
    """
    info = running(data_dir)
    if info is None:
        return False
    stop_process(info.pid, _state_file(info.data_dir), timeout)
    return True


def _settings(webhook_url: str | None) -> AlertmanagerLocalSettings:
    return load_settings(
        AlertmanagerLocalSettings,
        {"alert_webhook_url": webhook_url},
        SHARED_FILE,
        flags={"alert_webhook_url": "--webhook-url"},
    )


def write_config(path: Path, rendered: str) -> None:
    """The rendered config into ``path``, world-readable (Alertmanager may run as another
    user, as in compose); a folder this user cannot write is one clear error."""
    try:
        path.write_text(rendered, encoding="utf-8")
        path.chmod(0o644)
    except OSError as exc:
        raise AlertmanagerError(
            f"cannot write {path}: {exc.strerror} (running as uid {os.getuid()})"
        ) from None


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | render."""
    parser = argparse.ArgumentParser(
        prog="scripts/alertmanager-local",
        description="A real Prometheus Alertmanager on 127.0.0.1 (Debian's "
        "prometheus-alertmanager), configured from conf/alertmanager.yml.",
    )
    parser.add_argument(
        "command",
        choices=["start", "stop", "status", "render"],
        help="render: print the config that start would use",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR,
        help=f"its config, storage and log (default: {DEFAULT_DATA_DIR})",
    )  # fmt: skip
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT,
        help=f"API and web port on 127.0.0.1 (default: {DEFAULT_PORT})",
    )  # fmt: skip
    parser.add_argument(
        "--webhook-url",
        metavar="URL",
        help="where the sensorwatch receiver posts notifications (env "
        f"{env_name('alert_webhook_url')}; default: none, the receiver sends nothing)",
    )
    parser.add_argument(
        "--config", type=Path, default=TEMPLATE,
        help=f"config template to render (default: {TEMPLATE.relative_to(PROJECT_ROOT)})",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, metavar="FILE",
        help="render: write the config to FILE instead of printing it",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        if args.command in ("start", "render"):
            webhook_url = _settings(args.webhook_url).alert_webhook_url
        if args.command == "render":
            rendered = render_config(read_template(args.config), webhook_url)
            if args.out is None:
                sys.stdout.write(rendered)
            else:
                write_config(args.out, rendered)
            return 0
        if args.command == "start":
            info = start(args.data_dir, args.port, webhook_url=webhook_url, config=args.config)
            print(
                f"alertmanager-local: running, pid {info.pid}, log {log_file(info.data_dir)}, "
                f"webhook {info.webhook_url or 'none'}",
                file=sys.stderr,
            )
            print(f"alertmanager={info.url}", flush=True)
            return 0
        if args.command == "stop":
            was_running = stop(args.data_dir)
            print(
                "alertmanager-local: stopped"
                if was_running
                else "alertmanager-local: was not running"
            )
            return 0
        info = running(args.data_dir)
        if info is None:
            print(f"alertmanager-local: stopped ({args.data_dir.resolve()})")
            return 1
        print(
            f"alertmanager-local: running, pid {info.pid}, data {info.data_dir}, "
            f"webhook {info.webhook_url or 'none'}"
        )
        print(f"alertmanager={info.url}")
        return 0
    except SettingsError as exc:
        print(f"alertmanager-local: {exc}", file=sys.stderr)
        return 2
    except AlertmanagerError as exc:
        print(f"alertmanager-local: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    try:
        status = main()
    except KeyboardInterrupt:  # Ctrl-C while it waits: the caller (run-local) cleans up
        status = 130
    raise SystemExit(status)
