"""The one place that builds SparkSessions for SensorWatch (job, tests, tools)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from common.waiting import poll_until
from conf.jars import s3a_jars, spark_jars
from conf.lake_location import is_object_store
from conf.paths import (
    PROJECT_ROOT,
    SPARK_CLASS_ARCHIVE,
    SPARK_LOG4J2,
    SPARK_SCHEDULER_POOLS,
    VAR_DIR,
)
from jobs.spark.jvm_stderr import JVM_NOISE, JvmStderr
from jobs.spark.scratch import process_scratch_dir
from lake.storage import spark_conf as storage_conf

LOOPBACK = "127.0.0.1"
CODEGEN_CACHE_ENTRIES = 1000  # spark.sql.codegen.cache.maxEntries (spark_conf says why)
PYTHON_IDLE_WORKERS = 2  # the lake path's task slots at the default master, local[2]


def session_jars(lake: str | None) -> list[Path]:
    """The jars a session for ``lake`` loads beyond pyspark's own, as set-up resolved
    them: the Kafka connector and Delta, and for a lake on object storage Hadoop's S3
    connector (`scripts/setup --s3`: 550 MB only such a lake needs).

    Raises:
        JarsMissing: a set-up step was not run; the message names it.
    """
    return [*spark_jars(), *object_store_jars(lake)]


def object_store_jars(lake: str | None) -> list[Path]:
    """Hadoop's S3 connector for a lake on object storage, else none. A local driver puts
    them after Spark's own jars (:func:`launch_class_path`), not before them with the
    others: the JVM maps the class-data archive (local_stack/class_archive.py) only where
    the class path begins as it did when the archive was made, without them; in front, an
    S3 job started with no class archived, about 10 CPU seconds more (docs/benchmarks.md).
    Nothing of theirs is in Spark's jars but a logging binding identical to Spark's."""
    return s3a_jars() if lake is not None and is_object_store(lake) else []


def launch_class_path(lake: str | None, master: str) -> dict[str, str]:
    """The environment that puts a local driver's :func:`object_store_jars` after Spark's
    own jars: Spark's launcher appends SPARK_DIST_CLASSPATH (a value given is kept)."""
    tail = object_store_jars(lake) if master.startswith("local") else []
    if not tail:
        return {}
    given = os.environ.get("SPARK_DIST_CLASSPATH")
    return {"SPARK_DIST_CLASSPATH": os.pathsep.join([*([given] if given else []), *map(str, tail)])}


