"""Resolve SensorWatch's JVM jars from Maven Central with ``mvn`` into the project cache.

Two independent sets (profiles of ``local_stack/jvm/pom.xml``), each a flat folder of jars:

- ``spark``: the Kafka source/sink and Delta Lake for the installed pyspark, minus every
  artifact pyspark already ships (Spark is built against its own copies);
- ``kafka``: the Apache Kafka broker (KRaft) with its dependencies and a log4j2 binding.

A stamp records what was resolved; a second run with the same inputs does nothing.
Run as ``python -m local_stack.jvm_jars`` (scripts/setup does).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyspark
from pydantic import BaseModel, Field

from conf import versions
from conf.cli import read_options
from conf.paths import CACHE_DIR, JARS_DIR, KAFKA_JARS_DIR, SPARK_JARS_DIR

JVM_DIR = Path(__file__).resolve().parent / "jvm"
POM = JVM_DIR / "pom.xml"
MAVEN_REPO = CACHE_DIR / "m2"
STAMP = JARS_DIR / "stamp.json"
PYSPARK_JARS = Path(pyspark.__file__).parent / "jars"


@dataclass(frozen=True)
class Artifact:
    """One resolved Maven artifact and its file in the local repository."""

    group: str
    name: str
    version: str
    path: Path


def _inputs() -> dict[str, str]:
    """Everything that decides which jars are resolved; a change re-resolves."""
    digest = hashlib.sha256()
    for f in [*sorted(JVM_DIR.iterdir()), Path(__file__)]:
        digest.update(f.read_bytes())
    return {
        "spark": versions.spark_version(),
        "delta": versions.delta_version(),
        "kafka": versions.kafka_version(),
        "recipe": digest.hexdigest(),
    }


# Maven's JVM runs for seconds: C2 never pays back what it compiles, nor G1 its threads.
# C1 and the serial collector halved a resolve's CPU and time (docs/benchmarks.md).
MAVEN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def maven_environment() -> dict[str, str]:
    """The environment Maven runs in: MAVEN_JVM unless the user set MAVEN_OPTS (a proxy,
    another collector: two collectors would stop the JVM), which is then left as it is."""
    return {**os.environ, "MAVEN_OPTS": os.environ.get("MAVEN_OPTS") or MAVEN_JVM}


def _mvn(*args: str) -> None:
    cmd = [
        "mvn", "-q", "-B", "-Dstyle.color=never",
        "--global-settings", str(JVM_DIR / "maven-settings.xml"),
        f"-Dmaven.repo.local={MAVEN_REPO}",
        *args,
    ]  # fmt: skip
    try:
        # Output only matters when it fails; on success Maven's chatter is noise.
        subprocess.run(cmd, check=True, capture_output=True, text=True, env=maven_environment())
    except FileNotFoundError:
        sys.exit("setup: 'mvn' not found; install Maven (Debian: apt-get install maven)")
    except subprocess.CalledProcessError as exc:
        sys.exit(
            f"{exc.stdout}{exc.stderr}\n"
            f"setup: Maven failed (exit {exc.returncode}) running: {' '.join(cmd)}"
        )


def resolve(profile: str, properties: dict[str, str]) -> list[Artifact]:
    """Resolve the runtime dependency closure of one profile of the POM with Maven."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "deps.txt"
        _mvn(
            "-f", str(POM),
            f"-P{profile}",
            *(f"-D{k}={v}" for k, v in properties.items()),
            "dependency:list",
            "-DincludeScope=runtime",
            "-DoutputAbsoluteArtifactFilename=true",
            f"-DoutputFile={listing}",
        )  # fmt: skip
        lines = listing.read_text(encoding="utf-8").splitlines()
    artifacts = []
    # group:name:type[:classifier]:version:scope:/absolute/path
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) >= 6 and parts[2] == "jar":
            group, name, version, path = parts[0], parts[1], parts[-3], parts[-1]
            artifacts.append(Artifact(group, name, version, Path(path)))
    if not artifacts:
        sys.exit(f"setup: Maven resolved nothing for profile {profile} of {POM}")
    return sorted(artifacts, key=lambda a: (a.group, a.name))


