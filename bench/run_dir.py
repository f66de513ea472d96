"""The folder one ``scripts/bench`` run writes in besides its figures (``TMPDIR``: the
broker's folder, the lakes, the bucket; Spark's scratch).

Each run claims a folder of its own under one root (``var/bench-run``), held by a lock
for as long as the run's process lives (jobs/spark/scratch.py, as Spark's scratch folders are),
removed when it exits, and removed by a later start when it was killed. One root shared
by every run, as it was, let a second run, or only ``scripts/bench --help``, remove a
running soak's lake under its job (2026-12-07: the job died mid-batch).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from jobs.spark.scratch import SCRATCH_ENV, claim, remove_abandoned

RUNS_ENV = "SENSORWATCH_BENCH_RUNS"  # the root, set by scripts/bench


def claim_run_dir() -> Path | None:
    """Under the root ``SENSORWATCH_BENCH_RUNS`` names: remove the folders of runs that no
    longer run, claim one for this run (removed at its exit), and point ``TMPDIR`` and
    Spark's scratch (``SENSORWATCH_SCRATCH_DIR``) into it, for this process and the ones
    it starts. Returns the folder; None when no root is named (not run by scripts/bench)."""
    named = os.environ.get(RUNS_ENV)
    if not named:
        return None
    root = Path(named)
    root.mkdir(parents=True, exist_ok=True)
    remove_abandoned(root)
    folder = claim(root)
    atexit.register(shutil.rmtree, folder, True)
    (folder / "tmp").mkdir()
    os.environ["TMPDIR"] = str(folder / "tmp")
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    os.environ[SCRATCH_ENV] = str(folder / "scratch")
    return folder
