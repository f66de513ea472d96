"""One writer per lake: the job's lease on its lake (docs/architecture.md#the-lease).

The lease is a numbered series of small JSON files, ``<lake>/_lease/<epoch>.json``, each
written with an atomic create-if-absent: ``O_EXCL`` on a file system (through a hard link,
which NFS honours too), ``If-None-Match: *`` on object storage (S3, and S3Proxy from 4.0
on). Whoever creates epoch N+1 holds the lake from then on; two jobs that race for it
cannot both win. Nothing else is needed: no clock is compared between machines, no file
is ever overwritten.

- **Holding.** The holder renews by creating the next epoch every ``expiry / 4``
  seconds. Before each commit it checks that its lease is still its own and renewed
  within ``expiry / 2`` (renewing first if not), so a holder that stalled stops before it
  writes (:meth:`LakeLease.check`).
- **Taking over.** Another job takes the lake when the newest epoch says it was released
  (a clean stop), when it names a process on this machine that no longer runs, or when
  the newest epoch stayed the same for ``expiry`` seconds of the taker's own clock (a
  holder killed, or its machine lost). A job that is not a standby and finds a holder
  that looks alive (renewed within ``expiry``, by its wall clock: only a hint) exits at
  once naming it (:class:`LeaseHeld`).
- **Losing it.** A holder that finds a newer epoch than its own, made by someone else,
  has lost the lake (:class:`LeaseLost`) and must not commit again. It renews only
  after a fresh listing shows its own epoch as the newest, so an old epoch name the new
  holder already deleted is never created again by a holder that stalled.
- **Fencing at the store.** The clock only tells a holder when to stop; the store is what
  refuses it. The epoch a job took the lake with is its *term*, and every commit it makes
  to a table of the lake carries the Delta transaction ``(lake-lease, term)``
  (:data:`FENCE_APP_ID`; jobs/writer/delta_io.committing). A job that takes the lake
  from a holder that did not hand it back stamps every table with its term before
  anything else; a commit then refuses to go
  ahead on a snapshot holding a newer term (:meth:`LakeLease.fence`), and a commit made
  on an older snapshot fails as a concurrent transaction (delta-rs refuses a commit whose
  application ids a winning commit updated), checked again on the newer snapshot.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import obstore
import psutil
from obstore.exceptions import AlreadyExistsError, NotFoundError
from obstore.store import LocalStore, S3Store

from common.errors import first_line
from conf.lake_location import SCHEME, endpoint, is_object_store, region
from contract.times import iso, parse_instant, readable, utc_now
from lake.storage import STORAGE_ERRORS

FOLDER = "_lease"
# The Delta application id of the fence: its transaction version in a table is the term of
# the newest job that wrote it.
FENCE_APP_ID = "lake-lease"
KEEP = 5  # epochs kept, the newest among them (older ones are deleted as the holder renews)
# How long a renewal may be due before a commit renews it itself, and how often the
# holder renews, as fractions of the expiry.
CHECK_FRACTION = 0.5
RENEW_FRACTION = 0.25


class StoreUnsafe(RuntimeError):
    """The lake's object store does not refuse a second create of one key; the message
    names the store and what it lacks."""


class LeaseHeld(RuntimeError):
    """Another job holds the lake; the message names it and says what to do."""


class LeaseLost(RuntimeError):
    """This job's lease was taken by another job: it must not commit again."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) the lake, as one epoch file says."""

    holder: str  # a random id per job run
    host: str
    pid: int
    # The process, told apart from a later one with its pid: its start time, and the
    # kernel (boot id) and pid namespace its pid means something in.
    process_started: float
    machine: str
    since: str  # when this holder took the lake (ISO, UTC)
    renewed_at: str
    expiry_seconds: float
    released: bool = False

    def describe(self) -> str:
        """'host pid 123, holding since 2026-11-26 10:00:00 UTC'."""
        return f"{self.host} pid {self.pid}, holding since {readable(parse_instant(self.since))}"


