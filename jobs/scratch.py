"""The scratch folder a Spark process owns, instead of the system temp directory.

Spark keeps shuffle blocks, fetched files and its own temp folders (``spark-*``,
``blockmgr-*``) under ``spark.local.dir``, and some of its start-up files under the JVM's
``java.io.tmpdir``; both default to ``/tmp``. A clean stop removes them, but a killed
driver (SIGKILL, a lost host, a cut test run) leaves them there for good. SensorWatch
gives each process a folder of its own under one root (``SENSORWATCH_SCRATCH_DIR``,
default ``var/scratch``): it is removed when the process exits, and a later start removes
the folders of processes that no longer run.
"""

from __future__ import annotations

import atexit
import os
import shutil
from functools import cache
from pathlib import Path

import psutil

from conf.paths import VAR_DIR

SCRATCH_ENV = "SENSORWATCH_SCRATCH_DIR"


def scratch_root() -> Path:
    """Where every process's scratch folder lives (``SENSORWATCH_SCRATCH_DIR``)."""
    return Path(os.environ.get(SCRATCH_ENV) or VAR_DIR / "scratch")


def _owner_tag(pid: int) -> str | None:
    """``<pid>-<start time>``: a pid reused by a later process does not match."""
    try:
        return f"{pid}-{int(psutil.Process(pid).create_time() * 100)}"
    except psutil.Error:
        return None


def _is_alive(folder_name: str) -> bool:
    pid, _, _ = folder_name.partition("-")
    return pid.isdigit() and _owner_tag(int(pid)) == folder_name


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the scratch folders whose process no longer runs; return them."""
    removed = []
    if not root.is_dir():
        return removed
    for folder in root.iterdir():
        if folder.is_dir() and not _is_alive(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@cache
def process_scratch_dir() -> Path:
    """This process's scratch folder, made on first call (abandoned ones are removed
    first) and removed when the process exits."""
    root = scratch_root()
    remove_abandoned(root)
    tag = _owner_tag(os.getpid())
    assert tag is not None  # this process runs
    folder = root / tag
    folder.mkdir(parents=True, exist_ok=True)
    atexit.register(shutil.rmtree, folder, True)
    return folder
