"""Writing alerts: MERGE insert-if-absent on alert_id, so an alert is written at most once.

Why MERGE rather than transactional appends: the same alert can be found by two different
micro-batches (readings of one minute split across batches, a silence seen by a timer and
then by the gap), not only by a replayed one; only a lookup by alert_id stops the second.
Several queries write alerts; a MERGE that loses a race to another writer is retried (it
is idempotent, so retrying is always safe).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from jobs.tables import ALERTS

ATTEMPTS = 8


def _is_write_conflict(error: Exception) -> bool:
    text = str(error)
    return "DELTA_CONCURRENT" in text or ("Concurrent" in text and "Exception" in text)


def detection_time() -> tuple[datetime, Column]:
    """One detection timestamp for a batch: as a value and as a Spark literal."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return now, F.lit(now).cast("timestamp")


def merge_alerts(spark: SparkSession, alerts: DataFrame, path: str) -> None:
    """Insert the alerts whose alert_id is not in the table yet."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(alerts.alias("s"), "t.alert_id = s.alert_id")
                .whenNotMatchedInsertAll()
                .execute()
            )
            return
        except Exception as error:
            if attempt == ATTEMPTS or not _is_write_conflict(error):
                raise
            time.sleep(0.2 * attempt)  # back off before re-reading the table


def format_alert(row: Row) -> str:
    """One readable line per alert."""
    value = (
        f"{row.observed_value:.0f} s without readings"
        if row.rule == "sensor_silent"
        else f"{row.observed_value:.1f} °C (threshold {row.threshold:.1f})"
    )
    return (
        f"ALERT {row.severity.upper():8} {row.rule:16} {row.sensor_id} @ {row.site} "
        f"{row.window_start:%Y-%m-%d %H:%M:%S}: {value}"
    )


def write_alerts(
    spark: SparkSession,
    alerts: DataFrame,
    path: str,
    detected_at: datetime,
    echo: Callable[[str], None] | None,
) -> None:
    """Merge ``alerts`` (all stamped ``detected_at``) and echo the ones that were new."""
    # Alerts are few: collect them (one small job) and MERGE only when there are any.
    found = alerts.collect()
    if not found:
        return
    merge_alerts(spark, spark.createDataFrame(found, ALERTS), path)
    if echo:
        # The rows this batch inserted are exactly those stamped with its detection time.
        new = spark.read.format("delta").load(path).filter(F.col("detected_at") == detected_at)
        for row in new.orderBy("window_start").collect():
            echo(format_alert(row))
