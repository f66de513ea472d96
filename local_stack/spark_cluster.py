"""A Spark standalone cluster (one master, N workers) from the pinned pyspark, on loopback.

It is the scale-out path (docs/architecture.md#running-it) without Docker: the compose
``cluster`` profile starts the same two classes, ``Master`` and ``Worker``, from the same
pyspark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from common.waiting import poll_until
from conf.paths import SPARK_LOG4J2
from local_stack.server import free_port, log_tail

LOOPBACK = "127.0.0.1"
SPARK_CLASS = Path(sys.executable).parent / "spark-class"


@dataclass(frozen=True)
class Cluster:
    """A running standalone cluster."""

    master_url: str
    web_ui: str

    def state(self) -> dict:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as reply:
            return json.load(reply)


def cluster_env(work: Path) -> dict[str, str]:
    """Environment that keeps master, workers and driver on loopback and quiet."""
    return {
        **os.environ,
        # spark-class finds it by importing pyspark with the python on PATH, which need
        # not be the project's (a SparkSession in this process sets it, for its own JVM).
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOCAL_HOSTNAME": LOOPBACK,
        # The user's own daemon options (Spark's variable) kept, the log configuration added.
        "SPARK_DAEMON_JAVA_OPTS": (
            f"{os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')} "
            f"-Dlog4j2.configurationFile=file:{SPARK_LOG4J2}"
        ).lstrip(),
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        # The workers' and executors' scratch (blockmgr-*, spark-*) in the cluster's
        # folder, not /tmp, where a killed worker would leave it.
        "SPARK_LOCAL_DIRS": str(work / "local"),
    }


@contextmanager
def _daemon(args: list[str], log: Path, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, start_new_session=True,
        )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


class PortTaken(RuntimeError):
    """A daemon of the cluster could not bind the port it was given."""


# Where Spark finds a port taken it would try the next one (spark.port.maxRetries, 16),
# silently: a master whose RPC port was taken then listens on the web UI's port, the web
# UI on the one after, and the workers knock on the wrong door until the deadline (seen in
# scripts/bench: "Too large frame", the status poll's GET read by the RPC server). With no
# retries a daemon exits instead, and the cluster starts again on other ports.
NO_PORT_DRIFT = "-Dspark.port.maxRetries=0"
ATTEMPTS = 3


def _exited(proc: subprocess.Popen, log: Path, what: str) -> None:
    """Raise when ``proc`` has exited: PortTaken for a port another process took."""
    if proc.poll() is None:
        return
    tail = log_tail(log)
    if "BindException" in tail or "Address already in use" in tail:
        raise PortTaken(f"{what}: a port it was given was taken")
    raise RuntimeError(f"{what} exited:\n{tail}")


@contextmanager
def standalone_cluster(
    work: Path, workers: int = 1, cores: int = 2, memory: str = "2g", timeout: float = 90
) -> Iterator[Cluster]:
    """Start a master and ``workers`` workers; yield once every worker has registered.

    Ports are picked free on loopback; one taken meanwhile by another process makes the
    cluster start again on new ones (up to three times).
    """
    for attempt in range(1, ATTEMPTS + 1):
        stack = ExitStack()
        try:
            cluster = _start(stack, work, workers, cores, memory, timeout)
        except PortTaken:
            stack.close()
            if attempt == ATTEMPTS:
                raise
            continue
        except BaseException:
            stack.close()
            raise
        with stack:
            yield cluster
        return


def _start(
    stack: ExitStack, work: Path, workers: int, cores: int, memory: str, timeout: float
) -> Cluster:
    work.mkdir(parents=True, exist_ok=True)
    env = cluster_env(work)
    env["SPARK_DAEMON_JAVA_OPTS"] = f"{env['SPARK_DAEMON_JAVA_OPTS']} {NO_PORT_DRIFT}"
    port, ui = free_port(), free_port()
    cluster = Cluster(f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui}")
    master_log = work / "master.out"
    master = stack.enter_context(_daemon(
        ["org.apache.spark.deploy.master.Master",
         "--host", LOOPBACK, "--port", str(port), "--webui-port", str(ui)],
        master_log, env,
    ))  # fmt: skip
    started = []
    for n in range(workers):
        log = work / f"worker-{n}.out"
        worker = stack.enter_context(_daemon(
            ["org.apache.spark.deploy.worker.Worker", cluster.master_url,
             "--host", LOOPBACK, "--cores", str(cores), "--memory", memory,
             "--webui-port", str(free_port()), "--work-dir", str(work / f"worker-{n}")],
            log, env,
        ))  # fmt: skip
        started.append((worker, log, f"Spark worker {n}"))

    def registered() -> bool:
        _exited(master, master_log, "the Spark master")
        for worker, log, what in started:
            _exited(worker, log, what)
        try:
            return cluster.state().get("aliveworkers", 0) >= workers
        except (OSError, ValueError):
            # The web UI is not up yet; or not the master's JSON: another program answers
            # on the port picked for its UI (taken meanwhile), the master cannot bind it
            # and exits, which the checks above turn into a start on new ports.
            return False

    if not poll_until(registered, timeout, 0.5):
        raise RuntimeError(
            f"{workers} worker(s) did not register within {timeout:.0f}s:\n{log_tail(master_log)}"
        )
    return cluster
