"""The device registry: the one reader of the fleet file (JSON lines, one sensor a line).

``python -m producer --registry-out`` writes it; the job (sites, per-sensor thresholds)
and the dashboard (thresholds) read it here, with no JVM. A line needs ``sensor_id`` (a
non-empty string) and may give ``site`` (a string) and ``max_temp_c`` (a finite number:
the sensor's critical threshold); ``null`` or absent means unknown site or the default
threshold; ``device_model`` (a string) is what alert rules scope models by; other keys
(room, firmware, ...) are the fleet's and ignored here.

Two ways to read: strict, where a bad file must stop a program before it starts (the
first problem raises, naming the file and line); lenient, where a running job must keep
going (each bad line is skipped and the reason logged, the rest is used).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class RegistryError(ValueError):
    """The registry file cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Entry:
    """What SensorWatch uses of one registered sensor."""

    sensor_id: str
    site: str | None
    max_temp_c: float | None
    model: str | None = None  # the line's device_model: alert rules can scope by it


def _entry(text: str, seen: dict[str, Entry]) -> Entry:
    """One line as an entry; ValueError says what is wrong with it."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    sensor_id = value.get("sensor_id")
    if not isinstance(sensor_id, str) or not sensor_id.strip():
        raise ValueError("sensor_id: expected a non-empty string")
    site = value.get("site")
    if site is not None and not isinstance(site, str):
        raise ValueError(f"site of {sensor_id}: expected a string or null")
    limit = value.get("max_temp_c")
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int | float) or not math.isfinite(limit)
    ):
        raise ValueError(f"max_temp_c of {sensor_id}: expected a finite number or null")
    model = value.get("device_model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"device_model of {sensor_id}: expected a string or null")
    if sensor_id in seen:
        raise ValueError(f"sensor_id {sensor_id} listed more than once")
    return Entry(sensor_id, site, None if limit is None else float(limit), model)


def read_registry(
    path: Path, *, lenient: bool = False, log: Callable[[str], None] | None = None
) -> dict[str, Entry]:
    """The registry at ``path`` by sensor_id.

    Strict (default): the first bad line raises. Lenient: a bad line is skipped and
    ``log`` told why, one line each; a sensor listed twice keeps its first entry.

    Raises:
        RegistryError: the file cannot be read, or (strict) a line is bad.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise RegistryError(f"registry {path}: {reason}") from None
    entries: dict[str, Entry] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = _entry(line, entries)
        except ValueError as exc:
            problem = f"registry {path} line {number}: {exc}: {line[:80]!r}"
            if not lenient:
                raise RegistryError(problem) from None
            if log is not None:
                log(f"{problem}; line skipped")
            continue
        entries[entry.sensor_id] = entry
    return entries


class RegistryFile:
    """A registry file followed as it changes (a new fleet, edited thresholds).

    The first read is strict: a program refuses a bad registry at start. Later reads,
    when the file's modification time or size changed, are lenient: a running job keeps
    going, skipping the bad lines (each logged) and keeping the last entries read when
    the file cannot be read at all (said once). A file that does not exist yet means no
    registered sensors until it appears.
    """

    def __init__(self, path: Path | None, log: Callable[[str], None] | None = None) -> None:
        self.path, self.log = path, log
        self.version = 0  # bumped on every change of the entries
        self._signature: tuple[float, int] | None = None
        self._entries: dict[str, Entry] = {}
        self._unreadable = False

    def _say(self, line: str) -> None:
        if self.log is not None:
            self.log(line)

    def current(self) -> dict[str, Entry]:
        """The entries by sensor_id as the file says now (re-read if it changed).

        Raises:
            RegistryError: on the first read of a file that exists, if it is bad.
        """
        if self.path is None:
            return self._entries
        try:
            stat = self.path.stat()
        except OSError:
            return self._entries  # not there (yet, or any more): keep what was read
        signature = (stat.st_mtime, stat.st_size)
        if signature == self._signature:
            return self._entries
        first = self._signature is None
        try:
            entries = read_registry(self.path, lenient=not first, log=self._say)
        except RegistryError as exc:
            if first:
                raise
            if not self._unreadable:
                self._say(f"{exc}; keeping the {len(self._entries)} sensors read before")
            self._unreadable = True
            return self._entries
        self._unreadable = False
        self._signature = signature
        if entries != self._entries:
            self._entries = entries
            self.version += 1
        return self._entries
