"""The device registry for the ops view: per-sensor critical thresholds, read with no JVM.

Same file as the job's ``--registry`` (JSON lines, as ``python -m producer --registry-out``
writes it); only ``sensor_id`` and ``max_temp_c`` matter here.
"""

from __future__ import annotations

import json
from pathlib import Path


class RegistryError(ValueError):
    """The registry file cannot be used; the message says where."""


def read_max_temps(path: Path) -> dict[str, float | None]:
    """sensor_id -> max_temp_c (None: the default critical threshold applies).

    Raises:
        RegistryError: unreadable file or a line that is not an object with a sensor_id.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RegistryError(f"registry {path}: {exc.strerror}") from None
    thresholds: dict[str, float | None] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            sensor = entry["sensor_id"]
            limit = entry.get("max_temp_c")
            thresholds[str(sensor)] = None if limit is None else float(limit)
        except (ValueError, TypeError, KeyError, AttributeError):
            raise RegistryError(
                f"registry {path} line {number}: expected a JSON object with sensor_id "
                f"(and a numeric max_temp_c or null), got {line[:80]!r}"
            ) from None
    return thresholds


class MaxTemps:
    """The registry's thresholds, re-read when the file changes (the job re-reads it too).

    A file that does not exist (yet) means default thresholds; a file that turns bad
    after a good read keeps the last good thresholds.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._signature: tuple[float, int] | None = None
        self._thresholds: dict[str, float | None] = {}

    def current(self) -> dict[str, float | None]:
        """sensor_id -> max_temp_c as the file says now.

        Raises:
            RegistryError: only on the first read of a file that exists.
        """
        if self.path is None:
            return {}
        try:
            stat = self.path.stat()
        except OSError:
            return self._thresholds
        signature = (stat.st_mtime, stat.st_size)
        if signature != self._signature:
            try:
                self._thresholds = read_max_temps(self.path)
            except RegistryError:
                if self._signature is None:
                    raise
            self._signature = signature
        return self._thresholds
