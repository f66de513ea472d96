"""What the lease tests share: jobs racing for a free lake (lake/lease.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lake.lease import LakeLease, LeaseHeld


def race(racers: Sequence[LakeLease], timeout: float) -> list[str]:
    """Every racer tries to take the lake at the same moment; how each fared, sorted:
    ``holds`` for a winner, ``held`` for one told the lake is held."""
    start = threading.Barrier(len(racers))
    outcomes: list[str] = []

    def take(racer: LakeLease) -> None:
        start.wait()
        try:
            racer.acquire(standby=False)
            outcomes.append("holds")
        except LeaseHeld:
            outcomes.append("held")

    threads = [threading.Thread(target=take, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return sorted(outcomes)


EXPIRY = 10.0


class Clocks:
    """One simulated machine's clocks: ``sleep`` moves both on."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.wall = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

    def clock(self) -> float:
        return self.t

    def now(self) -> datetime:
        return self.wall

    def sleep(self, seconds: float) -> None:
        self.t += seconds
        self.wall += timedelta(seconds=seconds)


def lease(lake: Path, clocks: Clocks | None = None, said: list[str] | None = None) -> LakeLease:
    clocks = clocks or Clocks()
    log = said.append if said is not None else lambda line: None
    return LakeLease(str(lake), EXPIRY, log, clock=clocks.clock, now=clocks.now, sleep=clocks.sleep)


def remote(holder: LakeLease) -> None:
    """Make ``holder`` look like a job on another machine (its pid cannot be checked)."""
    holder.me = replace(holder.me, machine="another-machine")
    holder.renew()
