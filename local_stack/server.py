"""What every local server shares (``scripts/kafka-local``, ``mqtt-local``,
``alertmanager-local``, ``prometheus-local``, ``s3-local``), so that each server's module
says only what is particular to it.

- One process per data directory, found again by a state file that names it; a pid
  reused by another process is told apart by an argument naming the data directory.
- A start in a session of its own (Ctrl-C in the terminal that started it must not stop
  it), its output appended to a log, waited for until it answers; one that does not come
  up is stopped, and the error says why in the log's words or shows the log's tail.
- A clean stop: SIGTERM, SIGKILL after a timeout.
- A config rendered from a template of the project's (``${NAME}`` placeholders).
- The command line ``start | stop | status`` (and each server's own commands), made by
  conf/cli.py like every program's; ``stop`` and ``status`` answered here for all, each
  server's listeners printed as ``name=address`` lines; errors in one line, exit status
  2; Ctrl-C, 130.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

import psutil
from pydantic import BaseModel

from common.waiting import poll_until
from conf.cli import read_command_line
from conf.settings.base import SettingsError

# Every local server listens on loopback only.
LOOPBACK = "127.0.0.1"
# How long a local server's clean stop may take before it is killed, unless it says.
STOP_TIMEOUT = 30.0

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound="RunningServer")


# Where free_port looks first: below the kernel's ephemeral ports (Linux: 32768 and up).
FREE_PORTS_FROM = 20_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_pick = random.Random()


def free_port() -> int:
    """A TCP port free on loopback right now, for a server the caller starts soon after.

    Taken below the kernel's range of ephemeral ports where there is room: a port of that
    range, free when looked at, can become an outgoing connection's own before the server
    binds it (a Kafka client's, a container's), and the server then fails with "address
    already in use" (seen in CI, 2026-12-07). Elsewhere, one the kernel picks."""
    try:
        first_ephemeral = int(_EPHEMERAL_RANGE.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32_768  # Linux's default
    for _ in range(50 if first_ephemeral > FREE_PORTS_FROM + 1000 else 0):
        port = _pick.randrange(FREE_PORTS_FROM, first_ephemeral)
        with socket.socket() as s:
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                continue  # in use, or lingering after a close
            return port
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def on_loopback(port: int | None) -> str | None:
    """``host:port`` of a listener on loopback at ``port``; None for a listener it has not."""
    return None if port is None else f"{LOOPBACK}:{port}"


def port_in_use(port: int) -> bool:
    """True when something listens on ``port`` on loopback."""
    with socket.socket() as s:
        return s.connect_ex((LOOPBACK, port)) == 0


def running_state(state: Path, marker: str) -> dict[str, Any] | None:
    """The state (pid, ports ...) of the server the file ``state`` describes, or None
    when it is not running; a stale file is removed.

    ``marker`` is an argument of the server's command line that names its data
    directory: a reused pid belongs to another process, which does not have it.
    """
    try:
        info = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        proc = psutil.Process(info["pid"])
        alive = proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        ours = marker in proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        alive = ours = False
    if alive and ours:
        return info
    state.unlink(missing_ok=True)
    return None


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds a secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    path.chmod(0o600)


def wait_for_server(
    name: str,
    answers: Callable[[], bool],
    timeout: float,
    every: float,
    alive: Callable[[], bool] | None,
    error: type[Exception],
) -> None:
    """Block until ``answers()`` is true; ``name`` (``"Prometheus at <url>"``) in the errors.

    Raises:
        error: when ``timeout`` passes first or ``alive`` reports the server died.
    """

    def ready() -> bool:
        if alive is not None and not alive():
            raise error(f"{name} exited while starting")
        return answers()

    if not poll_until(ready, timeout, every):
        raise error(f"{name} did not answer within {timeout:.0f}s")


def stop_process(pid: int, state: Path, timeout: float) -> None:
    """SIGTERM ``pid``, SIGKILL after ``timeout``; returns once it is gone and ``state``
    is removed."""
    try:
        proc = psutil.Process(pid)
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    except psutil.NoSuchProcess:
        pass  # gone already (its parent reaped it)
    state.unlink(missing_ok=True)


def print_exports(variables: dict[str, str]) -> None:
    """``variables`` as shell ``export`` lines, for ``eval "$(...)"``."""
    for name, value in variables.items():
        print(f"export {name}={shlex.quote(value)}")


def log_tail(path: Path | str, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (or of a log's text), for error messages."""
    if isinstance(path, Path):
        try:
            path = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
    return "\n".join(path.splitlines()[-lines:]) or "(empty)"


def logfmt_value(line: str, key: str) -> str | None:
    """The value of ``key`` in a logfmt line (Alertmanager's, Prometheus'), unquoted."""
    match = re.search(rf'\b{key}="((?:[^"\\]|\\.)*)"', line) or re.search(rf"\b{key}=(\S+)", line)
    if match is None:
        return None
    try:
        return json.loads(f'"{match.group(1)}"')  # Go's quoting is close enough to JSON's
    except ValueError:
        return match.group(1)


# A config template's placeholders: ${NAME}, in upper case (conf/alertmanager.yml,
# conf/prometheus/prometheus.yml).
_PLACEHOLDER = re.compile(r"\$\{([A-Z_]+)\}")


def fill_template(template: str, values: dict[str, str], error: type[Exception]) -> str:
    """``template`` with each ``${NAME}`` outside comments replaced by ``values[NAME]``.

    Raises:
        error: a placeholder that ``values`` does not name.
    """

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise error(
                f"unknown placeholder {match.group(0)} in the config; known: "
                + ", ".join(f"${{{name}}}" for name in values)
            )
        return values[match.group(1)]

    return "".join(
        line if line.lstrip().startswith("#") else _PLACEHOLDER.sub(fill, line)
        for line in template.splitlines(keepends=True)
    )


def read_text_or(path: Path, error: type[Exception]) -> str:
    """The text of a config file.

    Raises:
        error: it cannot be read.
    """
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read the config {path}: {exc.strerror}") from None


@dataclass(frozen=True)
class RunningServer:
    """A local server that runs: its process, its (first) port on loopback and its data
    directory. Each server's own kind adds its other listeners."""

    pid: int
    port: int
    data_dir: Path

    # Its listeners, by the name start and status print them under: the field of each
    # one's port. A server whose clients take a URL says its addresses itself.
    LISTENERS: ClassVar[dict[str, str]] = {}

    def listener(self, name: str) -> str | None:
        """``host:port`` of its listener ``name`` (of ``LISTENERS``), None when it was not
        started with it."""
        return on_loopback(getattr(self, self.LISTENERS[name]))

    def addresses(self) -> dict[str, str | None]:
        """Its listeners by the name start and status print them under (None: one it was
        not started with)."""
        return {name: self.listener(name) for name in self.LISTENERS}

    @property
    def detail(self) -> str:
        """What status (and start, unless it says more) tells of it besides its pid and
        data directory: its own settings."""
        return ""


@dataclass(frozen=True)
class RunningHttpServer(RunningServer):
    """A local server whose clients take a URL (an HTTP API): start and status print it
    under ``URL_NAME``."""

    URL_NAME: ClassVar[str] = "url"

    @property
    def url(self) -> str:
        """Base URL of its API."""
        return f"http://{LOOPBACK}:{self.port}"

    def addresses(self) -> dict[str, str | None]:
        """Its URL, by the name start and status print it under."""
        return {self.URL_NAME: self.url}


class LocalServerError(RuntimeError):
    """A local server could not be started, reached or stopped; the message says why.
    Each server has its own kind (``BrokerError``, ``PrometheusError`` ...)."""


@dataclass(frozen=True)
class LocalServer(Generic[R]):
    """One kind of local server: its program name (messages begin with it), the names of
    its state file and log in a data directory, its error, ``marker``: the argument of
    its command line that names the data directory (:func:`running_state`), ``kind``:
    what a running one is, its default data directory, and how long a clean stop may take
    before it is killed."""

    program: str
    state_name: str
    log_name: str
    error: type[Exception]
    marker: Callable[[Path], str]
    kind: type[R]
    default_data_dir: Path
    stop_timeout: float

    @classmethod
    def of(
        cls,
        program: str,
        stem: str,
        error: type[Exception],
        marker: Callable[[Path], str],
        kind: type[R],
        default_data_dir: Path,
        stop_timeout: float = STOP_TIMEOUT,
    ) -> LocalServer[R]:
        """The server ``program`` whose state file and log are ``stem``.json and .log."""
        return cls(
            program, f"{stem}.json", f"{stem}.log", error, marker, kind, default_data_dir,
            stop_timeout,
        )  # fmt: skip

    def state_file(self, data_dir: Path) -> Path:
        """Where the server of ``data_dir`` is recorded."""
        return data_dir.resolve() / self.state_name

    def log_file(self, data_dir: Path) -> Path:
        """The log of the server of ``data_dir``."""
        return data_dir.resolve() / self.log_name

    def found(self, data_dir: Path) -> dict[str, Any] | None:
        """The state of the server running on ``data_dir`` (see :func:`running_state`)."""
        return running_state(self.state_file(data_dir), self.marker(data_dir.resolve()))

    def running(self, data_dir: Path | None = None) -> R | None:
        """The server running on ``data_dir`` (its default one), its other fields read
        from the state file (as ``launch`` recorded them), or None; a stale state file is
        removed (see :func:`found`)."""
        data_dir = self.default_data_dir if data_dir is None else data_dir
        state = self.found(data_dir)
        if state is None:
            return None
        extra = {f.name for f in fields(self.kind)} - {f.name for f in fields(RunningServer)}
        known = {name: state[name] for name in extra if name in state}
        return self.kind(state["pid"], state["port"], data_dir.resolve(), **known)

    def stop(self, data_dir: Path | None = None, timeout: float | None = None) -> bool:
        """Stop the server of ``data_dir`` (its default one) cleanly, killed after
        ``timeout`` (its own); True if one was running. Returns once it is gone."""
        data_dir = self.default_data_dir if data_dir is None else data_dir
        info = self.found(data_dir)
        if info is None:
            return False
        timeout = self.stop_timeout if timeout is None else timeout
        stop_process(info["pid"], self.state_file(data_dir), timeout)
        return True

    def check_same(
        self,
        data_dir: Path,
        what: str,
        running: dict[str, int | None],
        wanted: dict[str, int | None],
    ) -> None:
        """Raise the server's error when ``what`` (``"a broker"``) already runs on
        ``data_dir`` with other ports than ``wanted`` (by flag: ``{"--port": 9092}``)."""
        if running != wanted:
            port = next(iter(running.values()))
            extra = ", ".join(f"{flag} {p}" for flag, p in list(running.items())[1:] if p)
            raise self.error(
                f"{what} already runs on {data_dir} at port {port}"
                + (f" ({extra})" if extra else "")
                + "; stop it first to start it with other ports"
            )

    def read_config(self, path: Path) -> str:
        """The text of a config template.

        Raises:
            the server's error: it cannot be read.
        """
        return read_text_or(path, self.error)

    def write_config(self, path: Path, rendered: str) -> None:
        """A rendered config into ``path``, world-readable (the server may run as another
        user, as in compose); a folder this user cannot write is one clear error."""
        try:
            path.write_text(rendered, encoding="utf-8")
            path.chmod(0o644)
        except OSError as exc:
            raise self.error(
                f"cannot write {path}: {exc.strerror} (running as uid {os.getuid()})"
            ) from None

    def find_binary(self, names: Sequence[str], package: str) -> str:
        """The first of ``names`` installed (a path, or a name on PATH).

        Raises:
            the server's error: none is, with how to install it (Debian's ``package``).
        """
        for name in names:
            found = shutil.which(name)
            if found:
                return found
        program = Path(names[-1]).name
        raise self.error(
            f"no {program} binary ({names[0]} or {program} on PATH): run scripts/setup, "
            f"or apt-get install {package}"
        )

    def check_free(self, port: int | None, flag: str = "--port", hint: str = "") -> None:
        """Raise the server's error when ``port`` is taken on loopback."""
        if port is not None and port_in_use(port):
            raise self.error(
                f"port {port} on {LOOPBACK} is already in use{hint}; choose another {flag}"
            )

    def launch(
        self,
        command: Sequence[str],
        *,
        data_dir: Path,
        state: dict[str, Any],
        wait: Callable[[Callable[[], bool]], None],
        explain: Callable[[str], str | None] = lambda _log: None,
        logs: Sequence[Path] = (),
        failures: tuple[type[Exception], ...] = (),
    ) -> subprocess.Popen[bytes]:
        """Start ``command`` in a session of its own, its output appended to its log,
        record it (``state`` beside its pid) and ``wait(alive)`` until it answers.

        Raises:
            the server's error: it did not come up (``wait`` raised it, or one of
                ``failures``); the server is stopped, and the message is ``explain``'s
                reading of what it logged, or the tail of its log (and of ``logs``).
        """
        log = self.log_file(data_dir)
        log_start = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                list(command),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.state_file(data_dir).write_text(json.dumps({"pid": proc.pid, **state}), "utf-8")
        try:
            wait(lambda: proc.poll() is None)
        except (self.error, *failures) as exc:
            if proc.poll() is None:  # still ours: a pid that ended may already be another's
                stop_process(proc.pid, self.state_file(data_dir), 30.0)
            self.state_file(data_dir).unlink(missing_ok=True)
            proc.wait(timeout=30)
            with open(log, "rb") as f:
                f.seek(log_start)
                this_start = f.read().decode("utf-8", errors="replace")
            reason = explain(this_start)
            if reason is not None:
                raise self.error(reason) from None
            tails = "".join(f"\n--- {other} (tail) ---\n{log_tail(other)}" for other in logs)
            raise self.error(
                f"{exc}\n--- {log} (tail) ---\n{log_tail(this_start)}{tails}"
            ) from None
        return proc

    # --- the command line -------------------------------------------------------------

    def options(
        self,
        model: type[M],
        argv: Sequence[str] | None,
        description: str,
        settings: type[Any] | None = None,
        flags: dict[str, str] | None = None,
    ) -> tuple[dict[str, Any], M]:
        """The server's command line: its options (``model``) and the settings given as
        flags, made by conf/cli.py like every program's (``--help``: each with its
        default).

        Raises:
            SettingsError: a bad option value, one line per flag.
        """
        given, options = read_command_line(
            settings, argv, prog=f"scripts/{self.program}", description=description,
            options=model, flags=flags,
        )  # fmt: skip
        assert options is not None
        return given, options

    def main(
        self,
        argv: Sequence[str] | None,
        model: type[M],
        description: str,
        command: Callable[[dict[str, Any], M], int],
        settings: type[Any] | None = None,
        flags: dict[str, str] | None = None,
    ) -> int:
        """The server's command line run: ``stop`` and ``status`` answered here (``model``
        has its ``command`` and ``data_dir``), any other the exit status of
        ``command(settings given as flags, options)``; its error (or a setting's) said in
        one line: 2."""
        try:
            given, options = self.options(model, argv, description, settings, flags)
            data_dir = options.data_dir  # type: ignore[attr-defined]
            if options.command == "stop":  # type: ignore[attr-defined]
                return self.stopped(self.stop(data_dir))
            if options.command == "status":  # type: ignore[attr-defined]
                return self.status(self.running(data_dir), data_dir)
            return command(given, options)
        except (SettingsError, self.error) as exc:
            print(f"{self.program}: {exc}", file=sys.stderr)
            return 2

    def started(self, info: R, detail: str | None = None, log: Path | None = None) -> int:
        """What ``start`` says: the server, its log (``log``: its own) and ``detail`` (its
        own) on stderr, then its ``name=address`` lines on stdout (what run-local reads);
        0."""
        log = self.log_file(info.data_dir) if log is None else log
        detail = info.detail if detail is None else detail
        print(
            f"{self.program}: running, pid {info.pid}, log {log}"
            + (f", {detail}" if detail else ""),
            file=sys.stderr,
        )
        for name, address in info.addresses().items():
            if address:
                print(f"{name}={address}", flush=True)
        return 0

    def stopped(self, was_running: bool) -> int:
        """What ``stop`` says; 0."""
        print(f"{self.program}: stopped" if was_running else f"{self.program}: was not running")
        return 0

    def status(self, info: R | None, data_dir: Path) -> int:
        """What ``status`` says: the running server (``info``) and its ``name=address``
        lines (0), or that none runs on ``data_dir`` (1)."""
        if info is None:
            print(f"{self.program}: stopped ({data_dir.resolve()})")
            return 1
        detail = f", {info.detail}" if info.detail else ""
        print(f"{self.program}: running, pid {info.pid}, data {info.data_dir}{detail}")
        for name, address in info.addresses().items():
            if address:
                print(f"{name}={address}")
        return 0


def http_ready(url: str, timeout: float = 2.0, guarded: bool = False) -> bool:
    """True when ``GET {url}/-/ready`` answers 200 (Alertmanager, Prometheus); ``guarded``
    (behind a web config's basic auth or TLS, whose credentials this probe does not hold):
    when it answers at all, a 401 or over a certificate it does not check."""
    context = ssl._create_unverified_context() if guarded else None
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=timeout, context=context) as answer:
            return answer.status == 200
    except urllib.error.HTTPError as exc:
        return guarded and exc.code == 401
    except (OSError, urllib.error.URLError):
        return False


def entry_point(main: Callable[[], int]) -> NoReturn:
    """Run a server's ``main`` as its script: Ctrl-C while it waits exits 130 (the caller,
    such as run-local, cleans up)."""
    try:
        status = main()
    except KeyboardInterrupt:
        status = 130
    raise SystemExit(status)
