"""sensor_silent: per-sensor state with event-time timers (applyInPandasWithState).

For each sensor the state keeps the event time of its newest reading and a timer at
newest + timeout. Two ways a silence is found:

- the timer fires (the watermark passed it): the sensor is silent now;
- a micro-batch holds readings with a gap longer than the timeout between them (the
  silence began and ended between two triggers, or within one availableNow batch).

Both give the silence the same window_start (the last reading before it), hence the same
alert_id: a silence is alerted once, and a new silence after data resumes is a new alert.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from jobs.alert_sink import detection_time, write_alerts
from jobs.alerts import silence_alerts
from jobs.context import JobContext
from jobs.metrics import OUTPUT_METRICS

SILENCE_STATE = "newest_ms long"
SILENCES = "sensor_id string, window_start timestamp, window_end timestamp, observed_value double"
_COLUMNS = ["sensor_id", "window_start", "window_end", "observed_value"]


def _silence(sensor_id: str, start_ms: int, end_ms: int) -> dict[str, object]:
    return {
        "sensor_id": sensor_id,
        "window_start": pd.Timestamp(start_ms, unit="ms"),
        "window_end": pd.Timestamp(end_ms, unit="ms"),
        "observed_value": (end_ms - start_ms) / 1000.0,
    }


def gaps(sensor_id: str, newest_ms: int | None, times_ms: np.ndarray, timeout_ms: int) -> list:
    """Silences in a sensor's readings: gaps longer than ``timeout_ms`` after ``newest_ms``.

    Readings older than ``newest_ms`` (late ones) neither open nor close a silence.
    """
    times = np.unique(times_ms)
    if newest_ms is not None:
        times = np.concatenate(([newest_ms], times[times > newest_ms]))
    if len(times) < 2:
        return []
    idx = np.nonzero(np.diff(times) > timeout_ms)[0]
    return [_silence(sensor_id, int(times[i]), int(times[i + 1])) for i in idx]


def detector(timeout_ms: int) -> Callable[..., Iterator[pd.DataFrame]]:
    """The applyInPandasWithState function for a silence timeout of ``timeout_ms``."""

    def detect(
        key: tuple[str], batches: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:
        (sensor_id,) = key
        if state.hasTimedOut:
            (newest_ms,) = state.get
            state.remove()  # the next reading starts afresh
            found = [_silence(sensor_id, newest_ms, state.getCurrentWatermarkMs())]
            yield pd.DataFrame(found, columns=_COLUMNS)
            return
        times = np.concatenate(
            [b["event_time"].to_numpy(dtype="datetime64[ms]").astype(np.int64) for b in batches]
        )
        newest_ms = state.get[0] if state.exists else None
        found = gaps(sensor_id, newest_ms, times, timeout_ms)
        newest = int(times.max()) if newest_ms is None else max(newest_ms, int(times.max()))
        state.update((newest,))
        state.setTimeoutTimestamp(newest + timeout_ms)
        yield pd.DataFrame(found, columns=_COLUMNS)

    return detect


def silences(readings: DataFrame, watermark_delay: str, timeout_s: float) -> DataFrame:
    """Streaming readings -> one row per silence found (sensor_id, window_start, ...)."""
    return (
        readings.withWatermark("event_time", watermark_delay)
        .select("sensor_id", "event_time")
        .groupBy("sensor_id")
        .applyInPandasWithState(
            detector(int(timeout_s * 1000)),
            SILENCES,
            SILENCE_STATE,
            "append",
            GroupStateTimeout.EventTimeTimeout,
        )
    )


QUERY = "sensor_silence"


def write_silences(ctx: JobContext, found: DataFrame, batch_id: int) -> None:
    """Turn the silences of a micro-batch into sensor_silent alerts."""
    found = found.persist()
    try:
        if found.isEmpty():
            return
        detected, detected_at = detection_time()
        alerts = silence_alerts(
            found, ctx.registry(), ctx.settings.silence_timeout_seconds,
            registered_only=ctx.registry_cache.enabled, detected_at=detected_at,
        )  # fmt: skip
        write_alerts(ctx.spark, alerts, ctx.lake.table("alerts"), detected, ctx.echo)
    finally:
        found.unpersist()


def start_silence(ctx: JobContext) -> StreamingQuery:
    """Start the silence query (readings Delta stream -> state -> alerts)."""
    readings = ctx.spark.readStream.format("delta").load(ctx.lake.table("readings"))
    found = silences(readings, ctx.settings.watermark_delay, ctx.settings.silence_timeout_seconds)
    found = found.observe(OUTPUT_METRICS, F.count(F.lit(1)).alias("rows"))
    return (
        found.writeStream.queryName(QUERY)
        .outputMode("append")
        .foreachBatch(lambda batch, batch_id: write_silences(ctx, batch, batch_id))
        .option("checkpointLocation", ctx.lake.checkpoint(QUERY))
        .trigger(**ctx.trigger(readers=True))
        .start()
    )
