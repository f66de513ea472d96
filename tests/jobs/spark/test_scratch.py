"""Spark's scratch lives in a folder its process owns, never in the system temp directory:
removed at exit, and by the next start when the process was killed (jobs/spark/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conf.paths import PROJECT_ROOT
from jobs.spark.scratch import (
    LOCK_NAME,
    NEW_GRACE_S,
    SCRATCH_ENV,
    claim,
    remove_abandoned,
)
from tests.support.drills import kill_hard
from tests.support.polling import STUCK
from tests.support.processes import Running

SCRATCH_OF = "from jobs.spark.scratch import process_scratch_dir; print(process_scratch_dir())"


HOLD = """
import signal
import sys
from pathlib import Path
from jobs.spark.scratch import claim
print(claim(Path(sys.argv[1])), flush=True)
signal.pause()  # until killed
"""


def hold(root: Path) -> Running:
    """Another process that owns a scratch folder under ``root`` until it is killed."""
    return Running([sys.executable, "-c", HOLD, str(root)], cwd=PROJECT_ROOT)


def test_abandoned_folders_go_and_live_ones_stay(tmp_path: Path) -> None:
    """Ownership is the lock a running process holds, whatever the folder is called: not
    a pid and start time, which another process can misjudge (a stepped clock, another
    pid namespace) and then removed a live job's folder under its JVM."""
    mine = claim(tmp_path)
    other, killed = hold(tmp_path), hold(tmp_path)
    try:
        theirs = Path(other.wait_for_line(lambda line: bool(line), 60, "a folder held"))
        dead = Path(killed.wait_for_line(lambda line: bool(line), 60, "a folder held"))
        kill_hard(killed)
        # Named like a live process of another pid namespace: the name does not count.
        renamed = theirs.rename(tmp_path / f"{2**22 + 17}-1")
        unlocked = tmp_path / f"{os.getpid()}-abc"  # a lock file nobody holds
        (unlocked / "blockmgr-1").mkdir(parents=True)
        (unlocked / LOCK_NAME).touch()
        unfinished = tmp_path / "stray"  # no lock file at all
        (unfinished / "spark-1").mkdir(parents=True)
        being_made = tmp_path / ".123-new"  # its maker is about to take the lock
        being_made.mkdir()
        left_made = tmp_path / ".456-old"  # a start killed while making it, long ago
        left_made.mkdir()
        os.utime(left_made, (time.time() - 2 * NEW_GRACE_S,) * 2)

        removed = remove_abandoned(tmp_path)

        assert sorted(removed) == sorted([dead, unlocked, unfinished, left_made])
        assert sorted(tmp_path.iterdir()) == sorted([mine, renamed, being_made])
        kill_hard(other)
    finally:
        other.kill()
        killed.kill()
    assert remove_abandoned(tmp_path) == [renamed]  # its owner is gone now


def test_a_process_removes_its_folder_at_exit_and_the_abandoned_ones_at_start(
    tmp_path: Path,
) -> None:
    (tmp_path / "4194321-0badcafe" / "spark-1").mkdir(parents=True)  # a killed one's: no lock

    done = subprocess.run(
        [sys.executable, "-c", SCRATCH_OF], capture_output=True, text=True, check=True,
        env={**os.environ, SCRATCH_ENV: str(tmp_path)}, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert Path(done.stdout.strip()).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


# What the job does first (jobs/driver/startup.py builds its session this way), then a shuffle so
# that every scratch folder of Spark's is in use when the process is killed.
SPARK_AT_WORK = """
from pyspark.sql import functions as F
from jobs.spark.spark_session import build_spark_session
spark = build_spark_session("scratch-test")
spark.range(1000).repartition(3).groupBy(F.col("id") % 7).count().collect()
print("ready", flush=True)
import time
time.sleep(600)
"""


@pytest.mark.jvm
def test_a_killed_spark_process_leaves_scratch_only_in_its_folder_which_the_next_start_removes(
    tmp_path: Path,
) -> None:
    """A SIGKILL (Python and JVM) leaves Spark's folders in the process's own scratch
    folder and nothing where it ran; the next start of any SensorWatch process removes
    it. (That a killed job loses and duplicates nothing is the kill drill's,
    tests/jobs/test_drills.py.)"""
    scratch, work = tmp_path / "scratch", tmp_path / "work"
    work.mkdir()
    env = {SCRATCH_ENV: str(scratch)}
    spark = Running(
        [sys.executable, "-c", SPARK_AT_WORK], env={**env, "PYTHONPATH": str(PROJECT_ROOT)},
        cwd=work,
    )  # fmt: skip
    try:
        spark.wait_for_line(lambda line: line == "ready", STUCK, "a Spark session at work")
        (folder,) = scratch.iterdir()
        jvm = next(p for p in psutil.Process(spark.proc.pid).children(recursive=True)
                   if p.name() == "java")  # fmt: skip
        assert f"-Djava.io.tmpdir={folder}" in jvm.cmdline()
        kill_hard(spark)
    finally:
        spark.kill()
    # Spark's folders are there, in the killed process's own folder: nowhere near /tmp,
    # and nothing in its working directory (Spark 4's empty artifacts/spark-<uuid>).
    assert {p.name.split("-")[0] for p in folder.iterdir()} >= {"blockmgr", "spark"}
    assert list(work.iterdir()) == [], "the killed process left folders where it ran"

    subprocess.run(
        [sys.executable, "-c", SCRATCH_OF], capture_output=True, text=True, check=True,
        env={**os.environ, **env}, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert list(scratch.iterdir()) == [], "the killed process's folder, or the new one's, is left"
