"""Delta writes the streaming job relies on for exactly-once results.

A micro-batch of a ``foreachBatch`` query can run twice: when the job dies after a batch
wrote a table but before Spark recorded the batch as done in the checkpoint, the next run
starts by running that batch again. Each write must then happen once per (table, batch).

Where the rows are, the data files are written: a table's rows computed by Spark are
written by the executors (jobs/writer/data_files.py), and the driver receives only the files'
descriptions; the few rows made on the driver (alerts, incidents, metrics) are written
there. Either way the driver commits, with delta-rs (the ``deltalake`` package) rather
than Spark's Delta writer: a commit of a micro-batch's files costs milliseconds there,
against 0.3 to 0.5 s for Spark's, and one Spark job can write several tables' files at
once (ingest: readings and quarantine), where Spark's writer runs one job per table
(docs/benchmarks.md). Spark reads ``readings`` (the windows query's stream) and
``_panes``; both speak the same Delta protocol and log.

Every append carries the Delta transaction ``(app_id, batch_id)`` (the commit and its
transaction are one atomic log entry), and :class:`BatchWriter` skips a table whose
transaction version for the app is that batch or later, read on the very snapshot the
commit is made on (0.2 ms). A writer that committed the same batch after that snapshot
(two jobs on one lake despite the lease: lake/lease.py) fails the commit as a concurrent
transaction (delta-rs checks the winning commits' transactions); the check is then made
again on the new snapshot, and finds the batch written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction
from pyspark import InheritableThread
from pyspark.sql import DataFrame, Row, SparkSession

from conf.lake_location import parse_lake
from jobs.metrics import JobMetrics
from jobs.writer.data_files import write_data_files
from jobs.writer.pending import uncommitted
from jobs.writer.tables import ALL_TABLES
from lake.layout import Lake
from lake.lease import FENCE_APP_ID, LakeLease
from lake.storage import delta_table, is_delta_table

_TABLE_LOCKS: dict[str, threading.Lock] = {}
_TABLE_LOCKS_GUARD = threading.Lock()
# The lease each held lake is written under, by the lake's root (lake/lease.py).
_LEASES: dict[str, LakeLease] = {}


def table_name(path: str) -> str:
    """A table's name from its path in the lake (its last folder)."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def table_lock(path: str) -> threading.Lock:
    """The job's one lock for the table at ``path``.

    Writers take it around their commits (:func:`committing`), and table maintenance
    around the rewrites that would fail those commits or be failed by them (a retention
    DELETE next to appends, a compaction next to a MERGE). The lake's lease makes the job
    its only writer, so an in-process lock is enough.
    """
    key = parse_lake(path)  # one spelling of each table: absolute path or s3a:// URI
    with _TABLE_LOCKS_GUARD:
        return _TABLE_LOCKS.setdefault(key, threading.Lock())


def write_under(lake: str, lease: LakeLease | None) -> None:
    """Every commit to a table of ``lake`` checks ``lease`` first (None: no longer)."""
    root = parse_lake(lake)
    with _TABLE_LOCKS_GUARD:
        if lease is None:
            _LEASES.pop(root, None)
        else:
            _LEASES[root] = lease


def _lease_of(path: str) -> LakeLease | None:
    key = parse_lake(path)
    with _TABLE_LOCKS_GUARD:
        return next((held for r, held in _LEASES.items() if key.startswith(r + "/")), None)


def check_lease(path: str) -> None:
    """Before a commit to the table at ``path``: its lake is still this job's.

    Raises:
        lake.lease.LeaseLost: another job holds it now; nothing may be committed.
    """
    lease = _lease_of(path)
    if lease is not None:
        lease.check()


def check_fence(path: str, table: DeltaTable) -> Transaction | None:
    """Before a commit on ``table`` (a snapshot of the table at ``path``): the lease is
    this job's and no newer holder has written the table (lake/lease.py, fencing); the
    fence's transaction every commit carries (None: the lake is held by no lease).

    Raises:
        lake.lease.LeaseLost: another job holds the lake now; nothing may be committed.
    """
    lease = _lease_of(path)
    if lease is None:
        return None
    lease.check()
    lease.fence(table.transaction_version(FENCE_APP_ID))
    assert lease.term is not None
    return Transaction(FENCE_APP_ID, lease.term)


@dataclass(frozen=True)
class Commit:
    """What a commit to a table of a held lake is made with: the snapshot the fence was
    checked on, and the fence's transaction (None: no lease)."""

    table: DeltaTable
    fence: Transaction | None

    def properties(self, *transactions: Transaction) -> CommitProperties:
        """Commit properties carrying ``transactions`` and the fence."""
        fence = [self.fence] if self.fence is not None else []
        return CommitProperties(app_transactions=[*transactions, *fence])


@contextmanager
def committing(path: str, table: DeltaTable | None = None) -> Iterator[Commit]:
    """Around a commit to the table at ``path``: its lock, the lake's lease, and the
    fence checked on ``table`` (default: the newest snapshot). Commit on the
    :class:`Commit`'s table with its properties: a newer holder's commit since that
    snapshot then fails this one, and the failure is told as the lease lost.

    Raises:
        lake.lease.LeaseLost: another job holds the lake now; nothing was committed.
    """
    with table_lock(path):
        snapshot = table if table is not None else delta_table(path)
        fence = check_fence(path, snapshot)
        try:
            yield Commit(snapshot, fence)
        except CommitFailedError:
            if fence is not None:  # a newer holder's commit since the snapshot: say so
                check_fence(path, delta_table(path))
            raise


