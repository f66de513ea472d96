"""Table maintenance as the tests run it: a policy with small thresholds, and passes run
beside a writer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

from jobs.writer.maintenance import Maintenance, Policy, StreamGuard
from lake.layout import Lake


def policy(**changes: object) -> Policy:
    given: dict[str, object] = {
        "compact_min_files": 3,
        "small_size": 8 * 2**20,
        "target_size": 128 * 2**20,
        "retention": timedelta(0),
        "raw_retention": None,
    }
    return Policy(**{**given, **changes})  # type: ignore[arg-type]


def maintenance(
    lake: Lake, needed_from=lambda: None, tables: tuple[str, ...] | None = None, **changes: object
) -> Maintenance:
    keeper = Maintenance(lake, policy(**changes), StreamGuard(needed_from))
    if tables is not None:
        keeper.tables = tables
    return keeper


def passes_beside(keeper: Maintenance, write: Callable[[int], object], numbers: range,
                  passes: int = 5) -> list[int]:  # fmt: skip
    """``passes`` maintenance passes while a thread calls ``write(n)`` for each of
    ``numbers`` in turn (the job's commits, meanwhile), then one more pass once it has
    stopped; the numbers written."""
    stop = threading.Event()
    written: list[int] = []

    def writes() -> None:
        for n in numbers:
            if stop.is_set():
                return
            write(n)
            written.append(n)

    writer = threading.Thread(target=writes)
    writer.start()
    try:
        for _ in range(passes):
            keeper.run_pass(housekeeping=False)
    finally:
        stop.set()
        writer.join()
    keeper.run_pass(housekeeping=False)
    return written
