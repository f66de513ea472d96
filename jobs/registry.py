"""The device registry: cached as a DataFrame (joined by the windows query's rules) and as
a dict (the overheat rule's thresholds and sites), re-read when its file changes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

# What the job uses of a registry line (producer/fleet.py writes more).
REGISTRY = StructType(
    [
        StructField("sensor_id", StringType()),
        StructField("site", StringType()),
        StructField("max_temp_c", DoubleType()),
    ]
)


class Sensor(NamedTuple):
    """What the overheat rule needs of a registered sensor."""

    site: str | None
    max_temp_c: float | None


class RegistryError(ValueError):
    """The registry file is missing or malformed; the message says where."""


def load_registry(spark: SparkSession, path: Path) -> DataFrame:
    """Read and check a registry (JSON lines): one row per sensor_id, cached.

    Raises:
        RegistryError: unreadable file, a line that is not a JSON object of the right
            types, a missing sensor_id, or a sensor listed twice.
    """
    if not path.is_file():
        raise RegistryError(f"registry {path} does not exist")
    corrupt = "_corrupt_record"
    schema = StructType([*REGISTRY.fields, StructField(corrupt, StringType())])
    raw = spark.read.schema(schema).option("mode", "PERMISSIVE").json(str(path)).cache()
    bad = raw.filter(F.col(corrupt).isNotNull() | F.col("sensor_id").isNull()).limit(3).collect()
    if bad:
        sample = bad[0][corrupt] or "a line without sensor_id"
        raise RegistryError(f"registry {path}: malformed line(s), e.g. {sample[:120]!r}")
    twice = raw.groupBy("sensor_id").count().filter("count > 1").limit(3).collect()
    if twice:
        raise RegistryError(
            f"registry {path}: sensor_id listed more than once: {[r.sensor_id for r in twice]}"
        )
    registry = raw.select(*REGISTRY.fieldNames()).cache()
    registry.count()  # materialise the cache: later micro-batches never re-read the file
    raw.unpersist()
    return registry


class RegistryCache:
    """The registry DataFrame, re-read when the file changes (checked every N batches).

    Without a registry file every sensor uses the default thresholds and has no site.
    """

    def __init__(self, spark: SparkSession, path: Path | None, check_every: int) -> None:
        self.spark, self.path, self.check_every = spark, path, check_every
        self._batches = 0
        self._signature: tuple[float, int] | None = None
        self._frame: DataFrame | None = None
        self._sensors: dict[str, Sensor] = {}
        if path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        stat = os.stat(self.path) if self.path.exists() else None
        frame = load_registry(self.spark, self.path)
        if self._frame is not None:
            self._frame.unpersist()
        self._frame = frame
        self._sensors = {row.sensor_id: Sensor(row.site, row.max_temp_c) for row in frame.collect()}
        self._signature = (stat.st_mtime, stat.st_size) if stat else None

    def current(self) -> DataFrame:
        """The registry for this micro-batch (re-read first if the file changed)."""
        if self.path is None:
            return self.spark.createDataFrame([], REGISTRY)
        self._batches += 1
        if self._batches % self.check_every == 0:
            stat = os.stat(self.path)
            if (stat.st_mtime, stat.st_size) != self._signature:
                self._load()
        assert self._frame is not None
        return self._frame

    def sensors(self) -> dict[str, Sensor]:
        """The registry as a dict by sensor_id (empty without a registry file); read it
        after :meth:`current` for the same version of the file."""
        return self._sensors

    @property
    def enabled(self) -> bool:
        """True when a registry file is in use."""
        return self.path is not None
