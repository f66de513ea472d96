"""What every query of the job shares: session, settings, lake, registry, output."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession

from conf.settings import JobSettings
from jobs.alerts import overheat_threshold
from jobs.registry import RegistryCache, Sensor
from jobs.tables import Lake


@dataclass
class JobContext:
    """Shared by the queries' micro-batch functions, which run on different threads."""

    spark: SparkSession
    settings: JobSettings
    lake: Lake
    registry_cache: RegistryCache
    echo: Callable[[str], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # The overheat threshold expression of the registry version it was built from.
    _threshold: tuple[dict[str, Sensor], Column] | None = None

    def registry(self) -> DataFrame:
        """The device registry for this micro-batch (re-read if its file changed)."""
        with self._lock:
            return self.registry_cache.current()

    def overheat_inputs(self) -> tuple[dict[str, Sensor], Column]:
        """The registry for this micro-batch as a dict by sensor_id (re-read if its file
        changed; empty without a registry) and its overheat threshold expression.

        The expression is built once per version of the registry: with thousands of
        sensors, building it costs 0.2 to 0.4 s (every sensor id crosses into the JVM),
        which a micro-batch would pay before its alerts."""
        with self._lock:
            self.registry_cache.current()
            sensors = self.registry_cache.sensors()
            if self._threshold is None or self._threshold[0] is not sensors:
                threshold = overheat_threshold(sensors, self.settings.critical_temp_c)
                self._threshold = (sensors, threshold)
            return self._threshold

    def trigger(self, readers: bool = False) -> dict[str, object]:
        """writeStream.trigger() arguments: ingest's, or (``readers``) those of the queries
        that read the readings table."""
        if self.settings.available_now:
            return {"availableNow": True}
        if readers:
            return {"processingTime": self.settings.readers_trigger}
        return {"processingTime": self.settings.trigger}
