"""What a failed query means for the job: the failure that stops it, said in one line
(the lake taken over, its disk full, a checkpoint the query cannot follow), or why the
query is restarted on its checkpoint, exactly once, as after a crash: an entry a
predecessor wrote into its checkpoint as it woke from a stall, or the lake's object store
back after an outage (docs/reliability.md)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from deltalake.exceptions import DeltaError

from common.errors import first_line
from conf.lake_location import is_object_store
from conf.settings.job import JobSettings
from jobs.spark.checkpoints import advice, concurrent_checkpoint_update, incompatible_checkpoint
from jobs.spark.jvm_stderr import JvmStderr
from lake import storage
from lake.layout import Lake
from lake.lease import LakeLease, LeaseLost
from lake.storage import NO_SPACE, STORAGE_ERRORS, storage_full, store_unreachable

# How many times a query of a job that took the lake over is restarted after it met what
# the job before it wrote into its checkpoint as it woke from a stall (lake/lease.py).
PREDECESSOR_RESTARTS = 3
PREDECESSOR = (
    "met an entry of its checkpoint written by the job this one took the lake from, as "
    "that one woke from a stall"
)
# A query that failed because the lake's object store did not answer is restarted once
# the store answers again (asked every STORE_POLL_S); failing so again within
# STORE_RETRY_S of that restart, it stops the job (the store answers this process's
# listing but not the query: a setting, not an outage).
STORE_BACK = "failed while the lake's object store did not answer"
STORE_POLL_S = 2.0
STORE_RETRY_S = 30.0


class JobFailed(RuntimeError):
    """A query failed; the message says which and why."""


class LakeTaken(JobFailed):
    """Another job took the lake over: this one committed nothing more."""


class LakeFull(JobFailed):
    """The lake's disk is full: the job stopped; the message says what to do."""


class CheckpointMismatch(JobFailed):
    """A query cannot use its checkpoint; the message says what to do."""


class Recovery:
    """The job's answer to a failed query (:meth:`failure`, :meth:`restart_reason`); it
    counts the restarts by query, so that a failure that comes back stops the job."""

    def __init__(
        self,
        settings: JobSettings,
        lake: Lake,
        lease: LakeLease | None,
        jvm_stderr: JvmStderr | None,
        echo: Callable[[str], None] | None,
    ) -> None:
        self.settings = settings
        self.lake = lake
        self.lease = lease
        self.jvm_stderr = jvm_stderr
        self.echo = echo
        self._restarts: dict[str, int] = {}
        self._store_restarts: dict[str, float] = {}  # by query: when last restarted so

    def failure(self, name: str, error: BaseException) -> JobFailed:
        """What the failure of the query ``name`` with ``error`` stops the job with."""
        if self.lease is not None:
            # A query that failed on a conflict in its checkpoint or table may have met a
            # job that took the lake over: that is the one thing to say then.
            with contextlib.suppress(LeaseLost, *STORAGE_ERRORS):
                self.lease.verify()
            if self.lease.lost:
                return LakeTaken(self.lease.lost)
        if storage_full(str(error)):
            if self.jvm_stderr is not None:
                self.jvm_stderr.mute()  # every query's stack trace says the same
            return LakeFull(
                f"the lake's disk is full ({self.settings.lake}: {NO_SPACE}): the job "
                "stopped, having lost and repeated nothing; free some space and start it "
                "again, and it resumes where it stopped"
            )
        if incompatible_checkpoint(str(error)):
            return CheckpointMismatch(advice(name, self.lake))
        return JobFailed(f"query {name} failed: {first_line(error)}")

    def restart_reason(
        self, name: str, error: BaseException, should_stop: Callable[[], bool]
    ) -> str | None:
        """Why the query ``name``, failed with ``error``, is to be restarted on its
        checkpoint (exactly once, as after a crash); None when its failure stops the job."""
        if self._predecessor_wrote(name, error):
            self._restarts[name] = self._restarts.get(name, 0) + 1
            return PREDECESSOR
        if self._store_was_away(name, error) and self._wait_for_store(should_stop):
            self._store_restarts[name] = time.monotonic()
            return STORE_BACK
        return None

    def _predecessor_wrote(self, name: str, error: BaseException) -> bool:
        """Whether the query ``name`` failed on an entry of its checkpoint that the job this
        one took the lake from wrote as it woke from a stall (before its lease or the
        tables' fence stopped it), while this job still holds the lake: the query is then
        restarted on what the checkpoint holds (a batch planned there is run again, exactly
        once)."""
        lease = self.lease
        if (
            lease is None
            or lease.taken_from is None
            or not concurrent_checkpoint_update(str(error))
        ):
            return False
        if self._restarts.get(name, 0) >= PREDECESSOR_RESTARTS:
            return False
        with contextlib.suppress(LeaseLost, *STORAGE_ERRORS):
            lease.verify()
        return not lease.lost

    def _store_was_away(self, name: str, error: BaseException) -> bool:
        """Whether the query ``name`` failed because the lake's object store did not answer (an
        outage, a network cut), and not again right after a restart for that: the job then
        waits for the store and restarts the query on its checkpoint, exactly once."""
        if not (is_object_store(self.settings.lake) and store_unreachable(str(error))):
            return False
        restarted = self._store_restarts.get(name)
        return restarted is None or time.monotonic() - restarted >= STORE_RETRY_S

    def _wait_for_store(self, should_stop: Callable[[], bool]) -> bool:
        """Wait until the lake's store answers again (the lease's listing, which also says
        whether another job took the lake meanwhile); False when a stop came first.

        Raises:
            LakeTaken: another job took the lake over while the store was away.
        """
        said, began = False, time.monotonic()
        while not should_stop():
            if self.jvm_stderr is not None:
                self.jvm_stderr.drop_held()  # Spark's errors about it: this says it
            try:
                if self.lease is not None:
                    self.lease.verify()
                else:
                    storage.is_folder(self.settings.lake)
            except LeaseLost as exc:
                raise LakeTaken(str(exc)) from None
            except (*STORAGE_ERRORS, DeltaError) as exc:
                if not said and self.echo:
                    self.echo(
                        f"the lake's object store does not answer ({first_line(exc)}): "
                        "waiting for it; nothing is lost, the queries resume where they were"
                    )
                said = True
                time.sleep(STORE_POLL_S)  # the outage under way: nothing to poll but it
                continue
            if said and self.echo:
                waited = time.monotonic() - began
                self.echo(f"the lake's object store answers again after {waited:.0f} s")
            return True
        return False
