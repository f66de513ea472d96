"""Table maintenance, run by the job itself (docs/architecture.md#running-for-weeks;
docs/streaming-job.md).

A job with a 1 s trigger commits every table tens of thousands of times a day, each
commit one small Parquet file and one log entry. Left alone, every reader opens all those
files and every writer lists the whole log (delta-rs lists ``_delta_log`` on each load:
+10 ms per 1,000 entries, measured). So the job keeps its tables healthy as it runs:

- **compaction** in two steps (delta-rs OPTIMIZE: commits with ``dataChange=false``,
  which the windows query's Delta stream skips). Once a table holds ``compact_min_files``
  files under ``compact_small_mb``, they become files of about that size; once an hour,
  the files under ``compact_target_mb`` become files of about that size. OPTIMIZE rewrites
  every file under its target, so a single large target would rewrite the newest, growing
  file with every handful of micro-batches: 4 GB on disk for 3 million readings after
  50 minutes in the soak benchmark;
- **log checkpoints** after each compaction (Delta writes one every 100 commits too);
- **expiry of the log and VACUUM** of the files compaction, retention or a MERGE
  replaced, once they are older than ``vacuum_retention``; for ``readings``, only once
  the windows query has read past them (:class:`StreamGuard`), however long the job was
  down;
- **pruning of superseded baselines**: ``_baselines`` keeps each (sensor, rule)'s newest
  two rows (jobs/writer/baseline_pruning.py);
- **retention of raw data**: optionally, ``readings`` and ``quarantine`` rows ingested
  longer than ``raw_retention`` ago are deleted.

One thread does all of it, one table at a time: delta-rs duplicates rows when two
compactions of a table overlap, so there must be exactly one compactor per table, and the
job is the one writer of its lake. Rewrites that conflict with the job's own writes take
the table's lock (:func:`jobs.writer.delta_io.table_lock`): the incidents MERGE, and the
retention DELETE next to the appends. Compaction next to a plain append needs none.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyarrow import fs

from common.errors import first_line
from conf.lake_location import is_object_store
from conf.settings.job import JobSettings
from contract.times import utc_now
from jobs.writer.baseline_pruning import prune
from jobs.writer.delta_io import check_fence, check_lease, committing, table_lock
from jobs.writer.pending import oldest_uncommitted
from jobs.writer.tables import INTERNAL_TABLES, TABLES
from lake import layout, storage
from lake.layout import Lake
from lake.lease import LeaseLost
from lake.storage import delta_table, is_delta_table, store_unreachable

# Tables rewritten by a MERGE: compaction takes their lock (a MERGE that read files a
# compaction removed meanwhile would fail).
MERGED = (layout.INCIDENTS,)
# Tables whose rows may expire by age (raw_retention), by the time they were ingested.
RAW = (layout.READINGS, layout.QUARANTINE)
# The table whose superseded rows are pruned on every pass (jobs/writer/baseline_pruning.py).
BASELINES = layout.BASELINES
# The table the windows query streams from: its log and replaced files wait for it.
STREAMED = layout.READINGS
# VACUUM and log expiry list every file of a table: every 5 minutes at most (more often
# only for a retention under 20 minutes, a quarter of it).
HOUSEKEEPING_EVERY_S = 300.0
# The second compaction step, into compact_target_mb files: hourly, so each byte is
# rewritten by it a few times at most (with the partly filled newest file).
LARGE_COMPACTION_EVERY_S = 3600.0
# How many retentions in a row the readings' VACUUM may wait for the windows query before
# the job says so: it is never vacuumed while each windows micro-batch takes about a third
# of the retention or longer (StreamGuard), and the replaced files only pile up.
HELD_BACK_NOTICE_RETENTIONS = 4

# How an object store says it does not do S3's batch delete (HTTP 501).
BULK_DELETE_REFUSED = re.compile(r"501 Not Implemented|NotImplemented")


@dataclass(frozen=True)
class Policy:
    """What maintenance does, from the job's settings."""

    compact_min_files: int
    small_size: int  # bytes: the frequent step compacts files under it, into files of it
    target_size: int  # bytes: the hourly step compacts files under it, into files of it
    retention: timedelta  # of replaced files (VACUUM) and of log entries
    raw_retention: timedelta | None  # None: readings and quarantine are kept for ever

    @classmethod
    def of(cls, settings: JobSettings) -> Policy:
        """The policy the settings ask for."""
        raw = settings.raw_retention_seconds
        return cls(
            compact_min_files=settings.compact_min_files,
            small_size=settings.compact_small_mb * 2**20,
            target_size=settings.compact_target_mb * 2**20,
            retention=timedelta(seconds=settings.vacuum_retention_seconds),
            raw_retention=None if raw is None else timedelta(seconds=raw),
        )

    def table_properties(self) -> dict[str, str]:
        """The Delta properties that make each table keep exactly ``retention`` of history.

        Expired log entries are removed by maintenance (which waits for the windows
        query), not by every writer's commit, hence the automatic clean-up is off.
        """
        seconds = int(self.retention.total_seconds())
        return {
            "delta.logRetentionDuration": f"interval {seconds} seconds",
            "delta.deletedFileRetentionDuration": f"interval {seconds} seconds",
            "delta.enableExpiredLogCleanup": "false",
        }


