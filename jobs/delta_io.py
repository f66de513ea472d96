"""Delta writes the streaming job relies on for exactly-once results."""

from __future__ import annotations

from pyspark.sql import DataFrame


def append_once(df: DataFrame, path: str, app_id: str, version: int) -> None:
    """Append ``df`` to the Delta table at ``path`` unless (app_id, version) already did.

    Delta records the highest txnVersion per txnAppId in the table's log, in the same
    commit as the data, and skips a write whose version is not higher: a micro-batch that
    is replayed after a crash writes nothing twice, even when it writes several tables.
    """
    (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
        .save(path)
    )
