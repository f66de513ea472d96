"""The set-up contract: one file per pinned version, an idempotent set-up, CI = README."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conf import jars, paths, versions
from conf.paths import PROJECT_ROOT, SPARK_JARS_DIR
from local_stack.jvm_jars import MAVEN_JVM, PYSPARK_JARS, maven_environment
from tests.support.tree import tracked_text_files

DIRECT_PINS = [
    "pyspark",
    "delta-spark",
    "pandas",
    "confluent-kafka",
    "faker",
    "psutil",
    "testcontainers",
]


def locked_version(package: str) -> str:
    lock = (PROJECT_ROOT / "requirements.lock").read_text()
    match = re.search(rf"^{re.escape(package)}==(\S+)", lock, re.MULTILINE)
    assert match, f"{package} is not pinned in requirements.lock"
    return match.group(1)


@pytest.mark.parametrize("package", [*DIRECT_PINS, "kafka broker"])
def test_each_pinned_version_is_written_in_exactly_one_file(package: str) -> None:
    version = versions.kafka_version() if package == "kafka broker" else locked_version(package)
    pattern = re.compile(rf"(?<![\w.]){re.escape(version)}(?![\w.])")

    holders = [
        name
        for name, text in tracked_text_files().items()
        # <modelVersion> is the POM file format Maven requires, not a pinned version.
        if pattern.search(re.sub(r"<modelVersion>[^<]*</modelVersion>", "", text))
    ]

    assert len(holders) == 1, f"{package} {version} is written in {holders}"


def test_installed_versions_are_the_locked_ones() -> None:
    assert versions.spark_version() == locked_version("pyspark")
    assert versions.delta_version() == locked_version("delta-spark")
    jars = {p.name for p in SPARK_JARS_DIR.glob("*.jar")}
    assert f"spark-sql-kafka-0-10_2.13-{versions.spark_version()}.jar" in jars
    assert f"{versions.delta_artifact()}-{versions.delta_version()}.jar" in jars
    # Nothing pyspark ships is added a second time (two versions of one class = trouble).
    assert not jars & {p.name for p in PYSPARK_JARS.glob("*.jar")}
    assert not any(name.startswith("scala-library") for name in jars)


def test_second_setup_run_does_no_work() -> None:
    result = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup")],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip

    assert "venv: up to date" in result.stdout
    assert "jars: up to date" in result.stdout


def test_setup_without_jars_installs_the_venv_only() -> None:
    """The image's venv stage (Dockerfile) runs the set-up before Maven is there: with
    --no-jars it neither resolves jars nor builds the class archive."""
    result = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup"), "--no-jars"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip

    assert "venv: up to date" in result.stdout
    assert "jars: skipped (--no-jars)" in result.stdout
    assert "class archive: skipped" in result.stdout
    assert "jars: up to date" not in result.stdout


def test_ci_runs_exactly_the_readme_commands() -> None:
    """CI runs the README's two commands, in order, after starting the engine lane (in the
    background, beside the set-up, which it waits for before the tests) where no engine
    with the official images answers (and only there)."""
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    readme = (PROJECT_ROOT / "README.md").read_text()
    commands = [line.strip() for line in ci.splitlines() if line.strip().startswith("scripts/")]

    assert commands == [
        "scripts/docker-lane packages", "scripts/docker-lane up &", "scripts/setup", "scripts/test",
    ]  # fmt: skip
    for command in commands[2:]:
        assert re.search(rf"^\s*{re.escape(command)}\s*$", readme, re.MULTILINE), command
    lane, setup, tests = (
        ci.index(c) for c in ("scripts/docker-lane up", "scripts/setup\n", "scripts/test\n")
    )
    assert "if official_images_answer; then" in ci[:lane] and "else" in ci[:lane]
    assert 'wait "$lane_pid"' in ci[setup:tests], "the tests start before the lane is up"
    assert "scripts/docker-lane" in readme


def test_the_s3_connector_is_found_only_as_set_up_resolved_it(tmp_path, monkeypatch) -> None:
    """The job never fetches jars: conf.jars finds the S3 connector that `scripts/setup
    --s3` resolved for pyspark's Hadoop, and otherwise names that command."""
    folder = tmp_path / "spark-s3"
    monkeypatch.setattr(paths, "S3A_JARS_DIR", folder)
    monkeypatch.setattr(paths, "S3A_STAMP", folder / "stamp.json")
    with pytest.raises(jars.JarsMissing, match=r"run scripts/setup --s3 first"):
        jars.s3a_jars()
    folder.mkdir()
    (folder / "hadoop-aws-0.jar").write_bytes(b"")
    (folder / "stamp.json").write_text(json.dumps({"hadoop": "0.0.1", "log4j": "0"}))
    with pytest.raises(jars.JarsMissing, match=r"or set up for another Hadoop"):
        jars.s3a_jars()  # resolved for another pyspark: stale
    (folder / "stamp.json").write_text(json.dumps(jars.s3a_wanted()))
    assert jars.s3a_jars() == [folder / "hadoop-aws-0.jar"]


def test_a_job_on_a_bucket_without_the_s3_set_up_says_so_before_anything(tmp_path) -> None:
    """Exit status 2 and one line, in a second: no JVM, no broker, no bucket contacted."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark").symlink_to(SPARK_JARS_DIR)  # the connectors set-up resolved, no S3A
    env = {**os.environ, "SENSORWATCH_JARS_DIR": str(jars)}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", "127.0.0.1:9",
         "--lake", "s3a://nowhere/lake", "--trigger", "availableNow"],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip

    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"jobs.stream: a lake on object storage needs Hadoop's S3 connector, not set up in "
        f"{jars / 'spark-s3'} (or set up for another Hadoop): run scripts/setup --s3 first "
        "(about 550 MB from Maven Central, once)"
    ]
    assert not (jars / "spark-s3").exists()


def test_maven_runs_with_c1_unless_the_user_set_its_options(monkeypatch) -> None:
    """Set-up's Maven runs (and the engine lane's, in its images) compile with C1 and
    collect with the serial collector; a user's MAVEN_OPTS replaces that whole."""
    monkeypatch.delenv("MAVEN_OPTS", raising=False)
    assert (
        maven_environment()["MAVEN_OPTS"]
        == MAVEN_JVM
        == ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    )
    monkeypatch.setenv("MAVEN_OPTS", "-XX:+UseG1GC -Dhttps.proxyHost=proxy.example")
    assert maven_environment()["MAVEN_OPTS"] == "-XX:+UseG1GC -Dhttps.proxyHost=proxy.example"
    for image in ("kafka", "s3proxy"):
        dockerfile = PROJECT_ROOT / "local_stack" / "lane" / image / "Dockerfile"
        runs = [line for line in dockerfile.read_text().splitlines() if " mvn " in line]
        assert runs and all(f'MAVEN_OPTS="{MAVEN_JVM}" mvn' in line for line in runs), image