def apply_properties(lake: Lake, policy: Policy) -> None:
    """Give every table of the lake the policy's properties (before any stream starts: a
    change of properties conflicts with concurrent writes)."""
    wanted = policy.table_properties()
    for name in (*TABLES, *INTERNAL_TABLES):
        path = lake.table(name)
        with committing(path) as commit:
            table = commit.table
            if any(table.metadata().configuration.get(k) != v for k, v in wanted.items()):
                table.alter.set_table_properties(wanted, commit_properties=commit.properties())


@dataclass
class Counts:
    """What maintenance did during one run of the job (for its summary)."""

    compactions: int = 0
    files_compacted: int = 0
    files_vacuumed: int = 0
    rows_expired: int = 0
    baselines_pruned: int = 0
    failures: int = 0

    def summary(self) -> str | None:
        """One line for the job's summary, or None when it did nothing."""
        done = (self.compactions, self.files_vacuumed, self.rows_expired, self.baselines_pruned)
        if not (any(done) or self.failures):
            return None
        parts = [
            f"{self.compactions} compactions ({self.files_compacted:,} small files)",
            f"{self.files_vacuumed:,} replaced files vacuumed",
        ]
        if self.rows_expired:
            parts.append(f"{self.rows_expired:,} rows past raw_retention deleted")
        if self.baselines_pruned:
            parts.append(f"{self.baselines_pruned:,} superseded baselines pruned")
        if self.failures:
            parts.append(f"{self.failures} steps failed (retried)")
        return "maintenance: " + ", ".join(parts)


# The share of the retention by which StreamGuard's cutoff runs ahead of the deletions'.
EXPIRY_MARGIN = 0.25


@dataclass(frozen=True)
class Expiry:
    """What a stream lets go of its table's past: :meth:`StreamGuard.expiry`."""

    log: bool  # the log entries (and with them the replaced files)
    files: bool  # the replaced files (VACUUM)
    needed: int | None  # the first version the stream may still read (None: no stream)


