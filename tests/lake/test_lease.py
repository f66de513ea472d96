"""The lake's lease (lake/lease.py) on a local lake, with simulated clocks: one holder at
a time, a clean stop hands the lake over at once, a killed holder is replaced, a stalled
one is replaced after the expiry and then stops before its next commit."""

from __future__ import annotations

import errno
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from lake.lease import FOLDER, LakeLease, LeaseHeld, LeaseLost
from tests.support.leases import EXPIRY, Clocks, lease, race, remote


def test_the_first_job_holds_the_lake_and_a_second_is_told_who(tmp_path: Path) -> None:
    first, second = lease(tmp_path), lease(tmp_path)

    assert first.acquire(standby=False)
    with pytest.raises(LeaseHeld) as held:
        second.acquire(standby=False)

    message = str(held.value)
    assert f"pid {first.me.pid}" in message and first.me.host in message
    assert "holding since 2026-11-26 12:00:00 UTC" in message and "--standby" in message
    assert (first.epoch, second.epoch) == (1, None)
    assert [p.name for p in (tmp_path / FOLDER).iterdir()] == ["00000000000000000001.json"]


def test_a_clean_stop_hands_the_lake_to_the_next_job_at_once(tmp_path: Path) -> None:
    first, second = lease(tmp_path), lease(tmp_path)
    first.acquire(standby=False)
    first.renew()
    first.release()

    assert second.acquire(standby=False)
    assert second.epoch == 4  # 1 taken, 2 renewed, 3 released, 4 taken again


def test_a_killed_holder_on_this_machine_is_replaced_at_once(tmp_path: Path) -> None:
    first = lease(tmp_path)
    first.acquire(standby=False)
    # The first job's process ends without releasing (kill -9): a pid that ran and ended.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    first.me = replace(first.me, pid=int(gone.stdout))
    first.renew()  # its last renewal names the ended process
    said: list[str] = []
    second = lease(tmp_path, said=said)

    assert second.acquire(standby=False)
    assert second.epoch == 3
    assert any("took the lake" in line and f"pid {gone.stdout.strip()}" in line for line in said)


def test_a_standby_takes_over_once_the_holder_stops_renewing(tmp_path: Path) -> None:
    first = lease(tmp_path)
    first.acquire(standby=False)
    remote(first)
    clocks, said = Clocks(), []
    standby = lease(tmp_path, clocks, said)
    renewals = iter(range(3))

    def renewing_for_a_while() -> bool:
        # The holder renews three times while the standby waits, then stops.
        if next(renewals, None) is not None:
            first.renew()
        return False

    assert standby.acquire(standby=True, should_stop=renewing_for_a_while)

    # Waited for the expiry after the last renewal it saw (at its third look, 1 s apart),
    # by its own clock.
    assert clocks.t - 1000.0 == pytest.approx(2.0 + EXPIRY)
    assert standby.epoch == first.epoch + 1
    assert "waits for it to stop" in said[0] and "took the lake" in said[-1]
    # The old holder finds out at its next renewal (or its next commit's check).
    with pytest.raises(LeaseLost, match="taken over by another job"):
        first.renew()
    with pytest.raises(LeaseLost):
        first.check()


def test_a_job_that_is_not_a_standby_waits_only_for_a_holder_that_looks_gone(
    tmp_path: Path,
) -> None:
    holder_clocks = Clocks()
    first = lease(tmp_path, holder_clocks)
    first.acquire(standby=False)
    remote(first)
    # The holder's last renewal is a minute old by the wall clock: it looks gone, so the
    # new job watches for the expiry (its own clock) instead of exiting.
    clocks = Clocks()
    clocks.wall += timedelta(minutes=1)
    second = lease(tmp_path, clocks)

    assert second.acquire(standby=False)
    assert clocks.t - 1000.0 >= EXPIRY


def test_a_commit_after_a_stall_renews_first_and_stops_if_the_lake_was_taken(
    tmp_path: Path,
) -> None:
    clocks = Clocks()
    first = lease(tmp_path, clocks)
    first.acquire(standby=False)
    first.check()  # just renewed: nothing to do
    assert first.epoch == 1

    clocks.sleep(EXPIRY * 0.6)  # a stall: the renewal is overdue, so check() renews
    first.check()
    assert first.epoch == 2

    remote(first)
    clocks.sleep(EXPIRY * 0.6)
    taker = lease(tmp_path)
    taker._claim(first.epoch + 1)  # another job took it after the expiry
    with pytest.raises(LeaseLost, match="commits nothing more and stops"):
        first.check()
    assert first.lost


def test_of_jobs_racing_for_a_free_lake_exactly_one_wins(tmp_path: Path) -> None:
    racers = [lease(tmp_path) for _ in range(8)]

    assert race(racers, timeout=60) == ["held"] * 7 + ["holds"]


def test_renewals_keep_only_the_newest_epochs(tmp_path: Path) -> None:
    holder = lease(tmp_path)
    holder.acquire(standby=False)
    for _ in range(20):
        holder.renew()

    names = sorted(p.name for p in (tmp_path / FOLDER).iterdir())
    assert holder.epoch == 21
    assert names == [f"{e:020d}.json" for e in range(17, 22)]


def test_a_job_that_stopped_renews_no_more_yet_still_hands_the_lake_back(tmp_path: Path) -> None:
    """After the job said why it stopped (a full disk, say), no renewal runs and none
    fails to repeat it; the release still hands the lake over."""
    said: list[str] = []
    holder = LakeLease(str(tmp_path), 3.0, said.append)  # renews every 0.75 s, real time
    holder.acquire(standby=False)
    holder.keep()
    holder.stop_renewing()
    thread = holder._thread
    assert thread is not None
    thread.join(timeout=5)
    assert not thread.is_alive() and holder.epoch == 1
    holder.release()
    assert lease(tmp_path).acquire(standby=False) and said == []


def test_a_renewal_failing_as_the_job_stops_says_nothing_after_the_jobs_last_line(
    tmp_path: Path,
) -> None:
    """A renewal under way when the job stops (its disk just filled up) fails after the
    job's own line: it says nothing then (CI saw its line after the job's last words)."""
    said: list[str] = []
    holder = LakeLease(str(tmp_path), 3.0, said.append)  # renews every 0.75 s, real time
    holder.acquire(standby=False)
    renewing, stopped = threading.Event(), threading.Event()

    def renew() -> None:  # the disk fills up during this renewal
        renewing.set()
        stopped.wait(timeout=30)
        raise OSError(errno.ENOSPC, "No space left on device")

    holder.renew = renew  # type: ignore[method-assign]
    holder.keep()
    assert renewing.wait(timeout=30)
    holder.stop_renewing()
    stopped.set()
    thread = holder._thread
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive() and said == []
