"""The Spark driver's class-data archive (local_stack/class_archive.py): built by a training
run, checked before it is moved into place, used by every session when it is there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from conf.jars import spark_jars
from conf.paths import PROJECT_ROOT, SPARK_CLASS_ARCHIVE
from jobs.spark import spark_session
from local_stack import class_archive
from tests.support.polling import wait_until


def test_a_session_maps_the_archive_only_when_there_is_one(tmp_path, monkeypatch) -> None:
    archive = tmp_path / "spark-classes.jsa"
    monkeypatch.setattr(spark_session, "SPARK_CLASS_ARCHIVE", archive)
    scratch = tmp_path / "scratch"

    without = spark_session.spark_conf(scratch=scratch)["spark.driver.extraJavaOptions"]
    archive.write_bytes(b"x")
    using = spark_session.spark_conf(scratch=scratch)["spark.driver.extraJavaOptions"]

    assert "SharedArchiveFile" not in without
    # Silently: a stale archive is ignored, never announced on the console.
    assert f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off" in using
    assert f"-Djava.io.tmpdir={scratch}" in using


@pytest.mark.jvm  # `java -version`, a part of what the archive was made for
def test_a_moved_project_builds_the_archive_again(tmp_path, monkeypatch) -> None:
    """The JVM maps an archive only on the class path it was made with: the same jars in
    another folder (the clone moved or renamed) make the stamp stale, so set-up builds
    it again instead of leaving every job to start without it."""
    jars = spark_jars()
    here = class_archive._inputs()
    moved = [tmp_path / "moved" / jar.name for jar in jars]
    monkeypatch.setattr(class_archive, "spark_jars", lambda: moved)
    elsewhere = class_archive._inputs()
    monkeypatch.setattr(class_archive, "PYSPARK_JARS", tmp_path / "venv" / "jars")
    monkeypatch.setattr(class_archive, "spark_jars", lambda: jars)
    other_venv = class_archive._inputs()

    assert all(str(jar) in here["class_path"] for jar in jars)
    assert elsewhere != here and other_venv != here
    assert {k: v for k, v in elsewhere.items() if k != "class_path"} == {
        k: v for k, v in here.items() if k != "class_path"
    }


@pytest.mark.jvm  # JVMs started on the archive
def test_the_set_up_s_archive_starts_a_jvm_and_a_broken_one_is_refused(tmp_path: Path) -> None:
    """The archive scripts/setup built (class_archive.build: trained, dumped, checked,
    moved into place) is current and starts a JVM. Building another here would prove the
    same for a minute of both cores: a broken build leaves set-up without a current one."""
    if os.environ.get("SENSORWATCH_NO_CLASS_ARCHIVE") == "1":
        pytest.skip("set up without the class archive (SENSORWATCH_NO_CLASS_ARCHIVE=1)")
    archive = SPARK_CLASS_ARCHIVE

    assert class_archive.main(["--check"]) == 0, f"scripts/setup left no current {archive}"
    assert archive.stat().st_size > 50 * 2**20  # Spark's, Delta's and Scala's classes
    assert class_archive.usable(archive)
    assert not list(archive.parent.glob(".class-archive-*"))  # nothing half-made left
    broken = tmp_path / "broken.jsa"
    broken.write_bytes(archive.read_bytes()[: 2**20])  # as a killed dump would leave it
    assert not class_archive.usable(broken)
    # Its crash report went with the check's own folder, not into the project.
    assert not list(PROJECT_ROOT.glob("hs_err_pid*.log"))


def test_what_a_killed_build_left_is_cleared_and_a_running_build_waited_for(tmp_path) -> None:
    """A build killed mid-way leaves its work folder (a training lake, a half-dumped
    archive); the next set-up clears it, but only once no other build holds the lock."""
    left = tmp_path / f"{class_archive.WORK_PREFIX}killed"
    (left / "lake").mkdir(parents=True)
    (left / "spark-classes.jsa").write_bytes(b"half")
    other = tmp_path / "spark-classes.jsa"
    other.write_bytes(b"the archive itself stays")
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys; from pathlib import Path; from local_stack import class_archive\n"
            "with class_archive.building(Path(sys.argv[1])):\n"
            "    print('held', flush=True); sys.stdin.readline()"), str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        (tmp_path / f"{class_archive.WORK_PREFIX}running").mkdir()  # the holder's own
        waiting = subprocess.Popen(
            [sys.executable, "-c", (
                "import sys; from pathlib import Path; from local_stack import class_archive\n"
                "with class_archive.building(Path(sys.argv[1])): print('cleared')"),
             str(tmp_path)],
            stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
        )  # fmt: skip
        # The kernel lists a process blocked on a lock as "->" before the lock's holder,
        # by the lock file's inode: once the second build waits there, it has cleared
        # nothing yet.
        inode = (tmp_path / class_archive.LOCK_NAME).stat().st_ino
        wait_until(
            lambda: any(
                "->" in line and f":{inode} " in line
                for line in Path("/proc/locks").read_text().splitlines()
            ),
            60, "the second build to wait for the lock",
        )  # fmt: skip
        assert waiting.poll() is None
        assert (tmp_path / f"{class_archive.WORK_PREFIX}running").is_dir()
    finally:
        holder.communicate("done\n", timeout=30)
    assert waiting.communicate(timeout=30)[0].strip() == "cleared"
    assert not list(tmp_path.glob(f"{class_archive.WORK_PREFIX}*"))
    assert other.read_bytes() == b"the archive itself stays"


def driver_class_path(lake: str, scratch: Path) -> list[str]:
    """The class path Spark's launcher gives the driver JVM of a session for ``lake``, as
    :func:`jobs.spark.spark_session.build_spark_session` launches it (its properties and its
    environment), asked of the launcher itself: its small JVM prints the driver's command
    and starts nothing."""
    home = Path(pyspark.__file__).parent
    conf = spark_session.spark_conf(lake=lake, scratch=scratch)
    env = {
        **os.environ, "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": "2.13",
        **spark_session.launch_class_path(lake, conf["spark.master"]),
    }  # fmt: skip
    args = [class_archive.java(), "-cp", str(home / "jars" / "*"),
            "org.apache.spark.launcher.Main", "org.apache.spark.deploy.SparkSubmit"]  # fmt: skip
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    done = subprocess.run([*args, "pyspark-shell"], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    command = done.stdout.split(b"\0")
    return command[command.index(b"-cp") + 1].decode().split(os.pathsep)


def maps_the_archive(class_path: list[str], tmp_path: Path) -> bool:
    """Whether a JVM with ``class_path`` maps the set-up's archive: with -Xshare:on a JVM
    that cannot map it refuses to start (without, it would ignore the archive silently)."""
    done = subprocess.run(
        [class_archive.java(), "-Xshare:on", f"-XX:SharedArchiveFile={SPARK_CLASS_ARCHIVE}",
         "-cp", os.pathsep.join(class_path), "-version"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    return done.returncode == 0


@pytest.mark.jvm  # JVMs started on the archive
@pytest.mark.slow  # the S3 connector's jars: scripts/setup --s3, which --quick does not run
def test_a_driver_for_a_lake_in_a_bucket_maps_the_archive(tmp_path: Path) -> None:
    """The S3 connector's jars come after Spark's own, so the class path begins as the
    archive's did (spark_session.launch_class_path): in front of them, the JVM ignored the
    archive, and every job on S3 loaded all its classes from jars (about 10 CPU seconds
    more a start)."""
    if os.environ.get("SENSORWATCH_NO_CLASS_ARCHIVE") == "1":
        pytest.skip("set up without the class archive (SENSORWATCH_NO_CLASS_ARCHIVE=1)")
    on_s3 = driver_class_path("s3a://lakes/lake", tmp_path / "scratch")
    on_disk = driver_class_path(str(tmp_path / "lake"), tmp_path / "scratch")
    s3a = [str(jar) for jar in spark_session.object_store_jars("s3a://lakes/lake")]

    assert s3a and on_s3 == on_disk + s3a
    assert maps_the_archive(on_s3, tmp_path)
    # The probe tells: the same jars in front of Spark's, as they were, are refused.
    assert not maps_the_archive(s3a + on_disk, tmp_path)
