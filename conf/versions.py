"""The pinned versions, read from the one file that holds each.

- Python packages: ``requirements.lock``. The Spark Kafka connector and Delta jars take
  the versions of the installed ``pyspark`` and ``delta-spark`` packages, so the JVM and
  Python sides cannot drift apart.
- The Kafka broker: ``KAFKA_VERSION`` in ``.env`` (docker-compose.yml reads the same
  line for the ``apache/kafka`` image tag).
- S3Proxy, the S3-compatible server of ``scripts/s3-local``: ``S3PROXY_VERSION`` in ``.env``
  (docker-compose.yml's ``s3`` profile reads it for the image tag).
"""

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path

from conf.paths import PROJECT_ROOT

DOTENV = PROJECT_ROOT / ".env"


def spark_version() -> str:
    """The installed pyspark version, which the Kafka connector jar must match."""
    return version("pyspark")


def _pyspark_jar_version(name: str) -> str:
    """The version of the jar ``name`` that pyspark ships."""
    import pyspark  # here: conf is imported by programs that never start Spark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob(f"{name}-[0-9]*.jar")):
        return jar.name.removeprefix(f"{name}-").removesuffix(".jar")
    raise FileNotFoundError(f"no {name} jar in {jars}")


def hadoop_version() -> str:
    """The Hadoop version pyspark is built with (its hadoop-client-api jar), which the S3A
    connector (hadoop-aws) must match."""
    return _pyspark_jar_version("hadoop-client-api")


def log4j_version() -> str:
    """The log4j 2 version pyspark ships (its log4j-core jar), which a log4j binding
    added beside it must match."""
    return _pyspark_jar_version("log4j-core")


def delta_version() -> str:
    """The installed delta-spark version, which the Delta jar must match."""
    return version("delta-spark")


def delta_artifact() -> str:
    """Delta's Maven artifact for the installed Spark line: since Delta 4.1 one per Spark
    minor version (``delta-spark_4.2_2.13``), as delta-spark's own pip helper names it."""
    major_minor = ".".join(spark_version().split(".")[:2])
    return f"delta-spark_{major_minor}_2.13"


def dotenv_value(name: str) -> str:
    """The value of ``name`` in .env (a pin that compose reads too)."""
    for line in DOTENV.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    raise KeyError(f"{name} is not set in {DOTENV}")


def kafka_version() -> str:
    """The Apache Kafka broker version pinned as KAFKA_VERSION in .env."""
    return dotenv_value("KAFKA_VERSION")


def s3proxy_version() -> str:
    """The S3Proxy version pinned as S3PROXY_VERSION in .env."""
    return dotenv_value("S3PROXY_VERSION")


def official_kafka_image() -> str:
    """The official broker image, compose's default: apache/kafka:<KAFKA_VERSION>."""
    return f"apache/kafka:{kafka_version()}"


def kafka_image() -> str:
    """The broker image Testcontainers runs: ``KAFKA_IMAGE`` when set (a registry mirror's
    copy, or the engine lane's stand-in), as docker-compose.yml reads it, else the official one."""
    return os.environ.get("KAFKA_IMAGE") or official_kafka_image()