def _machine() -> str:
    """This kernel and pid namespace: where a pid names the same process for everyone."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="utf-8").strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return f"unknown-{uuid.uuid4().hex}"  # never equal: no pid check across it
    return f"{boot}/{namespace}"


def _runs(holder: Holder) -> bool:
    """Whether ``holder``'s process runs, as far as this machine can tell (True when it
    cannot: another machine or pid namespace)."""
    if holder.machine != _machine():
        return True
    try:
        process = psutil.Process(holder.pid)
        started, status = process.create_time(), process.status()
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True
    # A zombie (killed, not yet reaped by its parent) runs no more either.
    return abs(started - holder.process_started) < 1.0 and status != psutil.STATUS_ZOMBIE


def _store(lake: str) -> obstore.store.ObjectStore:
    """The lake's lease folder as an object store: the local file system or S3."""
    if not is_object_store(lake):
        return LocalStore(Path(lake) / FOLDER, mkdir=True)
    bucket, _, prefix = lake.removeprefix(f"{SCHEME}://").partition("/")
    config: dict[str, Any] = {"region": region(), "conditional_put": "etag"}
    url = endpoint()
    if url:
        config |= {"endpoint": url, "allow_http": url.startswith("http://")}
        config["virtual_hosted_style_request"] = False
    return S3Store(bucket, prefix=f"{prefix}/{FOLDER}".lstrip("/"), config=config)


def check_create_if_absent(lake: str) -> None:
    """On a lake in object storage: create one probe key twice; the second create must be
    refused. The lease and every commit (delta-rs's log entries) rest on the store
    honouring ``If-None-Match: *``; a store that ignores it would let two jobs both win.

    Raises:
        StoreUnsafe: the second create went through.
    """
    if not is_object_store(lake):
        return  # O_EXCL on a file system
    store = _store(lake)
    probe = f"create-probe-{uuid.uuid4().hex}"  # not an epoch's name (*.json)
    try:
        obstore.put(store, probe, b"first", mode="create")
        try:
            obstore.put(store, probe, b"second", mode="create")
        except (AlreadyExistsError, FileExistsError):
            return
    finally:
        with contextlib.suppress(Exception):  # best effort: a probe key left is harmless
            obstore.delete(store, probe)
    where = endpoint() or "Amazon S3"
    raise StoreUnsafe(
        f"the object store at {where} accepted a second create of one key in {lake}: it "
        "does not honour S3's conditional write (If-None-Match: *), which the lake's lease "
        "and every commit rest on, so two jobs could both write the lake. Use a store that "
        "does (Amazon S3, MinIO, S3Proxy 4 or later)"
    )


def _name(epoch: int) -> str:
    return f"{epoch:020d}.json"


