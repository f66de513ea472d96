"""What the lease tests share: jobs racing for a free lake (lake/lease.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

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
