"""Where SensorWatch keeps its files. The one place that knows the project layout on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Downloads made by scripts/setup (Maven repository, resolved jars); ignored by git.
CACHE_DIR = PROJECT_ROOT / ".cache"
# Runtime data of local runs (the local broker, the demo lake); ignored by git.
VAR_DIR = PROJECT_ROOT / "var"

# Container images resolve the jars at build time into their own folder.
JARS_DIR = Path(os.environ.get("SENSORWATCH_JARS_DIR", CACHE_DIR / "jars"))
SPARK_JARS_DIR = JARS_DIR / "spark"
KAFKA_JARS_DIR = JARS_DIR / "kafka"
# Hadoop's S3 connector (550 MB), for a lake on object storage: `scripts/setup --s3`.
S3A_JARS_DIR = JARS_DIR / "spark-s3"
S3A_STAMP = S3A_JARS_DIR / "stamp.json"
# The driver JVM's class-data archive, made from those jars by local_stack/class_archive.py.
SPARK_CLASS_ARCHIVE = JARS_DIR / "spark-classes.jsa"

# The alert rules every program reads unless told another file (--rules).
RULES_FILE = PROJECT_ROOT / "conf" / "rules.toml"

SPARK_LOG4J2 = PROJECT_ROOT / "conf" / "log4j2.properties"
KAFKA_LOG4J2 = PROJECT_ROOT / "conf" / "kafka-log4j2.properties"
SPARK_SCHEDULER_POOLS = PROJECT_ROOT / "conf" / "fairscheduler.xml"


class JarsMissing(FileNotFoundError):
    """Jars a program needs have not been set up; the message says which command does it."""


def spark_jars() -> list[Path]:
    """The jars Spark needs beyond pyspark's own (Kafka connector, Delta), sorted.

    Raises:
        JarsMissing: when scripts/setup has not resolved them yet.
    """
    jars = sorted(SPARK_JARS_DIR.glob("*.jar"))
    if not jars:
        raise JarsMissing(f"no Spark connector jars in {SPARK_JARS_DIR}: run scripts/setup first")
    return jars


def s3a_wanted() -> dict[str, str]:
    """What the S3A jars must be resolved for: pyspark's Hadoop and log4j versions."""
    from conf import versions  # conf.versions reads the layout from this module

    return {"hadoop": versions.hadoop_version(), "log4j": versions.log4j_version()}


def s3a_jars() -> list[Path]:
    """Hadoop's S3 connector for pyspark's Hadoop, as set-up resolved it, sorted. A
    program never fetches them itself (550 MB): set-up does, once.

    Raises:
        JarsMissing: when they are missing or were resolved for another Hadoop.
    """
    try:
        current = json.loads(S3A_STAMP.read_text(encoding="utf-8")) == s3a_wanted()
    except (OSError, ValueError):
        current = False
    jars = sorted(S3A_JARS_DIR.glob("*.jar"))
    if not current or not jars:
        raise JarsMissing(
            f"a lake on object storage needs Hadoop's S3 connector, not set up in "
            f"{S3A_JARS_DIR} (or set up for another Hadoop): run scripts/setup --s3 first "
            "(about 550 MB from Maven Central, once)"
        )
    return jars