class StreamGuard:
    """Whether the log entries and replaced files of ``readings`` older than a cutoff may
    go: only once the windows query has read every commit they belong to.

    ``needed_from`` gives the first version of ``readings`` the windows query may still
    read (None: no windows query, nothing to wait for). Each maintenance pass notes the
    table's version with the time; anything older than a cutoff belongs to a version no
    later than the one noted first at or after that cutoff (or at the job's start).
    """

    def __init__(
        self, needed_from: Callable[[], int | None], clock: Callable[[], float] = time.time
    ) -> None:
        self._needed_from = needed_from
        self._clock = clock
        self._seen: deque[tuple[float, int]] = deque()

    def note(self, version: int) -> None:
        """The table is at ``version`` now."""
        self._seen.append((self._clock(), version))

    def expiry(self, retention: timedelta) -> Expiry:
        """What of the table's past the stream lets go now (one read of its checkpoint).

        The log entries and replaced files older than ``retention`` (``log``), once the
        stream starts past the version noted first at or after the cutoff. The deletions
        that follow the answer take their own "now", later than this one (a VACUUM of a
        large table takes seconds under load; delta-rs's log clean-up then deletes what is
        older than ``retention`` at *its* now): so the stream must have read a quarter of
        the retention further than the cutoff. Without that margin a loaded run lost log
        entries the windows query still needed (its restart failed with
        DELTA_MISSING_FILES_UNEXPECTED_VERSION).

        The replaced files alone (``files``) also when the stream starts at the newest
        version noted (the table's version now, noted just before asking): every file it
        may read again was added at that version or later and is live, since only this
        thread removes files, after this answer, and VACUUM deletes none removed less than
        the retention ago. A caught-up stream whose last micro-batch read no new data
        would otherwise hold the VACUUM back until new readings arrive: for ever on an
        idle topic. Not so for the log: an append can write a log checkpoint between this
        answer and the clean-up, which then deletes the entry the stream reads from.
        """
        needed = self._needed_from()
        cutoff = self._clock() - retention.total_seconds() * (1 - EXPIRY_MARGIN)
        while len(self._seen) > 1 and self._seen[0][0] < cutoff:
            self._seen.popleft()  # cutoffs only grow: older notes are of no further use
        if needed is None or not self._seen:
            return Expiry(log=needed is None, files=needed is None, needed=needed)
        log = needed > self._seen[0][1]
        return Expiry(log=log, files=log or needed >= self._seen[-1][1], needed=needed)


