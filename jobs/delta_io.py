"""Delta writes the streaming job relies on for exactly-once results.

A micro-batch of a ``foreachBatch`` query can run twice: when the job dies after a batch
wrote a table but before Spark recorded the batch as done in the checkpoint, the next run
starts by running that batch again. Each write must then happen once per (table, batch).

Delta's own answer is the ``txnAppId``/``txnVersion`` write option, but Delta 4.0 checks
it by rebuilding the table's whole state with Spark jobs on every write (0.6 s against
0.3 s for a plain append, measured in docs/benchmarks.md). A replay can only ever be the
*first* batch a query runs after it starts (within one run a failed batch stops the
query), so :class:`BatchWriter` pays for a check only then:

- every append carries a marker ``sensorwatch:<app_id>:<batch_id>`` in the commit's
  ``userMetadata`` (the commit and its marker are one atomic log entry);
- the appends of a run's first batch look back through each table's history for the
  newest marker of their app and skip a table that already holds that batch; those
  writes also carry ``txnAppId``, so a batch written by an earlier version of the
  job (which marked commits only that way) is recognised by Delta's own check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from delta.tables import DeltaTable
from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

if TYPE_CHECKING:  # jobs.tables creates its tables with run_together below
    from jobs.tables import Lake

MARKER = "sensorwatch:{app_id}:{batch_id}"

# How far before a batch's offsets were logged a commit of that batch may carry a
# timestamp (clock differences between the driver and the storage; a safety margin).
CLOCK_MARGIN_MS = int(timedelta(minutes=10).total_seconds() * 1000)


def marker(app_id: str, batch_id: int) -> str:
    """The userMetadata that marks a commit as (app_id, batch_id)'s."""
    return MARKER.format(app_id=app_id, batch_id=batch_id)


def newest_marked_batch(
    spark: SparkSession, path: str, app_id: str, since_ms: int | None = None
) -> int | None:
    """The highest batch id ``app_id`` marked in the table at ``path``, looking back from
    the newest commit until the first commit of that app, or until commits older than
    ``since_ms`` (Unix milliseconds; None: the whole history). None when there is none."""
    if not DeltaTable.isDeltaTable(spark, path):
        return None  # nothing written yet
    prefix = marker(app_id, 0)[:-1]
    limit = 16
    while True:
        history = DeltaTable.forPath(spark, path).history(limit)
        rows = history.select(
            "version", F.unix_millis("timestamp").alias("ms"), "userMetadata"
        ).collect()
        for row in sorted(rows, key=lambda r: r.version, reverse=True):
            meta = row.userMetadata or ""
            if meta.startswith(prefix):
                return int(meta[len(prefix) :])
            if since_ms is not None and row.ms < since_ms:
                return None
        if len(rows) < limit:
            return None
        limit *= 4


class BatchWriter:
    """The Delta appends of one streaming query run: each (table, batch) at most once.

    The writer's application id is the query's name and its checkpoint's id (a new
    checkpoint is a new writer); the checkpoint's offset log tells when a batch started.
    Thread-safe: a batch's writes to different tables may run side by side.
    """

    def __init__(self, spark: SparkSession, lake: Lake, query: str) -> None:
        self.spark = spark
        self.lake = lake
        self._query = query
        self._checkpoint = Path(lake.checkpoint(query))
        self._app_id: str | None = None
        self._first_batch: int | None = None
        self._checked: set[str] = set()
        self._lock = threading.Lock()

    @property
    def app_id(self) -> str:
        """The writer's application id (read from the checkpoint once it exists)."""
        if self._app_id is None:
            self._app_id = f"{self._query}-{self.lake.checkpoint_id(self._query)}"
        return self._app_id

    def _batch_started_ms(self, batch_id: int) -> int | None:
        """When Spark logged the batch's offsets (it runs after that), minus a margin."""
        offsets = self._checkpoint / "offsets" / str(batch_id)
        if not offsets.exists():
            return None
        return int(offsets.stat().st_mtime * 1000) - CLOCK_MARGIN_MS

    def _needs_check(self, path: str, batch_id: int) -> bool:
        with self._lock:
            if self._first_batch is None:
                self._first_batch = batch_id
            if batch_id != self._first_batch or path in self._checked:
                return False
            self._checked.add(path)
            return True

    def append(self, df: DataFrame, path: str, batch_id: int) -> bool:
        """Append ``df`` to the table at ``path`` as batch ``batch_id``; False when its
        marker shows that batch is already in the table (a replay), else True (Delta's
        txnAppId check may still skip a batch an older job version wrote)."""
        app_id = self.app_id
        writer = df.write.format("delta").mode("append")
        writer = writer.option("userMetadata", marker(app_id, batch_id))
        if self._needs_check(path, batch_id):
            done = newest_marked_batch(self.spark, path, app_id, self._batch_started_ms(batch_id))
            if done is not None and done >= batch_id:
                return False
            writer = writer.option("txnAppId", app_id).option("txnVersion", batch_id)
        writer.save(path)
        return True


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
