"""Spark's scratch lives in a folder its process owns, never in the system temp directory:
removed at exit, and by the next start when the process was killed (jobs/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from conf.paths import PROJECT_ROOT
from jobs.scratch import SCRATCH_ENV, process_scratch_dir, remove_abandoned
from tests.drills import kill_hard
from tests.processes import Running

SCRATCH_OF = "from jobs.scratch import process_scratch_dir; print(process_scratch_dir())"


def test_abandoned_folders_go_and_live_ones_stay(tmp_path: Path) -> None:
    mine = process_scratch_dir().name  # <pid>-<start time> of this process
    dead = tmp_path / f"{2**22 + 17}-12345"  # above Linux's pid_max: never runs
    reused = tmp_path / f"{os.getpid()}-1"  # this pid, but another process's start time
    stray = tmp_path / "not-a-tag"
    for folder in (tmp_path / mine, dead, reused, stray):
        (folder / "blockmgr-1").mkdir(parents=True)

    removed = remove_abandoned(tmp_path)

    assert sorted(removed) == sorted([dead, reused, stray])
    assert [p.name for p in tmp_path.iterdir()] == [mine]


def test_a_process_removes_its_folder_at_exit_and_the_abandoned_ones_at_start(
    tmp_path: Path,
) -> None:
    (tmp_path / f"{2**22 + 17}-12345" / "spark-1").mkdir(parents=True)  # a killed one's

    done = subprocess.run(
        [sys.executable, "-c", SCRATCH_OF], capture_output=True, text=True, check=True,
        env={**os.environ, SCRATCH_ENV: str(tmp_path)}, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert Path(done.stdout.strip()).parent == tmp_path
    assert list(tmp_path.iterdir()) == []


# What the job does first (jobs/stream.py builds its session this way), then a shuffle so
# that every scratch folder of Spark's is in use when the process is killed.
SPARK_AT_WORK = """
from pyspark.sql import functions as F
from jobs.spark_session import build_spark_session
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
    tests/test_drills.py.)"""
    scratch, work = tmp_path / "scratch", tmp_path / "work"
    work.mkdir()
    env = {SCRATCH_ENV: str(scratch)}
    spark = Running(
        [sys.executable, "-c", SPARK_AT_WORK], env={**env, "PYTHONPATH": str(PROJECT_ROOT)},
        cwd=work,
    )  # fmt: skip
    try:
        spark.wait_for_line(lambda line: line == "ready", 300, "a Spark session at work")
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