def small_files(table: DeltaTable, below: int) -> int:
    """How many of the table's live files are smaller than ``below`` bytes."""
    actions = pa.table(table.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    return pc.sum(pc.less(actions.column("size_bytes"), below)).as_py() or 0


@dataclass
class Maintenance:
    """Keeps the lake's tables healthy: call :meth:`run_pass` now and then (or
    :meth:`start` a thread that does), from one place only."""

    lake: Lake
    policy: Policy
    guard: StreamGuard
    echo: Callable[[str], None] | None = None
    tables: Iterable[str] = (*TABLES, *INTERNAL_TABLES)
    counts: Counts = field(default_factory=Counts)
    _next_housekeeping: float = 0.0
    _last_large: dict[str, float] = field(default_factory=dict)  # by table; else _started
    _started: float = field(default_factory=time.monotonic)
    _one_by_one: set[str] = field(default_factory=set)  # tables whose store refused a batch delete
    _baselines_kept: int = 0  # rows the last pruning of _baselines kept
    _held_since: float | None = None  # since when the stream holds the readings' VACUUM back
    _held_needed: int | None = None  # the version the stream needed when the hold began
    _said_held: bool = False
    _said_unreachable: bool = False  # said once per outage of the lake's store
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def run_pass(self, housekeeping: bool | None = None) -> None:
        """Compact what needs it; every HOUSEKEEPING_EVERY_S (or when ``housekeeping``
        says so) also expire old rows, VACUUM and expire the log. A failed step is
        reported and tried again on the next pass: maintenance never stops the job."""
        now = time.monotonic()
        if housekeeping is None:
            housekeeping = now >= self._next_housekeeping
        if housekeeping:
            every = min(HOUSEKEEPING_EVERY_S, self.policy.retention.total_seconds() / 4)
            self._next_housekeeping = now + every
        for name in self.tables:
            if self._stop.is_set():
                return
            path = self.lake.table(name)
            try:
                if not is_delta_table(path):
                    continue
                self._maintain(name, path, housekeeping)
            except LeaseLost:
                return  # another job holds the lake now: the job is stopping
            except Exception as exc:  # reported, and retried on the next pass
                self.counts.failures += 1
                first = first_line(exc)
                if store_unreachable(str(exc)):  # the rest of the pass would fail alike
                    if self.echo and not self._said_unreachable:
                        self.echo(f"maintenance waits for the lake's store: {first}")
                    self._said_unreachable = True
                    return
                if self.echo:
                    self.echo(f"maintenance of {name} failed, retried later: {first}")
        self._said_unreachable = False

    def _maintain(self, name: str, path: str, housekeeping: bool) -> None:
        check_lease(path)  # rewrites and deletes are writes too
        table = delta_table(path)
        if name == STREAMED:
            self.guard.note(table.version())
        if housekeeping and name in RAW and self.policy.raw_retention is not None:
            self._expire_rows(name, path)
        if name == BASELINES:
            pruned = prune(path, self._baselines_kept)
            if pruned is not None:
                self.counts.baselines_pruned += pruned[0]
                self._baselines_kept = pruned[1]
        policy, now = self.policy, time.monotonic()
        if small_files(table, policy.small_size) >= policy.compact_min_files:
            self._compact(name, path, policy.small_size)
        elif now - self._last_large.get(name, self._started) >= LARGE_COMPACTION_EVERY_S:
            self._last_large[name] = now
            if small_files(table, policy.target_size) >= 2:
                self._compact(name, path, policy.target_size)
        if not housekeeping:
            return
        expiry = Expiry(log=True, files=True, needed=None)
        if name == STREAMED:
            # Noted just before asking: what expires now is older than this note.
            self.guard.note(delta_table(path).version())
            expiry = self.guard.expiry(self.policy.retention)
            if expiry.files:
                self._held_since, self._said_held = None, False
            else:
                self._held_back(expiry.needed)
        table = delta_table(path)  # after this pass's rewrites
        check_fence(path, table)  # deletes are writes too: none after a newer holder wrote
        if expiry.files:
            self.counts.files_vacuumed += self._vacuum(table, path)
        if expiry.log:
            self._expire_log(table, path)

    def _vacuum(self, table: DeltaTable, path: str) -> int:
        """VACUUM ``table``; how many files it deleted.

        full: every file the log does not reference, by its age: also the files of a
        write that died before its commit, and replaced files whose record a log
        checkpoint already dropped (it keeps them only for the retention). But not the
        files of a write still under way, however old (jobs/writer/pending.py): while one
        is, only files older than its beginning go."""
        since = oldest_uncommitted(path)
        if since is not None:
            return self._vacuum_before(table, path, since)
        if self._batch_delete(path):
            try:
                return len(table.vacuum(dry_run=False, enforce_retention_duration=True, full=True))
            except OSError as exc:
                self._refused(path, exc)
        doomed = table.vacuum(dry_run=True, enforce_retention_duration=True, full=True)
        filesystem, root = storage.filesystem(path)
        for name in doomed:
            filesystem.delete_file(f"{root}/{name}")
        return len(doomed)

    def _vacuum_before(self, table: DeltaTable, path: str, since: datetime) -> int:
        """VACUUM ``table`` sparing every file last modified at or after ``since`` (an
        uncommitted write began then); how many files it deleted."""
        doomed = table.vacuum(dry_run=True, enforce_retention_duration=True, full=True)
        filesystem, root = storage.filesystem(path)
        infos = filesystem.get_file_info([f"{root}/{name}" for name in doomed])
        old = [i.path for i in infos if i.mtime is not None and i.mtime < since]
        for file in old:
            filesystem.delete_file(file)
        return len(old)

    def _expire_log(self, table: DeltaTable, path: str) -> None:
        """Delete the log entries that are older than the retention and that no reader
        needs (those before the newest log checkpoint)."""
        if self._batch_delete(path):
            try:
                table.cleanup_metadata()
                return
            except OSError as exc:
                self._refused(path, exc)
        # What cleanup_metadata does, one delete per file. Every version younger than the
        # retention stays readable (time travel): it needs the newest log checkpoint at or
        # before the oldest such version, and every commit after that checkpoint.
        filesystem, root = storage.filesystem(path)
        entries = filesystem.get_file_info(fs.FileSelector(f"{root}/_delta_log"))
        cutoff = utc_now() - self.policy.retention
        logged = [(int(e.base_name[:20]), e) for e in entries if e.base_name[:20].isdigit()]
        commits = [(v, e) for v, e in logged if e.base_name.endswith(".json")]
        checkpoints = {v for v, e in logged if ".checkpoint." in e.base_name}
        recent = [v for v, e in commits if e.mtime is None or e.mtime >= cutoff]
        oldest_kept = min(recent, default=max((v for v, _ in commits), default=0))
        keep_from = max((c for c in checkpoints if c <= oldest_kept), default=None)
        if keep_from is None:
            return  # no checkpoint to read the kept versions from: every commit is needed
        for version, entry in logged:
            if version < keep_from and entry.mtime is not None and entry.mtime < cutoff:
                filesystem.delete_file(entry.path)

    def _batch_delete(self, path: str) -> bool:
        """Whether the store of ``path`` may be asked for a batch delete (delta-rs's
        VACUUM and log clean-up send S3's DeleteObjects)."""
        return path not in self._one_by_one

    def _refused(self, path: str, error: OSError) -> None:
        """Note that the store of ``path`` refused a batch delete, or re-raise ``error``.

        Some S3-compatible stores (S3Proxy 2.6) answer DeleteObjects with its checksum
        header with 501: their files are then deleted one by one."""
        if not (is_object_store(path) and BULK_DELETE_REFUSED.search(str(error))):
            raise error
        self._one_by_one.add(path)

    def _held_back(self, needed: int | None) -> None:
        """Note that the windows query, needing versions from ``needed`` on, holds the
        readings' VACUUM back; say so once when it has for HELD_BACK_NOTICE_RETENTIONS
        retentions in a row, reading on meanwhile."""
        now = time.monotonic()
        if self._held_since is None:
            self._held_since, self._held_needed = now, needed
        retention = self.policy.retention.total_seconds()
        if self._said_held or now - self._held_since <= HELD_BACK_NOTICE_RETENTIONS * retention:
            return
        if needed == self._held_needed:
            return  # the stream read nothing meanwhile (an idle topic): not its batches' pace
        self._said_held = True
        if self.echo:
            self.echo(
                f"maintenance: VACUUM of {STREAMED} waits for the windows query, which has "
                f"not read past what would go for {now - self._held_since:,.0f} s: its "
                "micro-batches take too long for --vacuum-retention "
                f"({retention:,.0f} s); raise it to a few times their duration"
            )

    def _compact(self, name: str, path: str, target_size: int) -> None:
        lock = table_lock(path) if name in MERGED else None
        if lock:
            lock.acquire()
        try:
            # A fresh handle: compacting from a stale snapshot rewrites files twice. Its
            # commit cannot carry the fence (delta-rs's OPTIMIZE drops app transactions):
            # the fence is checked on the very snapshot it compacts.
            table = delta_table(path)
            check_fence(path, table)
            done = table.optimize.compact(target_size=target_size, max_concurrent_tasks=1)
        finally:
            if lock:
                lock.release()
        self.counts.compactions += 1
        self.counts.files_compacted += int(done.get("numFilesRemoved", 0))
        # The compacted state as a checkpoint: readers then replay no commit before it.
        compacted = delta_table(path)
        check_fence(path, compacted)
        compacted.create_checkpoint()

    def _expire_rows(self, name: str, path: str) -> None:
        assert self.policy.raw_retention is not None
        cutoff = utc_now() - self.policy.raw_retention
        # The appends of the job's queries wait meanwhile: a DELETE that rewrites files
        # fails a concurrent append to the same table.
        with committing(path) as commit:
            predicate = f"ingested_at < '{cutoff.isoformat()}'"
            done = commit.table.delete(predicate, commit_properties=commit.properties())
        self.counts.rows_expired += int(done.get("num_deleted_rows", 0))

    def start(self, interval_s: float) -> None:
        """Run a pass every ``interval_s`` seconds on a thread of its own, until stop()."""

        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.run_pass()

        self._thread = threading.Thread(target=loop, name="maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread after the step it is in (a compaction runs to its end)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
