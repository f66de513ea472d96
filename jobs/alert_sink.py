"""Writing alerts: each alert_id at most once, with a cheap transactional append.

The same alert can be found again: by a replayed micro-batch, by readings of one minute
split across batches, or by a query started afresh on an old lake. So a batch looks up
which of its alert ids the table already holds and appends only the others, with its
query's txnAppId and batch id (a replay writes nothing twice).

Each rule is raised by exactly one query (overheat_reading by ingest, the others by the
windows query) and alert ids include the rule, so no two writers ever race on one id:
the lookup needs no lock, and the appends are blind appends that never conflict. That is
what makes this cheaper than a MERGE (one small read plus one append, instead of a join,
a rewrite and retries on every concurrent write).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from pyspark.sql import Column, Row, SparkSession
from pyspark.sql import functions as F

from jobs.delta_io import append_once
from jobs.tables import ALERTS


def detection_time() -> Column:
    """One detection timestamp for a batch's alerts (now, UTC), as a Spark literal."""
    return F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp")


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


def existing_ids(spark: SparkSession, path: str, found: list[Row]) -> set[str]:
    """Which of the ``found`` alerts' ids the table at ``path`` already holds."""
    starts = [row.window_start for row in found]
    table = spark.read.format("delta").load(path)
    # The window_start range lets Delta skip the files of other times by their stats.
    hits = table.filter(
        F.col("window_start").between(min(starts), max(starts))
        & F.col("alert_id").isin([row.alert_id for row in found])
    ).select("alert_id")
    return {row.alert_id for row in hits.collect()}


def write_alerts(
    spark: SparkSession,
    found: list[Row],
    path: str,
    app_id: str,
    batch_id: int,
    echo: Callable[[str], None] | None = None,
) -> list[Row]:
    """Append the ``found`` alerts (ALERTS rows) whose id is not in the table yet, once
    per (app_id, batch_id); echo and return the ones that were new."""
    if not found:
        return []
    known = existing_ids(spark, path, found)
    new = [row for row in found if row.alert_id not in known]
    if new:
        append_once(spark.createDataFrame(new, ALERTS), path, app_id, batch_id)
        if echo:
            for row in sorted(new, key=lambda r: (r.window_start, r.sensor_id)):
                echo(format_alert(row))
    return new
