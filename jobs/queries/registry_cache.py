"""The device registry in the job: the entries of ``contract.registry`` as a dict (the
overheat rule's thresholds and sites) and as a small local DataFrame (joined by the
windows query's rules), both rebuilt when the file changes.

The file is read on the driver only (``contract.registry.RegistryFile``): strictly at
start, so a bad registry stops the job before it begins; leniently afterwards, so a file
edited badly mid-run skips its bad lines (each one logged) and the job keeps running.
Executors get the registry inside the broadcast join, never the file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from contract.registry import Entry, RegistryError, RegistryFile
from jobs.spark.local_frames import local_frame

__all__ = ["REGISTRY", "Entry", "RegistryCache", "RegistryError"]

# The registry as the windows query's rules join it.
REGISTRY = StructType(
    [
        StructField("sensor_id", StringType()),
        StructField("site", StringType()),
        StructField("max_temp_c", DoubleType()),
    ]
)


def _warn(line: str) -> None:
    print(f"jobs.stream: {line}", file=sys.stderr, flush=True)


class RegistryCache:
    """The registry for each micro-batch; the file is looked at every ``check_every``
    batches. Without a registry file every sensor uses the default thresholds and has
    no site.

    Raises:
        RegistryError: at construction, when the file is missing or bad.
    """

    def __init__(
        self,
        spark: SparkSession,
        path: Path | None,
        check_every: int,
        log: Callable[[str], None] = _warn,
    ) -> None:
        if path is not None and not path.is_file():
            raise RegistryError(f"registry {path} does not exist")
        self.spark, self.path, self.check_every = spark, path, check_every
        self.file = RegistryFile(path, log)
        self._sensors = self.file.current()
        self._batches = 0
        self._frame: DataFrame | None = None
        self._frame_version = -1

    def current(self) -> DataFrame:
        """The registry for this micro-batch (re-read first if the file changed)."""
        self._batches += 1
        if self._batches % self.check_every == 0:
            self._sensors = self.file.current()
        return self.frame()

    def refresh(self) -> int:
        """Read the file again if it changed; returns the entries' version."""
        self._sensors = self.file.current()
        return self.file.version

    def frame(self) -> DataFrame:
        """The registry as last read, as a small DataFrame (a local relation: nothing to cache)."""
        if self._frame is None or self._frame_version != self.file.version:
            rows = [(e.sensor_id, e.site, e.max_temp_c) for e in self._sensors.values()]
            self._frame = local_frame(self.spark, rows, REGISTRY)
            self._frame_version = self.file.version
        return self._frame

    def sensors(self) -> dict[str, Entry]:
        """The registry by sensor_id (empty without a registry file); read it after
        :meth:`current` for the same version of the file."""
        return self._sensors

    @property
    def enabled(self) -> bool:
        """True when a registry file is in use."""
        return self.path is not None
