"""Where SensorWatch keeps its files. The one place that knows the project layout on disk."""

from __future__ import annotations

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
# The driver JVM's class-data archive, made from those jars by local_stack/class_archive.py.
SPARK_CLASS_ARCHIVE = JARS_DIR / "spark-classes.jsa"

# The alert rules every program reads unless told another file (--rules).
RULES_FILE = PROJECT_ROOT / "conf" / "rules.toml"

SPARK_LOG4J2 = PROJECT_ROOT / "conf" / "log4j2.properties"
KAFKA_LOG4J2 = PROJECT_ROOT / "conf" / "kafka-log4j2.properties"
SPARK_SCHEDULER_POOLS = PROJECT_ROOT / "conf" / "fairscheduler.xml"


def spark_jars() -> list[Path]:
    """The jars Spark needs beyond pyspark's own (Kafka connector, Delta), sorted.

    Raises:
        FileNotFoundError: when scripts/setup has not resolved them yet.
    """
    jars = sorted(SPARK_JARS_DIR.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no Spark connector jars in {SPARK_JARS_DIR}: run scripts/setup first"
        )
    return jars
