"""Data files written and not yet committed: which tables have them, and since when.

A micro-batch writes its data files first (the executors: jobs/writer/data_files.py) and
commits them afterwards (the driver: jobs/writer/delta_io.py). Until the commit, no log
references them, and a VACUUM that deletes every unreferenced file older than its
retention (``full``) would take them if the commit waited that long (a slow store, a lock
held by a compaction, a long MERGE before it). So each write says here, before its first
file, that it has begun, and maintenance spares every file of a table from the moment
its oldest uncommitted write began (jobs/writer/maintenance.py).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from conf.lake_location import parse_lake
from contract.times import utc_now

_GUARD = threading.Lock()
_BEGUN: dict[int, tuple[frozenset[str], datetime]] = {}  # by token: tables, since when
_TOKENS = itertools.count()


@contextmanager
def uncommitted(*paths: str, now: Callable[[], datetime] = utc_now) -> Iterator[None]:
    """Around writing data files into the tables at ``paths`` and committing them."""
    tables = frozenset(parse_lake(p) for p in paths)
    with _GUARD:
        token = next(_TOKENS)
        _BEGUN[token] = (tables, now())
    try:
        yield
    finally:
        with _GUARD:
            del _BEGUN[token]


def oldest_uncommitted(path: str) -> datetime | None:
    """When the oldest write into the table at ``path`` that has not committed began
    (None: none is under way). Its files, and every later one, are not older than that."""
    table = parse_lake(path)
    with _GUARD:
        begun = [since for tables, since in _BEGUN.values() if table in tables]
    return min(begun, default=None)
