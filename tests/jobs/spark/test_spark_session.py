"""The session builder gives a local, loopback-bound Spark with Delta and the Kafka source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
from delta.tables import DeltaTable
from pyspark import SparkFiles

from common.waiting import poll_until
from conf import versions
from conf.paths import SPARK_LOG4J2
from jobs.spark.scratch import process_scratch_dir
from jobs.spark.spark_session import (
    CODEGEN_CACHE_ENTRIES,
    jvm_stderr_filtered,
    running_tasks,
    spark_conf,
    stop_state_stores,
)


def test_session_is_local_on_loopback_with_delta(spark) -> None:
    conf = spark.sparkContext.getConf()

    assert spark.sparkContext.master.startswith("local")
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert int(spark.conf.get("spark.sql.shuffle.partitions")) <= 8
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert "HDFSBacked" in spark.conf.get("spark.sql.streaming.stateStore.providerClass")
    # Streaming only: no adaptive execution to warn about; plans not truncated.
    assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
    assert int(spark.conf.get("spark.sql.debug.maxToStringFields")) >= 100
    assert conf.get("spark.scheduler.allocation.file").endswith("conf/fairscheduler.xml")
    jars = conf.get("spark.driver.extraClassPath")
    assert "spark-sql-kafka-0-10_2.13" in jars and versions.delta_artifact() in jars


def test_no_jar_is_copied_into_the_session_and_no_scratch_goes_to_tmp(spark) -> None:
    """In local mode the jars are on the driver's class path: spark.jars would copy each
    into the session's userFiles folder at every start (550 MB with S3A). Spark's scratch
    is in the process's own folder (jobs/spark/scratch.py), not the system temp directory."""
    conf = spark.sparkContext.getConf()
    user_files = Path(SparkFiles.getRootDirectory())

    assert conf.get("spark.jars", "") == ""
    assert list(user_files.iterdir()) == []
    assert user_files.is_relative_to(process_scratch_dir())
    assert "SPARK_LOCAL_DIRS" not in os.environ  # the JVM's only: children get their own
    assert f"-Djava.io.tmpdir={process_scratch_dir()}" in conf.get("spark.driver.extraJavaOptions")


def test_the_test_session_compiles_with_c1_into_the_tiered_code_cache(spark) -> None:
    """C1 alone would reserve 48 MB for compiled code, which a session fills within a few
    runs; then the JVM flushes and recompiles (tests/conftest.py, docs/benchmarks.md)."""
    jvm = spark.sparkContext._jvm
    bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )

    def option(name: str) -> str:
        return bean.getVMOption(name).getValue()

    assert option("TieredStopAtLevel") == "1"
    assert int(option("ReservedCodeCacheSize")) >= 240 * 1024 * 1024


def test_a_plan_run_again_after_a_hundred_others_is_not_compiled_again(spark) -> None:
    """Spark keeps 100 generated classes by default, fewer than a running job's batches
    use: each batch then compiled its plans again (docs/benchmarks.md). After more than
    that many other plans, the first one still finds its classes compiled."""
    compiles = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    assert int(spark.conf.get("spark.sql.codegen.cache.maxEntries")) == CODEGEN_CACHE_ENTRIES

    def plan(n: int) -> None:  # a literal of its own: a generated class of its own
        assert spark.range(2).selectExpr(f"id * 7 + {n} AS x").collect()[1].x == 7 + n

    plan(0)
    before = compiles.getCount()
    for n in range(1, 121):
        plan(n)
    assert compiles.getCount() - before >= 120, "the other plans were compiled each"
    again = compiles.getCount()
    plan(0)
    assert compiles.getCount() == again


def test_a_cluster_gets_the_jars_from_the_driver() -> None:
    conf = spark_conf(master="spark://master:7077")

    assert versions.delta_artifact() in conf["spark.jars"]
    assert "spark.driver.extraClassPath" not in conf


def test_delta_table_round_trip_with_history(spark, tmp_path) -> None:
    path = str(tmp_path / "t")
    spark.range(100).write.format("delta").save(path)
    spark.range(100, 150).write.format("delta").mode("append").save(path)

    assert spark.read.format("delta").load(path).count() == 150
    assert [r.version for r in DeltaTable.forPath(spark, path).history().collect()] == [1, 0]


def test_cluster_master_does_not_bind_loopback() -> None:
    conf = spark_conf(master="spark://master:7077")

    assert conf["spark.master"] == "spark://master:7077"
    assert "spark.driver.bindAddress" not in conf
    assert "spark.driver.host" not in conf