def spark_conf(
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 4,
    driver_memory: str = "1g",
    ui: bool = False,
    warehouse_dir: Path = VAR_DIR / "spark-warehouse",
    log_level: str = "warn",
    lake: str | None = None,
    extra: Mapping[str, str] | None = None,
    scratch: Path | None = None,
) -> dict[str, str]:
    """The Spark configuration SensorWatch runs with, as plain key/value pairs.

    ``log_level`` (error, warn, info, debug) is the level of Spark's own log lines; at
    warn and error, conf/log4j2.properties also hides the messages known to be harmless.
    A ``lake`` in an object store adds Hadoop's S3 connector and its endpoint settings.
    A ``scratch`` folder (jobs/spark/scratch.py) takes the driver JVM's temp files. ``extra``
    properties win over these, except JVM options, which are added to SensorWatch's.
    """
    log4j = " ".join(
        [f"-Dlog4j2.configurationFile=file:{SPARK_LOG4J2}", *log_properties(log_level)]
    )
    conf = {
        "spark.master": master,
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
        # in 2.5 s where RocksDB took 6.9 s (docs/benchmarks.md).
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
        # Checkpoints keep this many batches of offsets, commits and state files (default
        # 100): a restart needs only the last. At a 60 s readers trigger, 100 batches of
        # state deltas were 100 minutes of growth, some 19 MB per 100 s at 2,000 readings/s
        # (the soak benchmark, docs/benchmarks.md).
        "spark.sql.streaming.minBatchesToRetain": "20",
        # Event times are UTC in the data; keep Spark's rendering of them UTC as well.
        "spark.sql.session.timeZone": "UTC",
        # Generated classes cached for reuse (default 100): a running job's batches use
        # more than that, so every batch compiled them all again with Janino (110 compiles
        # per 10 s at a 2 s trigger against 23 with 1,000; docs/benchmarks.md).
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES),
        # Every query these sessions run is a streaming one, for which Spark turns adaptive
        # query execution off anyway, warning once per query start that it does so.
        "spark.sql.adaptive.enabled": "false",
        # Some of the job's plans have more than the default 25 fields: their string form
        # (for debug output and the UI) would be truncated, with a warning.
        "spark.sql.debug.maxToStringFields": "500",
        # The Kafka source's options carry a SASL password (sasl.jaas.config) or a client
        # key (ssl.keystore.key) when the broker asks for them (conf/kafka_client.py):
        # plans, logs and the UI show such options redacted (Spark's default: urls only).
        "spark.sql.redaction.options.regex": "(?i)url|jaas|password|keystore\\.key|secret",
        "spark.sql.warehouse.dir": str(warehouse_dir),
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        # Streaming queries run their jobs concurrently; FAIR pools (jobs/driver/job.py puts
        # ingest and the readers in separate pools) keep a long statistics batch from
        # queueing ingest, and with it the overheat alerts, behind it.
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(SPARK_SCHEDULER_POOLS),
        "spark.ui.enabled": str(ui).lower(),
        "spark.ui.showConsoleProgress": "false",
        # Python workers are forked by the project's daemon, which imports what they run
        # once for all of them (jobs/python_daemon.py), and at most PYTHON_IDLE_WORKERS
        # wait between tasks: each one kept is memory, and a new one is a fork away.
        "spark.python.daemon.module": "jobs.python_daemon",
        "spark.python.factory.idleWorkerMaxPoolSize": str(PYTHON_IDLE_WORKERS),
        # The executors' Python workers run the job's own code (the tasks that write data
        # files, jobs/writer/data_files.py): they find it where the driver does. Like the venv
        # (PYSPARK_PYTHON below), a cluster's workers need the project at the same path.
        "spark.executorEnv.PYTHONPATH": str(PROJECT_ROOT),
    }
    if lake is not None:
        conf.update(storage_conf(lake))
    if scratch is not None:
        # The JVM's temp files (native libraries it unpacks, spark-submit's folder) and
        # S3A's upload buffers (hadoop.tmp.dir) in a folder this process owns
        # (jobs/spark/scratch.py says why), not /tmp, where a killed driver would leave them.
        conf["spark.driver.extraJavaOptions"] = f"-Djava.io.tmpdir={scratch} {log4j}"
        if SPARK_CLASS_ARCHIVE.is_file():
            # Spark's classes parsed and verified once, by scripts/setup: a cold driver
            # spends about 5 CPU seconds less starting (local_stack/class_archive.py). A stale
            # archive (other jars, another JDK) is ignored, and the logging is off.
            conf["spark.driver.extraJavaOptions"] += (
                f" -XX:SharedArchiveFile={SPARK_CLASS_ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off"
            )
        if master.startswith("local"):
            conf["spark.hadoop.hadoop.tmp.dir"] = str(scratch / "hadoop")
    # The Kafka connector and Delta (and S3A for a bucket), resolved by scripts/setup.
    if master.startswith("local"):
        # On the driver's class path: spark.jars would copy them into the session's
        # userFiles folder at every start (the S3A jars are 550 MB).
        # (The S3 connector's come after Spark's own: launch_class_path.)
        conf["spark.driver.extraClassPath"] = os.pathsep.join(str(p) for p in spark_jars())
        # Nothing outside this machine needs to reach a local driver.
        conf["spark.driver.host"] = LOOPBACK
        conf["spark.driver.bindAddress"] = LOOPBACK
    else:
        # A cluster's executors fetch them from the driver.
        conf["spark.jars"] = ",".join(str(p) for p in session_jars(lake))
    for key, value in (extra or {}).items():
        # A user's JVM options join SensorWatch's (log configuration, scratch folder)
        # rather than replace them: losing those would be silent.
        joined = key in JAVA_OPTIONS and conf.get(key)
        conf[key] = f"{conf[key]} {value}" if joined else value
    return conf


# Spark properties whose value is a list of JVM options.
JAVA_OPTIONS = frozenset({"spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"})


def log_properties(level: str) -> list[str]:
    """The JVM system properties conf/log4j2.properties takes its levels from."""
    quiet = level in ("warn", "error")
    return [
        f"-Dsensorwatch.log.level={level}",
        f"-Dsensorwatch.log.quiet={'error' if quiet else level}",
        f"-Dsensorwatch.log.drop={'DENY' if quiet else 'NEUTRAL'}",
    ]


def build_spark_session(app_name: str = "sensorwatch", **options: object) -> SparkSession:
    """Build (or return the running) SparkSession configured by :func:`spark_conf`.

    Keyword options are those of :func:`spark_conf` (master, shuffle_partitions, ...).
    """
    scratch = process_scratch_dir()
    conf = spark_conf(scratch=scratch, **options)  # type: ignore[arg-type]
    if conf["spark.master"].startswith("local"):
        # Silences Spark's "hostname resolves to a loopback address" warning.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    # Python workers (Arrow UDFs such as mapInArrow) must run in this interpreter,
    # the project's venv, not whatever "python3" is on PATH. PySpark reads this variable
    # and ships the path with each task, so a standalone cluster's executors need the same
    # venv at the same path: the compose cluster shares one image, tests one machine.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Shuffle blocks and Spark's folders (blockmgr-*, spark-*) in the process's scratch
    # folder, through the variable a cluster manager would set (spark.local.dir would do
    # the same with a warning at every start). Only for the JVM launched here: a program
    # this one starts gets a folder of its own. One given by the environment is kept.
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS") or str(scratch)
    lake = options.get("lake")
    launch = {
        "SPARK_LOCAL_DIRS": local_dirs,
        **launch_class_path(lake if isinstance(lake, str) else None, conf["spark.master"]),
    }
    with environment_set(launch):
        session = builder.getOrCreate()
    remove_unused_artifact_folder(session)
    return session


