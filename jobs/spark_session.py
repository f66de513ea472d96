"""The one place that builds SparkSessions for SensorWatch (job, tests, tools)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from conf.paths import SPARK_LOG4J2, SPARK_SCHEDULER_POOLS, VAR_DIR, spark_jars

LOOPBACK = "127.0.0.1"


def spark_conf(
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
    ui: bool = False,
    warehouse_dir: Path = VAR_DIR / "spark-warehouse",
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The Spark configuration SensorWatch runs with, as plain key/value pairs."""
    log4j = f"-Dlog4j2.configurationFile=file:{SPARK_LOG4J2}"
    conf = {
        "spark.master": master,
        # The Kafka connector and Delta, resolved by scripts/setup; no download at start.
        "spark.jars": ",".join(str(p) for p in spark_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Streaming micro-batches are small: the default 200 shuffle partitions would mean
        # 200 tasks and 200 state-store instances per stateful operator per batch. The
        # number is fixed in a query's checkpoint at its first run.
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # Delta rebuilds table snapshots with this many tasks (default 50): tiny tables here.
        "spark.databricks.delta.snapshotPartitions": str(shuffle_partitions),
        # The windows query's state (event ids within the watermark, open one-minute panes)
        # is small and short-lived: Spark's in-memory store deduplicates a million readings
        # in 2.5 s where RocksDB took 6.9 s (docs/benchmarks.md). A checkpoint keeps the
        # store it was created with, so lakes started with RocksDB go on with it.
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Event times are UTC in the data; keep Spark's rendering of them UTC as well.
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(warehouse_dir),
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        # Streaming queries run their jobs concurrently; FAIR pools (jobs/stream.py puts
        # ingest and the readers in separate pools) keep a long statistics batch from
        # queueing ingest, and with it the overheat alerts, behind it.
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(SPARK_SCHEDULER_POOLS),
        "spark.ui.enabled": str(ui).lower(),
        "spark.ui.showConsoleProgress": "false",
    }
    if master.startswith("local"):
        # Nothing outside this machine needs to reach a local driver.
        conf["spark.driver.host"] = LOOPBACK
        conf["spark.driver.bindAddress"] = LOOPBACK
    conf.update(extra or {})
    return conf


def build_spark_session(app_name: str = "sensorwatch", **options: object) -> SparkSession:
    """Build (or return the running) SparkSession configured by :func:`spark_conf`.

    Keyword options are those of :func:`spark_conf` (master, shuffle_partitions, ...).
    """
    conf = spark_conf(**options)  # type: ignore[arg-type]
    if conf["spark.master"].startswith("local"):
        # Silences Spark's "hostname resolves to a loopback address" warning.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Python workers (pandas UDFs, applyInPandasWithState) must run in this interpreter,
    # the project's venv, not whatever "python3" is on PATH. PySpark reads this variable
    # and ships the path with each task, so a standalone cluster's executors need the same
    # venv at the same path: the compose cluster shares one image, tests one machine.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