@pytest.mark.parametrize(
    ("level", "quiet", "drop"), [("warn", "error", "DENY"), ("info", "info", "NEUTRAL")]
)
def test_log_level_reaches_the_jvm(level: str, quiet: str, drop: str) -> None:
    options = spark_conf(log_level=level)["spark.driver.extraJavaOptions"]

    assert f"-Dsensorwatch.log.level={level}" in options
    assert f"-Dsensorwatch.log.quiet={quiet}" in options
    assert f"-Dsensorwatch.log.drop={drop}" in options


def test_given_jvm_options_join_sensorwatch_s_and_other_properties_win() -> None:
    given = {
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
        "spark.executor.extraJavaOptions": "-Dsome=thing",
        "spark.sql.shuffle.partitions": "9",
    }
    conf = spark_conf(scratch=Path("/srv/scratch"), extra=given)

    driver = conf["spark.driver.extraJavaOptions"].split()
    assert driver[0] == "-Djava.io.tmpdir=/srv/scratch" and driver[-1] == "-XX:TieredStopAtLevel=1"
    assert "-Dsensorwatch.log.level=warn" in driver
    executor = conf["spark.executor.extraJavaOptions"].split()
    assert executor[-1] == "-Dsome=thing" and "-Dsensorwatch.log.level=warn" in executor
    assert conf["spark.sql.shuffle.partitions"] == "9"


def test_jvm_stderr_loses_only_the_incubator_line(capfd) -> None:
    """A process started in the block (as Spark's JVM is) keeps writing through the
    filter after the block; only the JVM's incubator warning is left out."""
    script = "echo 'WARNING: Using incubator modules: jdk.incubator.vector' >&2; echo kept >&2"
    with jvm_stderr_filtered():
        child = subprocess.Popen(["sh", "-c", f"sleep 0.5; {script}; echo 'last words' >&2"])
    assert child.wait(timeout=30) == 0
    seen = ""
    deadline = time.monotonic() + 10
    while "last words" not in seen and time.monotonic() < deadline:
        seen += capfd.readouterr().err
        time.sleep(0.05)  # poll: a thread copies the child's stderr
    assert "kept\nlast words\n" in seen and "incubator" not in seen


def test_running_tasks_counts_a_task_until_it_ends(spark, tmp_path) -> None:
    """What stop_session waits for before it stops Spark: a running task counts, and no
    longer once it has ended. The task runs until the test lets it end (Spark's status
    tracker follows its listener bus, which lags on a loaded machine)."""
    release = tmp_path / "release"

    def task(_: int) -> bool:
        deadline = time.monotonic() + 300
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # waits for the test's signal, with a deadline
        return release.exists()

    results: list[list[bool]] = []
    job = threading.Thread(
        target=lambda: results.append(spark.sparkContext.parallelize([1], 1).map(task).collect())
    )
    job.start()
    try:
        assert poll_until(lambda: running_tasks(spark), 240, 0.05, done=lambda n: n == 1) == 1
    finally:
        release.touch()
        job.join(timeout=300)
    assert results == [[True]], "the task ended before the test saw it run"
    assert poll_until(lambda: running_tasks(spark), 120, 0.05, done=lambda n: n == 0) == 0


def test_python_workers_come_from_the_project_daemon_with_the_job_s_modules(spark) -> None:
    """The job's Arrow tasks run in workers forked by jobs/python_daemon.py, which imported
    what they need before it forked: a worker finds ingest's module loaded without having
    been asked to import it, and its parent is that daemon."""

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as parent:
            command = parent.read().replace(b"\0", b" ").decode()
        loaded = "jobs.queries.ingest" in sys.modules
        yield pa.RecordBatch.from_pylist([{"parent": command, "loaded": loaded}])

    rows = spark.range(1).mapInArrow(probe, "parent STRING, loaded BOOLEAN").collect()

    assert "-m jobs.python_daemon" in rows[0]["parent"]
    assert rows[0]["loaded"] is True


