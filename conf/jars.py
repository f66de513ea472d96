"""The jars set-up resolved for Spark (scripts/setup), found where conf/paths.py says:
a program never fetches them itself, it names the set-up command that does."""

from __future__ import annotations

import json
from pathlib import Path

from conf import paths, versions


class JarsMissing(FileNotFoundError):
    """Jars a program needs have not been set up; the message says which command does it."""


def spark_jars() -> list[Path]:
    """The jars Spark needs beyond pyspark's own (Kafka connector, Delta), sorted.

    Raises:
        JarsMissing: when scripts/setup has not resolved them yet.
    """
    jars = sorted(paths.SPARK_JARS_DIR.glob("*.jar"))
    if not jars:
        raise JarsMissing(
            f"no Spark connector jars in {paths.SPARK_JARS_DIR}: run scripts/setup first"
        )
    return jars


def s3a_wanted() -> dict[str, str]:
    """What the S3A jars must be resolved for: pyspark's Hadoop and log4j versions."""
    return {"hadoop": versions.hadoop_version(), "log4j": versions.log4j_version()}


def s3a_jars() -> list[Path]:
    """Hadoop's S3 connector for pyspark's Hadoop, as set-up resolved it, sorted. A
    program never fetches them itself (550 MB): set-up does, once.

    Raises:
        JarsMissing: when they are missing or were resolved for another Hadoop.
    """
    try:
        current = json.loads(paths.S3A_STAMP.read_text(encoding="utf-8")) == s3a_wanted()
    except (OSError, ValueError):
        current = False
    jars = sorted(paths.S3A_JARS_DIR.glob("*.jar"))
    if not current or not jars:
        raise JarsMissing(
            f"a lake on object storage needs Hadoop's S3 connector, not set up in "
            f"{paths.S3A_JARS_DIR} (or set up for another Hadoop): run scripts/setup --s3 first "
            "(about 550 MB from Maven Central, once)"
        )
    return jars