class LakeLease:
    """This job's lease on ``lake``: :meth:`acquire`, then :meth:`check` before each
    commit, :meth:`renew` (a thread: :meth:`keep`), :meth:`release` on a clean stop."""

    def __init__(
        self,
        lake: str,
        expiry: float,
        log: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``clock``, ``now`` and ``sleep``: this job's clocks (tests give simulated ones)."""
        self.lake, self.expiry, self.log = lake, expiry, log
        self._clock, self._now, self._sleep = clock, now, sleep
        self._store = _store(lake)
        stamp = iso(now())
        self.me = Holder(
            holder=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(),
            process_started=psutil.Process().create_time(), machine=_machine(),
            since=stamp, renewed_at=stamp, expiry_seconds=expiry,
        )  # fmt: skip
        self.epoch: int | None = None
        self.term: int | None = None  # the epoch this job took the lake with
        self.taken_from: Holder | None = None  # the holder it took the lake over from
        self._renewed = 0.0  # this clock's time of the last renewal
        self._lost: str | None = None
        self._when_lost: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Held while the renewals' thread speaks, and while they are stopped: once
        # stop_renewing returns, that thread says nothing more.
        self._speaking = threading.Lock()
        self._thread: threading.Thread | None = None

    # -- the files ---------------------------------------------------------------------

    def _epochs(self) -> list[int]:
        names = [m["path"].rsplit("/", 1)[-1] for batch in obstore.list(self._store) for m in batch]
        return sorted(int(n.removesuffix(".json")) for n in names if n.endswith(".json"))

    def _read(self, epoch: int) -> Holder:
        data = json.loads(bytes(obstore.get(self._store, _name(epoch)).bytes()))
        return Holder(**{k: data[k] for k in Holder.__dataclass_fields__ if k in data})

    def newest(self) -> tuple[int, Holder] | None:
        """The newest epoch and what it says; None when the lake was never held."""
        epochs = self._epochs()
        return (epochs[-1], self._read(epochs[-1])) if epochs else None

    def _create(self, epoch: int, record: Holder) -> bool:
        """Create epoch ``epoch``; False when it exists already (someone was first)."""
        body = json.dumps({"epoch": epoch, **asdict(record)}, indent=1).encode()
        try:
            obstore.put(self._store, _name(epoch), body, mode="create")
        except (AlreadyExistsError, FileExistsError):
            return False
        return True

    # -- taking the lake ---------------------------------------------------------------

    def acquire(self, standby: bool, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Take the lake: at once when it is free, else (``standby``, or a holder that
        looks gone) once its holder stops renewing. False when ``should_stop`` said stop
        first.

        Raises:
            LeaseHeld: not ``standby`` and a holder that looks alive has it.
        """
        watched: tuple[int, float] | None = None  # an epoch, and since when it stands
        said = False
        while not should_stop():
            newest = self.newest()
            if newest is None:
                if self._claim(1):
                    return True
                continue
            epoch, holder = newest
            if watched is None or watched[0] != epoch:
                watched = (epoch, self._clock())
            stood = self._clock() - watched[1]
            if holder.released or not _runs(holder) or stood >= holder.expiry_seconds:
                if self._claim(epoch + 1, taken_from=None if holder.released else holder):
                    return True
                continue
            renewed = (self._now() - parse_instant(holder.renewed_at)).total_seconds()
            if not standby and renewed < holder.expiry_seconds:
                raise LeaseHeld(
                    f"the lake {self.lake} is held by another job ({holder.describe()}, "
                    f"renewed {renewed:.0f} s ago): stop that one, or start this one with "
                    f"--standby to take over when it stops"
                )
            if not said:
                wait = "waits for it to stop" if standby else "takes it over unless it renews"
                self.log(
                    f"lease: the lake {self.lake} is held by {holder.describe()}; this job "
                    f"{wait} (after {holder.expiry_seconds:g} s without a renewal)"
                )
                said = True
            self._sleep(min(1.0, holder.expiry_seconds * RENEW_FRACTION))  # poll interval
        return False

    def _forget(self, epoch: int) -> None:
        """Delete an old epoch. Epochs follow one another, and each new one (taken or
        renewed) drops the one KEEP behind it: the last KEEP stay, with no listing."""
        if epoch >= 1:
            with contextlib.suppress(*STORAGE_ERRORS):  # gone already, or out of reach
                obstore.delete(self._store, _name(epoch))

    def _claim(self, epoch: int, taken_from: Holder | None = None) -> bool:
        stamp = iso(self._now())
        record = replace(self.me, since=stamp, renewed_at=stamp)
        if not self._create(epoch, record):
            return False
        self._forget(epoch - KEEP)
        with self._lock:
            self.me, self.epoch, self._renewed, self._lost = record, epoch, self._clock(), None
            self.term = epoch
        self.taken_from = taken_from
        if taken_from is not None:
            self.log(f"lease: took the lake {self.lake} over from {taken_from.describe()}")
        return True

    # -- holding it --------------------------------------------------------------------

    def renew(self) -> None:
        """Create the next epoch.

        Raises:
            LeaseLost: someone else created it: the lake is theirs.
        """
        with self._lock:
            if self._lost:
                raise LeaseLost(self._lost)
            assert self.epoch is not None, "renew() before acquire()"
            # Only on top of its own epoch: one it stalled past may have been taken over
            # and deleted since (each holder keeps KEEP), and must not be made again.
            self._still_newest()
            epoch = self.epoch + 1
            record = replace(self.me, renewed_at=iso(self._now()))
            if not self._create(epoch, record):
                self._taken(epoch)
            self.epoch, self._renewed = epoch, self._clock()
        self._forget(epoch - KEEP)

    def _still_newest(self) -> None:
        """Raise LeaseLost unless this job's epoch is still the newest (under the lock)."""
        epochs = self._epochs()
        newer = [e for e in epochs if self.epoch is not None and e > self.epoch]
        if newer:
            self._taken(newer[-1])

    def _taken(self, epoch: int) -> None:
        """Epoch ``epoch`` exists: unless this job wrote it, the lake is lost (raises)."""
        try:
            other: Holder | None = self._read(epoch)
        except (NotFoundError, FileNotFoundError):
            other = None  # deleted meanwhile: a newer one exists, which is not ours either
        if other is not None and other.holder == self.me.holder:
            return
        who = other.describe() if other is not None else f"epoch {epoch}"
        self._lose(
            f"lease: the lake {self.lake} was taken over by another job ({who}) while this "
            "one was not renewing its lease: it commits nothing more and stops"
        )

    def _lose(self, why: str) -> None:
        if not self._lost:
            self._lost = why
            for hook in self._when_lost:
                hook()
        raise LeaseLost(self._lost)

    def when_lost(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` (quick, any thread) when the lease is found lost."""
        self._when_lost.append(hook)

    def verify(self) -> None:
        """Look at the store now: the lake is still this job's (a query that failed on a
        conflict in its checkpoint asks this, to say why).

        Raises:
            LeaseLost: a newer epoch, not this job's, exists.
        """
        with self._lock:
            if self._lost:
                raise LeaseLost(self._lost)
            if self.epoch is not None:
                self._still_newest()

    def fence(self, term: int | None) -> None:
        """Before a commit on a table snapshot whose fence (the ``lake-lease`` transaction)
        is at ``term`` (None: never fenced): it must not be newer than this job's term.

        Raises:
            LeaseLost: a job that took the lake after this one has written the table.
        """
        if self._lost:
            raise LeaseLost(self._lost)
        if term is not None and (self.term is None or term > self.term):
            with self._lock:
                self._lose(
                    f"lease: the lake {self.lake} was taken over by another job (its "
                    f"epoch {term} has written there; this job holds epoch {self.term}): "
                    "this one commits nothing more and stops"
                )

    def check(self) -> None:
        """Before a commit: the lake is still this job's, renewed recently enough that
        no one can have taken it over meanwhile (renewing first if need be).

        Raises:
            LeaseLost: it is not.
        """
        if self._lost:
            raise LeaseLost(self._lost)
        if self._clock() - self._renewed > self.expiry * CHECK_FRACTION:
            self.renew()

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, or None."""
        return self._lost

    def keep(self) -> None:
        """Renew on a thread until :meth:`release` or a loss (then :attr:`lost` says why)."""

        def loop() -> None:
            failing = False  # said once per outage, not at every renewal
            while not self._stop.wait(self.expiry * RENEW_FRACTION):
                try:
                    self.renew()
                except LeaseLost:
                    return
                except STORAGE_ERRORS as exc:  # out of reach: check() stops commits
                    if not failing:
                        self._say(
                            f"lease: could not renew the lease on {self.lake} "
                            f"({first_line(exc)}); trying again every "
                            f"{self.expiry * RENEW_FRACTION:g} s"
                        )
                    failing = True
                    continue
                if failing:
                    self._say(f"lease: renewed the lease on {self.lake} again")
                failing = False

        self._thread = threading.Thread(target=loop, name="lake-lease", daemon=True)
        self._thread.start()

    def _say(self, line: str) -> None:
        """Log ``line`` from the renewals' thread, unless they were stopped meanwhile."""
        with self._speaking:
            if not self._stop.is_set():
                self.log(line)

    def stop_renewing(self) -> None:
        """Stop the renewals only: the job has stopped and said why, and a renewal failing
        for the same reason (a full disk, say) would only repeat it, after the job's last
        line (a renewal may be under way). :meth:`release` still hands the lake back."""
        with self._speaking:
            self._stop.set()

    def release(self) -> None:
        """Stop renewing and hand the lake back (a standby takes it at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with self._lock:
            if self.epoch is None or self._lost:
                return
            try:
                self._still_newest()
                record = replace(self.me, renewed_at=iso(self._now()), released=True)
                if self._create(self.epoch + 1, record):
                    self.epoch += 1
            except LeaseLost:
                return  # the lake is someone else's: nothing of ours to hand back
            except STORAGE_ERRORS as exc:
                self.log(
                    f"lease: could not hand the lake {self.lake} back ({first_line(exc)}): "
                    f"another job takes it over {self.expiry:g} s after this one's last renewal"
                )
