"""Delta writes the streaming job relies on for exactly-once results."""

from __future__ import annotations

from collections.abc import Callable

from pyspark import InheritableThread
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


def run_together(*writes: Callable[[], None]) -> None:
    """Run independent writes (to different tables) at the same time; re-raise the first
    failure once all have ended.

    A Delta commit is mostly fixed latency (a Spark job, the log write, the new snapshot),
    not CPU: two commits side by side take little longer than one. The threads inherit
    the caller's scheduler pool.
    """
    errors: list[BaseException] = []

    def attempt(write: Callable[[], None]) -> None:
        try:
            write()
        except BaseException as error:  # re-raised in the caller's thread below
            errors.append(error)

    threads = [InheritableThread(target=attempt, args=(w,)) for w in writes[1:]]
    for thread in threads:
        thread.start()
    if writes:
        attempt(writes[0])
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
