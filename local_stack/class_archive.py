"""Build the class-data archive of Spark's driver JVM (CDS: a HotSpot feature), so that
every job, benchmark and test session starts with Spark's, Delta's and the connectors'
classes already parsed and verified instead of loading thousands of them from jars.

Measured on 2 cores (docs/benchmarks.md): a cold session that writes and reads a Delta
table took 18.4 CPU seconds and 10.6 s without it, 13.4 and 7.8 s with it.

The archive is made by a short training run (a Delta write and read, a streaming query
over a Delta table, each of them loading the classes the job loads), dumped by the JVM
at its exit (``-XX:ArchiveClassesAtExit``) to a temporary file, checked by starting a JVM
on it, and only then moved into place (jobs/spark/spark_session.py uses it when it is there).
A half-written or corrupt archive would stop every JVM that maps it; a stale one (other
jars, another JDK) is ignored by the JVM without a word. A stamp records what it was made
from; a second run with the same inputs does nothing.

Run as ``python -m local_stack.class_archive`` (scripts/setup does).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark
from pydantic import BaseModel, Field

from conf.cli import read_options
from conf.jars import spark_jars
from conf.paths import PROJECT_ROOT, SPARK_CLASS_ARCHIVE
from jobs.spark.scratch import SCRATCH_ENV
from local_stack.jvm_jars import PYSPARK_JARS

STAMP = SPARK_CLASS_ARCHIVE.with_suffix(".json")

# What the training run does, in a process of its own (the JVM dumps the archive at exit).
TRAINING = """
import sys, tempfile
from pyspark.sql import functions as F
from pathlib import Path
from jobs.spark import spark_session
from jobs.spark.spark_session import build_spark_session
# A JVM that maps an archive cannot dump one: this run starts without any.
spark_session.SPARK_CLASS_ARCHIVE = Path(sys.argv[2]) / "none"
spark = build_spark_session("class-archive", extra={
    "spark.driver.extraJavaOptions": "-XX:ArchiveClassesAtExit=" + sys.argv[1]})
folder = tempfile.mkdtemp(dir=sys.argv[2])
rows = spark.range(5000).select(F.col("id"), (F.col("id") % 7).alias("k"),
                                F.current_timestamp().alias("at"))
rows.write.format("delta").save(folder + "/t")
spark.read.format("delta").load(folder + "/t").groupBy("k").count().collect()
query = (spark.readStream.format("delta").load(folder + "/t")
         .withWatermark("at", "1 minute").groupBy(F.window("at", "1 minute"), "k").count()
         .writeStream.outputMode("append")
         .foreachBatch(lambda batch, _: batch.write.format("delta").mode("append")
                       .save(folder + "/out"))
         .option("checkpointLocation", folder + "/checkpoint")
         .trigger(availableNow=True).start())
query.awaitTermination()
spark.stop()
"""


def java() -> str:
    """The java the driver starts with (JAVA_HOME's, else PATH's)."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def _inputs() -> dict[str, str]:
    """Everything the archive depends on; a change builds it again."""
    version = subprocess.run(
        [java(), "-version"], capture_output=True, text=True, timeout=60
    ).stderr.strip()
    recipe = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    # Where the jars are, not only which: the JVM maps the archive only for the class path
    # it was made with, and ignores it without a word for another, such as the same clone
    # moved or renamed (a cold job run then cost about half as much CPU again).
    return {
        "java": version,
        "pyspark": pyspark.__version__,
        "class_path": ",".join(str(p) for p in [PYSPARK_JARS, *spark_jars()]),
        "recipe": recipe,
    }


def usable(archive: Path) -> bool:
    """Whether a JVM starts on ``archive`` (a corrupt one makes it crash). It runs in a
    folder of its own: a crashing JVM writes its hs_err_pid*.log where it runs."""
    with tempfile.TemporaryDirectory(prefix="class-archive-check-") as where:
        done = subprocess.run(
            [java(), f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off",
             "-Xlog:cds+dynamic=off", "-version"],
            capture_output=True, text=True, timeout=120, cwd=where,
        )  # fmt: skip
    return done.returncode == 0


# The work folders of a build (training run, dump) beside the archive, and the lock that
# one build at a time holds while it makes, checks or clears them.
WORK_PREFIX = ".class-archive-"
LOCK_NAME = ".class-archive.lock"


@contextmanager
def building(folder: Path) -> Iterator[None]:
    """Hold the archive folder's build lock, and clear what a killed build left there.

    A build killed mid-way (its set-up interrupted) cannot remove its work folder, which
    holds a training lake and a half-dumped archive (hundreds of MB). With the lock held
    no other build is running, so any work folder found is such a leftover.
    """
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        for left in folder.glob(WORK_PREFIX + "*"):
            shutil.rmtree(left, ignore_errors=True)
        yield


def build(target: Path = SPARK_CLASS_ARCHIVE) -> None:
    """Train, dump, check and move the archive into ``target``.

    Raises:
        RuntimeError: the training run failed or its archive does not start a JVM.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=WORK_PREFIX, dir=target.parent) as work:
        dumped = Path(work) / target.name
        done = subprocess.run(
            [sys.executable, "-c", TRAINING, str(dumped), work],
            capture_output=True, text=True, timeout=900, cwd=PROJECT_ROOT,
            env={**os.environ, SCRATCH_ENV: work},  # its scratch goes with the rest
        )  # fmt: skip
        if done.returncode != 0 or not dumped.is_file():
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"the training run failed (exit {done.returncode}):\n{tail}")
        if not usable(dumped):
            raise RuntimeError(f"the archive {dumped} does not start a JVM")
        dumped.replace(target)


class ArchiveOptions(BaseModel):
    """The command line of ``python -m local_stack.class_archive``."""

    check: bool = Field(False, description="exit 1 if the archive is stale")
    quiet: bool = Field(False, description="say nothing when it is current")


def main(argv: list[str] | None = None) -> int:
    """Build the archive unless it is current (``--check``: only say whether it is); clear
    what a killed build left either way."""
    args = read_options(
        ArchiveOptions, argv, prog="python -m local_stack.class_archive",
        description="Spark's class-data archive for the job's driver, built by set-up.",
        say_as="class archive",
    )  # fmt: skip
    wanted = _inputs()

    def current() -> bool:
        return (
            SPARK_CLASS_ARCHIVE.is_file()
            and STAMP.is_file()
            and json.loads(STAMP.read_text(encoding="utf-8")) == wanted
        )

    if args.check:
        return 0 if current() else 1
    with building(SPARK_CLASS_ARCHIVE.parent):
        if current():  # perhaps made by another set-up while this one waited
            if not args.quiet:
                print("setup: class archive: up to date")
            return 0
        print("setup: class archive: building Spark's class-data archive (a short Spark run) ...")
        try:
            build()
        except RuntimeError as exc:
            # Jobs run without it, only slower to start: say so and go on.
            print(f"setup: class archive: not built, jobs start without it: {exc}", file=sys.stderr)
            STAMP.unlink(missing_ok=True)
            return 0
        STAMP.write_text(json.dumps(wanted, indent=1) + "\n", encoding="utf-8")
    size = SPARK_CLASS_ARCHIVE.stat().st_size / 2**20
    print(f"setup: class archive: {SPARK_CLASS_ARCHIVE} ({size:,.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
