"""Spark's scratch lives in a folder its process owns, never in the system temp directory:
removed at exit, and by the next start when the process was killed (jobs/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from conf.paths import PROJECT_ROOT
from jobs.scratch import SCRATCH_ENV, process_scratch_dir, remove_abandoned
from lake.reader import LakeReader
from tests.drills import kill_hard
from tests.processes import Running
from tests.producer_run import read_jsonl, run_producer

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


def test_a_killed_job_leaves_scratch_only_in_its_folder_which_the_next_start_removes(
    kafka, new_topic, tmp_path: Path
) -> None:
    topic, lake, scratch = new_topic("scratch"), tmp_path / "lake", tmp_path / "scratch"
    sent = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 600, "--seed", 5,
        "--start-time", "2026-01-01T00:00:00Z", "--manifest", tmp_path / "manifest.jsonl",
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    job_args = [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
                "--topic", topic, "--lake", str(lake)]  # fmt: skip
    env = {SCRATCH_ENV: str(scratch)}
    job = Running([*job_args, "--trigger", "1 second"], env=env, cwd=PROJECT_ROOT)
    try:
        job.wait_for_line(lambda line: line.startswith("jobs.stream: ingest #0"), 300,
                          "the job's first ingest batch")  # fmt: skip
        (folder,) = scratch.iterdir()
        jvm = next(p for p in psutil.Process(job.proc.pid).children(recursive=True)
                   if p.name() == "java")  # fmt: skip
        assert f"-Djava.io.tmpdir={folder}" in jvm.cmdline()
        kill_hard(job)
    finally:
        job.kill()
    # Spark's folders are there, in the killed job's own folder: nowhere near /tmp.
    assert {p.name.split("-")[0] for p in folder.iterdir()} >= {"blockmgr", "spark"}

    again = subprocess.run(
        [*job_args, "--trigger", "availableNow"], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env}, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert again.returncode == 0, again.stderr[-3000:]
    assert list(scratch.iterdir()) == [], "the killed job's folder, or the new one's, is left"
    landed = []  # exactly once across the kill: every offset once, none missing
    for table in ("readings", "quarantine"):
        rows = LakeReader(lake).read(table, ["kafka_partition", "kafka_offset"])
        assert rows is not None, table
        landed += [(r["kafka_partition"], r["kafka_offset"]) for r in rows.to_pylist()]
    sent_offsets = [(m["partition"], m["offset"]) for m in read_jsonl(tmp_path / "manifest.jsonl")]
    assert sorted(landed) == sorted(sent_offsets)