def test_stopping_the_state_stores_ends_their_maintenance(spark, tmp_path) -> None:
    """What stop_session does before it stops Spark, so that no maintenance of a store
    runs into the stopping RPC environment: once a stateful query has run, its stores'
    maintenance thread runs; after stop_state_stores it does not."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part.json").write_text('{"k": "a"}\n{"k": "b"}\n{"k": "a"}\n')
    counts = (
        spark.readStream.schema("k STRING")
        .json(str(tmp_path / "in"))
        .groupBy("k")
        .count()
        .writeStream.format("memory")
        .queryName("state_store_stop")
        .outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    counts.awaitTermination(240)
    rows = {r["k"]: r["count"] for r in spark.table("state_store_stop").collect()}
    assert rows == {"a": 2, "b": 1}
    store = spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state.StateStore
    assert store.isMaintenanceRunning()
    stop_state_stores(spark)
    assert not store.isMaintenanceRunning()
    spark.sql("DROP VIEW IF EXISTS state_store_stop")


# Spark 4.2's state store logs under a logger named after the store, not the class.
STORE_LOGGER = (
    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    " StateStoreProviderId[ storeId=StateStoreId[ operatorId=1, partitionId=0,"
    " storeName=default ], queryRunId=96ca2a79-2bc9-4d11-89c9-65f660a90158 ]"
)


@pytest.mark.parametrize(
    ("logger", "dropped"),
    [
        # A stop's own interrupt of Hadoop's Shell, during a checkpoint write.
        ("org.apache.hadoop.util.Shell", "Interrupted while joining on: Thread[Thread-57,5,main]"),
        # The state store at a restart, as CI saw it after a kill.
        (
            STORE_LOGGER,
            "The state for version 1 doesn't exist in loadedMaps. Reading snapshot file and "
            "delta files if needed...Note that this is normal for the first batch of starting "
            "query.",
        ),
        # The stores' maintenance ticking once more after the session stopped (CI, an S3 job).
        (
            "org.apache.spark.sql.execution.streaming.state.StateStore",
            "Error running maintenance thread",
        ),
        # A real-time task interrupted by a stop, whose broadcast went with the stop.
        ("org.apache.spark.TaskContextImpl", "Error in TaskCompletionListener"),
        # A task killed by a stop while it cached a block, as run-local's Ctrl-C met it.
        (
            "org.apache.spark.storage.BlockManager",
            "Putting block rdd_245_1 failed due to exception org.apache.spark.TaskKilledException:"
            " Stage cancelled: [SPARK_JOB_CANCELLED] Job 23 cancelled Query windows",
        ),
        (
            "org.apache.spark.storage.BlockManager",
            "Block rdd_245_1 could not be removed as it was not found on disk or in memory",
        ),
        # The batch's cached frame unpersisted as the queries stop (the real-time drill, CI).
        (
            "org.apache.spark.storage.BlockManager",
            "Asked to remove block rdd_84_0, which does not exist",
        ),
        # Two tasks of side-by-side writes computed one block of a cached frame (CI).
        (
            "org.apache.spark.storage.BlockManager",
            "Block rdd_977_4 already exists on this machine; not re-adding it",
        ),
        # A plan rendered without the session's conf as the job ends (a disk-full drill).
        (
            "org.apache.spark.util.SparkStringUtils",
            "Truncated the string representation of a plan since it was too large. This "
            "behavior can be adjusted by setting 'spark.sql.debug.maxToStringFields'.",
        ),
    ],
    ids=[
        "hadoop-shell-interrupt",
        "state-store-restart",
        "maintenance-after-stop",
        "listener-after-stop",
        "put-of-a-killed-task",
        "its-removal",
        "removal-of-a-block-gone",
        "block-computed-twice",
        "plan-text-cut-at-the-end",
    ],
)
def test_a_known_harmless_warning_is_dropped_and_others_show(
    tmp_path, logger: str, dropped: str
) -> None:
    """conf/log4j2.properties as the job's JVM loads it: the one known-harmless warning
    of a logger is dropped; the same logger's other warnings show."""
    script = tmp_path / "Log.java"
    script.write_text(
        "public class Log { public static void main(String[] a) {"
        " org.apache.logging.log4j.Logger log ="
        f" org.apache.logging.log4j.LogManager.getLogger({json.dumps(logger)});"
        f" log.warn({json.dumps(dropped)});"
        ' log.warn("another warning"); } }',
        encoding="utf-8",
    )
    jars = sorted(str(p) for p in (Path(pyspark.__file__).parent / "jars").glob("log4j-*.jar"))
    done = subprocess.run(
        ["java", "-cp", os.pathsep.join(jars), f"-Dlog4j2.configurationFile={SPARK_LOG4J2}",
         str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "another warning" in out and dropped[:30] not in out