def remove_unused_artifact_folder(session: SparkSession) -> None:
    """Remove the ``artifacts/spark-<uuid>`` folder Spark 4 makes in the JVM's working
    directory at start while it is still empty.

    It holds what Spark Connect clients upload (SensorWatch uploads nothing) and Spark
    deletes it when the JVM exits cleanly, but not when the JVM is killed: a folder left
    in the project (or a container's /app) per crash. Spark makes it again if it ever
    needs it (``Files.createDirectories``), and deletes it at exit as before.
    """
    try:
        manager = getattr(session._jvm.org.apache.spark.sql.artifact, "ArtifactManager$")
        root = Path(str(getattr(manager, "MODULE$").artifactRootDirectory().toAbsolutePath()))
    except Exception:  # another Spark without that folder: nothing to remove
        return
    for folder in (root, root.parent):  # the folder, then "artifacts" if nothing else is in it
        try:
            folder.rmdir()  # only ever an empty folder
        except OSError:
            return


@contextmanager
def environment_set(values: Mapping[str, str]) -> Iterator[None]:
    """This process's environment variables ``values`` set for the block only (the
    programs it starts meanwhile inherit them); their old values back afterwards."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def jvm_stderr_filtered(skip: tuple[bytes, ...] = JVM_NOISE) -> Iterator[JvmStderr]:
    """Processes started within the block (Spark's JVM, launched as the session is built)
    get a pipe as their stderr; a daemon thread copies it to this process's stderr,
    without the lines that start with one of ``skip``, and holding a checkpoint conflict
    back for a moment (jobs/spark/jvm_stderr.py; mute it once the lake is known to be taken).
    Their stderr stays that pipe for their life; this process's own stderr is restored
    when the block ends.

    For a program's own session only: it swaps file descriptor 2 of the whole process
    while the block runs (a test runner capturing it would lose track).
    """
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)  # inherited by the children started from here on
    os.close(write_end)
    copier = JvmStderr(real, skip)
    threading.Thread(target=copier.copy, args=(read_end,), name="jvm-stderr", daemon=True).start()
    try:
        yield copier
    finally:
        sys.stderr.flush()
        os.dup2(real, 2)  # ``real`` stays open: the copying thread writes to it


def ignore_sigterm_in_jvm(spark: SparkSession) -> None:
    """Make the session's JVM ignore SIGTERM.

    A SIGTERM sent to the whole process group (``timeout``, ``kill -- -PGID``, a service
    manager) would otherwise reach the JVM too, whose shutdown hooks stop Spark under the
    running queries. The Python process stops them in order instead; the JVM ends with it
    (PySpark's gateway exits when its stdin, a pipe from Python, closes), even on SIGKILL.
    PySpark starts the JVM with SIGINT ignored for the same reason.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    signal = jvm.sun.misc.Signal
    signal.handle(signal("TERM"), jvm.sun.misc.SignalHandler.SIG_IGN)


def running_tasks(spark: SparkSession) -> int:
    """How many tasks the driver and every executor run now (Spark's status tracker)."""
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return sum(info.numRunningTasks() for info in infos)


def stop_state_stores(spark: SparkSession) -> None:
    """Close the state stores this JVM holds and stop their maintenance thread.

    Spark's stop does not: the stores' periodic maintenance may then run while the RPC
    environment stops under it, fail to ask the driver whether its store is still active,
    and warn "Error doing maintenance on provider ... Could not unload state store
    provider" with a RpcEnvStoppedException and its stack (CI, 2026-12-07). Every query
    is stopped by then, so nothing is lost: a store's state is in its checkpoint.
    """
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


def stop_session(spark: SparkSession, drain_s: float = 10.0) -> None:
    """Stop the session once its tasks have ended, or after ``drain_s`` seconds, its
    state stores first.

    A stopped real-time query's tasks end a moment after the query does (they are killed
    inside a Kafka write). Stopped while they still run, Spark shuts down the pool their
    last status update goes to, and logs "Exception in statusUpdate" at ERROR (a
    RejectedExecutionException; seen once in CI, 2026-11-29).
    """
    with contextlib.suppress(Py4JError):  # the JVM is gone or going: no task to wait for
        poll_until(lambda: running_tasks(spark), drain_s, 0.05, done=lambda n: n == 0)
        stop_state_stores(spark)
    spark.stop()
