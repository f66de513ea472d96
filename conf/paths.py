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
# Hadoop's S3 connector (550 MB), for a lake on object storage: `scripts/setup --s3`.
S3A_JARS_DIR = JARS_DIR / "spark-s3"
S3A_STAMP = S3A_JARS_DIR / "stamp.json"
# The driver JVM's class-data archive, made from those jars by local_stack/class_archive.py.
SPARK_CLASS_ARCHIVE = JARS_DIR / "spark-classes.jsa"

# The bridge's engine (bridge/engine/, Go), built by scripts/setup
# (local_stack/bridge_engine.py); images build it into their own place.
BRIDGE_ENGINE = Path(
    os.environ.get(
        "SENSORWATCH_BRIDGE_ENGINE", PROJECT_ROOT / ".venv" / "bin" / "sensorwatch-bridge"
    )
)
BRIDGE_ENGINE_SOURCE = PROJECT_ROOT / "bridge" / "engine"

# The alert rules every program reads unless told another file (--rules).
RULES_FILE = PROJECT_ROOT / "conf" / "rules.toml"

SPARK_LOG4J2 = PROJECT_ROOT / "conf" / "log4j2.properties"
KAFKA_LOG4J2 = PROJECT_ROOT / "conf" / "kafka-log4j2.properties"
SPARK_SCHEDULER_POOLS = PROJECT_ROOT / "conf" / "fairscheduler.xml"
