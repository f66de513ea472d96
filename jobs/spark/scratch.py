"""The scratch folder a Spark process owns, instead of the system temp directory.

Spark keeps shuffle blocks, fetched files, its state stores' working copies and its own
temp folders (``spark-*``, ``blockmgr-*``) under ``spark.local.dir``, and some of its
start-up files under the JVM's ``java.io.tmpdir``; both default to ``/tmp``. A clean stop
removes them, but a killed driver (SIGKILL, a lost host, a cut test run) leaves them there
for good. SensorWatch gives each process a folder of its own under one root
(``SENSORWATCH_SCRATCH_DIR``, default ``var/scratch``): it is removed when the process
exits, and a later start removes the folders of processes that no longer run.

A process owns its folder by holding a lock on a file in it (``flock``), which the kernel
releases however the process ends. Not by its pid and start time: a start time in
wall-clock seconds moves when the clock is stepped (a virtual machine restored from a
snapshot, NTP), and then another process took a live job's folder for abandoned and
removed it under the running JVM (the job died mid-batch). Nor by its pid alone: pids
are reused, and containers sharing the folder each count their own.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import time
import uuid
from functools import cache
from pathlib import Path
from typing import IO

from conf.paths import VAR_DIR

SCRATCH_ENV = "SENSORWATCH_SCRATCH_DIR"
LOCK_NAME = ".owner.lock"
NEW_PREFIX = "."  # a folder being made: ".<name>" until its lock is held
NEW_GRACE_S = 60.0  # a folder being made older than this was left by a killed start

_held: list[IO[bytes]] = []  # this process's lock, open for as long as it runs


def scratch_root() -> Path:
    """Where every process's scratch folder lives (``SENSORWATCH_SCRATCH_DIR``)."""
    return Path(os.environ.get(SCRATCH_ENV) or VAR_DIR / "scratch")


def _owner_gone(folder: Path) -> bool:
    """True when no process holds ``folder``'s lock (or it has none: left unfinished)."""
    try:
        lock = open(folder / LOCK_NAME, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return True
    except OSError:
        return False  # unreadable: not ours to judge
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held (BlockingIOError), or no locks on this file system
            return False
        return True  # the lock is dropped on close: nobody else wants a dead folder


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the scratch folders whose process no longer runs; return them."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        if not folder.is_dir():
            continue
        if folder.name.startswith(NEW_PREFIX):
            try:
                young = time.time() - folder.stat().st_mtime < NEW_GRACE_S
            except FileNotFoundError:
                continue  # its maker finished it meanwhile
            if young:
                continue  # being made: its lock may not be held yet
        if _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def claim(root: Path) -> Path:
    """Make a folder under ``root`` and hold its lock: made under a hidden name, locked,
    then renamed, so no other process ever sees it unlocked under its final name."""
    name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    making = root / f"{NEW_PREFIX}{name}"
    making.mkdir(parents=True)
    lock = open(making / LOCK_NAME, "wb")  # noqa: SIM115 - held until the process ends
    # A file system without locks: the others cannot lock it either, and keep the folder.
    with contextlib.suppress(OSError):
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    folder = root / name
    making.rename(folder)
    _held.append(lock)
    return folder


@cache
def process_scratch_dir() -> Path:
    """This process's scratch folder, made on first call (abandoned ones are removed
    first) and removed when the process exits."""
    root = scratch_root()
    remove_abandoned(root)
    folder = claim(root)
    atexit.register(shutil.rmtree, folder, True)
    return folder