def shipped_by_pyspark(artifact: Artifact) -> bool:
    """True when pyspark's own jars folder has this artifact, in whatever version."""
    pattern = re.compile(re.escape(artifact.name) + r"-\d[^/]*\.jar")
    return any(pattern.fullmatch(p.name) for p in PYSPARK_JARS.glob("*.jar"))


def _install(artifacts: list[Artifact], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for a in artifacts:
        shutil.copy2(a.path, dest / a.path.name)


def _log4j_slf4j_binding(artifacts: list[Artifact]) -> str:
    """The log4j2 binding that matches the broker's own slf4j and log4j-core versions.

    Kafka's POM brings log4j-core but no slf4j binding; without one the broker would log
    nothing. Deriving the coordinate keeps Kafka's POM the source of these versions.
    """
    by_name = {a.name: a for a in artifacts}
    log4j = by_name["log4j-core"].version
    slf4j_major = by_name["slf4j-api"].version.split(".")[0]
    binding = "log4j-slf4j2-impl" if slf4j_major == "2" else "log4j-slf4j-impl"
    return f"org.apache.logging.log4j:{binding}:{log4j}"


def resolve_spark_jars() -> list[Path]:
    """Kafka connector and Delta for the installed pyspark, into SPARK_JARS_DIR."""
    artifacts = resolve(
        "spark",
        {
            "spark.version": versions.spark_version(),
            "delta.version": versions.delta_version(),
            "delta.artifact": versions.delta_artifact(),
        },
    )
    extra = [a for a in artifacts if not shipped_by_pyspark(a)]
    _install(extra, SPARK_JARS_DIR)
    return sorted(SPARK_JARS_DIR.glob("*.jar"))


def resolve_kafka_jars() -> list[Path]:
    """The Kafka broker and its dependencies, into KAFKA_JARS_DIR."""
    artifacts = resolve("kafka-broker", {"kafka.version": versions.kafka_version()})
    _install(artifacts, KAFKA_JARS_DIR)
    _mvn(
        "dependency:copy",
        f"-Dartifact={_log4j_slf4j_binding(artifacts)}",
        f"-DoutputDirectory={KAFKA_JARS_DIR}",
        "-f", str(POM),
    )  # fmt: skip
    return sorted(KAFKA_JARS_DIR.glob("*.jar"))


def is_current() -> bool:
    """True when the cached jars were resolved from exactly the current inputs."""
    try:
        return json.loads(STAMP.read_text(encoding="utf-8")) == _inputs()
    except (OSError, ValueError):
        return False


class JarsOptions(BaseModel):
    """The command line of ``python -m local_stack.jvm_jars`` (scripts/setup runs it)."""

    check: bool = Field(False, description="exit 1 if the jars are stale")


def main(argv: list[str] | None = None) -> int:
    """Resolve both jar sets unless the cache is current (or ``--check`` only reports)."""
    args = read_options(
        JarsOptions, argv, prog="python -m local_stack.jvm_jars",
        description=__doc__.splitlines()[0], say_as="jars",
    )  # fmt: skip
    if is_current():
        print(f"jars: up to date in {JARS_DIR}")
        return 0
    if args.check:
        print("jars: missing or stale")
        return 1
    STAMP.unlink(missing_ok=True)
    inputs = _inputs()
    print(
        f"jars: resolving Spark {inputs['spark']} Kafka connector, Delta {inputs['delta']}, "
        f"Kafka broker {inputs['kafka']} from Maven Central ..."
    )
    spark = resolve_spark_jars()
    kafka = resolve_kafka_jars()
    STAMP.write_text(json.dumps(inputs, indent=2) + "\n", encoding="utf-8")
    print(f"jars: {len(spark)} for Spark in {SPARK_JARS_DIR}")
    print(f"jars: {len(kafka)} for the broker in {KAFKA_JARS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
