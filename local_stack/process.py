"""What the local servers (``scripts/kafka-local``, ``alertmanager-local``, ``s3-local``)
share: a state file per data directory naming the running process, waiting for it to
answer, and a clean stop."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from contract.waiting import poll_until


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


def write_state(state: Path, **info: Any) -> None:
    """Record a started server (its ``pid`` and whatever else finds it again)."""
    state.write_text(json.dumps(info), encoding="utf-8")


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
    proc = psutil.Process(pid)
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except psutil.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
    state.unlink(missing_ok=True)


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