def fence_tables(lake: Lake, lease: LakeLease) -> int:
    """Stamp every table of ``lake`` with ``lease``'s term (an empty commit carrying the
    fence), so that a holder that stalled past its lease can commit to none of them;
    returns how many were stamped. Called by the job that took the lake, before it
    writes anything else.

    Raises:
        lake.lease.LeaseLost: a newer holder has written the lake already.
    """
    stamped = 0
    for name in ALL_TABLES:
        path = lake.table(name)
        if not is_delta_table(path):
            continue  # created later, with this job's first commits
        with committing(path) as commit:
            if commit.table.transaction_version(FENCE_APP_ID) == lease.term:
                continue
            commit.table.create_write_transaction(
                [], "append", commit.table.schema(), commit_properties=commit.properties()
            )
            stamped += 1
    return stamped


def table_schema(table: DeltaTable) -> pa.Schema:
    """A Delta table's columns as an Arrow schema (timestamps in UTC)."""
    return pa.schema(table.schema().to_arrow())


def collect_rows(df: DataFrame) -> list[Row]:
    """The rows of a small DataFrame on the driver, timestamps as aware UTC.

    Through Arrow (the session's time zone is UTC), not ``collect()``: that hands back
    naive datetimes in the Python process's local time, which change with the machine's
    zone and lose an hour when the clocks go back.
    """
    return [Row(**row) for row in df.toArrow().to_pylist()]


def rows_to_arrow(rows: Sequence[Row], schema: pa.Schema) -> pa.Table:
    """Rows (timestamps aware, as :func:`collect_rows` gives them) as an Arrow table of
    ``schema``."""
    return pa.Table.from_pylist([{n: row[n] for n in schema.names} for row in rows], schema)


class BatchWriter:
    """The Delta appends of one streaming query run: each (table, batch) at most once.

    The writer's application id is the query's name and its checkpoint's id (a new
    checkpoint is a new writer); the checkpoint's offset log tells when a batch started.
    Thread-safe: a batch's writes to different tables may run side by side.
    """

    def __init__(
        self, spark: SparkSession, lake: Lake, query: str, metrics: JobMetrics | None = None
    ) -> None:
        self.spark = spark
        self.lake = lake
        self.metrics = metrics
        self._query = query
        self._app_id: str | None = None

    @property
    def app_id(self) -> str:
        """The writer's application id (read from the checkpoint once it exists)."""
        if self._app_id is None:
            self._app_id = self.lake.writer_id(self._query)
        return self._app_id

    def _written(self, table: DeltaTable, batch_id: int) -> bool:
        """Whether the table holds this app's ``batch_id`` already (a replay)."""
        done = table.transaction_version(self.app_id)
        return done is not None and done >= batch_id

    def _commit_once(self, path: str, batch_id: int, commit: Callable[[Commit], None]) -> bool:
        """``commit`` on a fresh snapshot of the table at ``path`` unless that snapshot
        holds ``batch_id`` already; False then. Checked again after a concurrent
        transaction of the same app (another writer committed the batch meanwhile)."""
        again, started = True, time.perf_counter()
        while True:
            try:
                with committing(path) as fenced:
                    if self._written(fenced.table, batch_id):
                        return False
                    commit(fenced)
                if self.metrics is not None:
                    self.metrics.committed(table_name(path), time.perf_counter() - started)
                return True
            except CommitFailedError as exc:
                if not again or "Concurrent transaction" not in str(exc):
                    raise
                again = False

    def append(self, df: DataFrame, path: str, batch_id: int) -> bool:
        """Append ``df`` (with the table's columns) to the table at ``path`` as batch
        ``batch_id``; False when the table already holds that batch (a replay), else True.
        The executors write the data files (one Spark job); only their descriptions reach
        the driver. An empty ``df`` commits nothing."""
        schema = table_schema(delta_table(path))
        with uncommitted(path):  # VACUUM spares the files until they are committed
            files = write_data_files(df, path, schema, batch_id)
            return self.commit_files(files.toArrow().to_pylist(), path, batch_id)

    def commit_files(self, files: Sequence[dict], path: str, batch_id: int) -> bool:
        """Commit data files written into the table at ``path`` (jobs/writer/data_files.py's
        descriptions) as batch ``batch_id``: one log entry with the batch's transaction.
        False when the table already holds that batch (a replay: the files stay unlisted,
        for VACUUM to remove), else True. No file commits nothing."""
        if not files:
            return True
        actions = [
            AddAction(f["path"], f["size"], {}, f["modification_time"], True, f["stats"])
            for f in files
        ]
        batch = Transaction(self.app_id, batch_id)

        def commit(fenced: Commit) -> None:
            table = fenced.table
            table.create_write_transaction(
                actions, "append", table.schema(), commit_properties=fenced.properties(batch)
            )

        return self._commit_once(path, batch_id, commit)

    def append_rows(self, rows: Sequence[Row], path: str, batch_id: int) -> bool:
        """Like :meth:`append`, for the few rows made on the driver (alerts, metrics):
        written and committed there, with no Spark job at all."""
        if not rows:
            return True  # nothing to commit; a replay would find nothing either
        batch = Transaction(self.app_id, batch_id)

        def commit(fenced: Commit) -> None:
            data = rows_to_arrow(rows, table_schema(fenced.table))
            write_deltalake(
                fenced.table, data, mode="append", commit_properties=fenced.properties(batch)
            )

        return self._commit_once(path, batch_id, commit)


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
