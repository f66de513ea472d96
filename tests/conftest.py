"""Shared fixtures: one SparkSession per test process, one Kafka broker per test run.

Also how a run is laid out (``scripts/test`` and ``docs/testing.md``):
- every test runs in a time zone far from UTC (``SENSORWATCH_TEST_TZ``, default
  America/New_York; ``scripts/test`` runs the tests without a JVM in Asia/Kolkata; empty:
  the machine's zone), so a naive datetime anywhere fails a test; tests/contract/test_time_zones.py
  compares whole runs of the job in two zones;
- tests that start a JVM (Spark, the Kafka broker, S3Proxy, a Docker engine's stack) are
  marked ``jvm``; ``scripts/test`` runs the others first, then these; on pytest-xdist
  workers (``SENSORWATCH_TEST_WORKERS``, ``--dist loadscope`` with the groups below) each
  test module is a group of its own, except modules that share a lake or the Docker
  stacks' image, which share one;
- with workers, the controller starts the broker once and the workers share it;
- the jobs tests start as programs, the session's Spark and the brokers compile with C1
  only (``QUICK_JIT``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from jobs.spark.spark_session import build_spark_session
from local_stack import mosquitto as local_mosquitto
from local_stack.server import free_port
from tests.support.brokers import Broker, docker_unavailable_reason, session_broker
from tests.support.kafka_io import make_topic
from tests.support.processes import SPARK_CONF_ENV
from tests.support.timing import SPARK_START, Timing

_broker_source: list[str] = []
_controller_broker = ExitStack()
BROKER_SOURCE_ENV = "SENSORWATCH_TEST_BROKER_SOURCE"
TEST_ZONE_ENV = "SENSORWATCH_TEST_TZ"
REALTIME_ENV = "SENSORWATCH_REALTIME"
# C1 only, with the code cache the default JIT gets (240 MB): C1 alone gets 48 MB, which a
# session's generated code fills within a few runs, and then the JVM spent a sixth of a
# run's CPU sweeping compiled code and compiling it again (docs/testing.md).
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"

# Fixtures whose use means a JVM: the session's Spark and the broker (a JVM here, a
# container with an engine).
JVM_FIXTURES = frozenset({"spark", "kafka", "kafka_admin", "new_topic"})
# Fixtures whose use means a Mosquitto broker (Debian's, which scripts/setup installs).
MOSQUITTO_FIXTURES = frozenset({"mosquitto"})
# Modules that share something a worker builds once or holds alone: the ops lake (one
# job run, tests/support/ops_lake.py), and the Docker stacks (one image built for all three; two
# stacks of a dozen containers at once would only compete for two cores).
SHARED_GROUPS = {
    "ops-lake": ("test_ops_alerts_cli", "test_ops_dashboard_api", "test_ops_dashboard_browser"),
    "docker-stack": ("test_docker_compose", "test_docker_s3", "test_docker_cluster"),
}
# Groups handed out first, longest first, so that the last group to finish is a short
# one (figures: docs/testing.md). Every other group follows in file order.
FIRST_GROUPS = (
    "docker-stack",
    "test_ops_notify",  # the longest group without a JVM (a minute)
    "test_drills",
    "test_bridge_drill",  # two minutes, most of them a Kafka outage: little CPU
    "test_s3_lake",
    "test_maintenance",
    "test_kafka_security",
    "test_time_zones",
    "ops-lake",
    "test_standalone_cluster",
    "test_run_local",
)


def pytest_configure(config: pytest.Config) -> None:
    """The run's time zone; with xdist workers, the one broker they share."""
    zone = os.environ.get(TEST_ZONE_ENV, "America/New_York")
    if zone:
        # Before any JVM starts: Spark's JVMs and the programs under test inherit it.
        os.environ["TZ"] = zone
        time.tzset()
    # The jobs the tests start as programs (a few dozen cold JVMs, each run for seconds)
    # compile with C1 only: 38% less CPU and 18% less time per run on 2 cores, where C2
    # took half of a short run's CPU (docs/testing.md). So does the session's own Spark
    # (the ``spark`` fixture): every test plans new queries, and C2 was still compiling
    # Spark's planner a dozen runs in (docs/testing.md).
    # The Docker stacks' job too (docker-compose.yml passes JOB_SPARK_CONF to it).
    # On a cluster (the standalone and Docker cluster tests) their executors do the same,
    # and so do its master and workers (SPARK_DAEMON_JAVA_OPTS, Spark's own variable).
    quick = f"spark.driver.extraJavaOptions={QUICK_JIT},spark.executor.extraJavaOptions={QUICK_JIT}"
    for name in (SPARK_CONF_ENV, "JOB_SPARK_CONF"):
        os.environ.setdefault(name, quick)
    os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", QUICK_JIT)
    # The tests' brokers too (KAFKA_OPTS, Kafka's own variable): a dozen start in a run.
    # The Docker stacks' broker takes it as BROKER_JAVA_OPTS (docker-compose.yml); it ran
    # with Kafka's defaults (C2) until 2026-12-02.
    os.environ.setdefault("KAFKA_OPTS", QUICK_JIT)
    os.environ.setdefault("BROKER_JAVA_OPTS", os.environ["KAFKA_OPTS"])
    # The real-time alert path holds six task slots and polls Kafka for as long as a job
    # runs: the jobs the tests start run without it unless the test is about it
    # (tests/jobs/realtime/test_realtime.py turns it on, as do run-local's and compose's
    # own settings).
    # Beside two workers' jobs it made a run 3 minutes longer and starved the live
    # maintenance drill.
    os.environ.setdefault(REALTIME_ENV, "false")
    # Programs the tests start serve /metrics on a free port each (they say which): two
    # workers' jobs, notifiers and producers would meet on the default ports.
    os.environ.setdefault("SENSORWATCH_METRICS_PORT", "0")
    is_controller = not hasattr(config, "workerinput")
    # The tests without a JVM (-m "not jvm ...") never use a broker: none to start.
    no_jvm = (config.getoption("markexpr", "") or "").replace(" ", "").startswith("notjvm")
    if is_controller and (config.getoption("numprocesses", None) or 0) > 0 and not no_jvm:
        _start_shared_broker(config)


def _start_shared_broker(config: pytest.Config) -> None:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return
    # Not under pytest's basetemp: xdist empties that after this hook, to give it to the
    # workers.
    data = _controller_broker.enter_context(TemporaryDirectory(prefix="sensorwatch-broker-"))
    broker = _controller_broker.enter_context(session_broker(Path(data)))
    os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap  # the workers inherit it
    os.environ[BROKER_SOURCE_ENV] = f"{broker.source} at {broker.bootstrap}"


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the shared broker, if this process started one."""
    _controller_broker.close()


def test_group(nodeid: str) -> str:
    """The group of a test (by its node id): its module, or the group its module shares."""
    module = nodeid.split("::", 1)[0].rpartition("/")[2].removesuffix(".py")
    return next((g for g, members in SHARED_GROUPS.items() if module in members), module)


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """With ``--dist loadscope``: a group at a time per worker, in collection order.

    (xdist's own ``loadgroup`` reads groups from marks into node ids, which pytest 9 no
    longer lets a plugin rewrite: every test was a group of its own, and a module's
    fixture was built on both workers.)
    """
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return test_group(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that need a JVM or Mosquitto, order the groups for the workers,
    and skip tests marked ``docker`` (``mqtt``) with the reason when no Docker engine
    answers (Mosquitto is not installed)."""
    for item in items:
        if JVM_FIXTURES & set(getattr(item, "fixturenames", ())) or "docker" in item.keywords:
            item.add_marker(pytest.mark.jvm)
        if MOSQUITTO_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mqtt)
        if "mqtt" in item.keywords and not local_mosquitto.installed():
            item.add_marker(
                pytest.mark.skip(
                    reason="needs Mosquitto (/usr/sbin/mosquitto), which scripts/setup "
                    "installs (Debian's mosquitto); or apt-get install mosquitto"
                )
            )
    rank = {group: i for i, group in enumerate(FIRST_GROUPS)}
    # A stable sort: file order within a group and among the other groups.
    items.sort(key=lambda item: rank.get(test_group(item.nodeid), len(rank)))
    docker_items = [item for item in items if "docker" in item.keywords]
    if not docker_items:
        return
    reason = docker_unavailable_reason()
    if reason is None:
        return
    for item in docker_items:
        item.add_marker(
            pytest.mark.skip(
                reason=f"needs a Docker engine: {reason}; `scripts/docker-lane up` and "
                '`eval "$(scripts/docker-lane env)"` provide one (docs/docker.md)'
            )
        )


def pytest_report_header(config: pytest.Config) -> str:
    """Say up front whether Docker tests will run."""
    reason = docker_unavailable_reason()
    return "docker: engine answers" if reason is None else f"docker: {reason}"


_timing = Timing(test_group)
_spark_start: list[float] = []  # the spark fixture's cold start, until a report carries it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """The set-up report of the test that started this process's Spark carries how long
    that took (tests/support/timing.py: from a worker, user properties reach the controller)."""
    outcome = yield
    if call.when == "setup" and _spark_start:
        outcome.get_result().user_properties.append((SPARK_START, _spark_start.pop()))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count each test's seconds for the summary (tests/support/timing.py)."""
    _timing.add(report)


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say where the run's time went and which broker the integration tests ran against."""
    for line in _timing.lines():
        terminalreporter.write_line(line)
    source = os.environ.get(BROKER_SOURCE_ENV) or (_broker_source[0] if _broker_source else "")
    if source:
        terminalreporter.write_line(f"kafka broker: {source}")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The session's real Kafka broker (see tests/support/brokers.py for how it is chosen)."""
    with session_broker(tmp_path_factory.mktemp("broker")) as broker:
        shared = os.environ.get(BROKER_SOURCE_ENV)  # started by the xdist controller
        yield Broker(broker.bootstrap, shared) if shared else broker
        _broker_source.append(f"{broker.source} at {broker.bootstrap}")


@pytest.fixture(scope="session")
def kafka_admin(kafka: Broker) -> AdminClient:
    """An Admin API client on the session broker."""
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


@pytest.fixture
def new_topic(kafka: Broker) -> Callable[..., str]:
    """Create fresh topics: ``new_topic(prefix, partitions=6)`` returns the name."""
    return lambda prefix="test", partitions=6: make_topic(kafka, prefix, partitions)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one SparkSession of the test session (local mode, Delta and Kafka on board)."""
    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    started = time.monotonic()
    session = build_spark_session(
        "sensorwatch-tests",
        warehouse_dir=warehouse,
        extra={"spark.driver.extraJavaOptions": QUICK_JIT},
    )
    _spark_start.append(time.monotonic() - started)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_mosquitto.MosquittoInfo]:
    """The session's real MQTT broker: Mosquitto as ``scripts/mqtt-local`` runs it
    (logins, the ACL, persistence), on a free port. Tests add the devices they need
    (``local_mosquitto.add_devices``: the broker takes them live)."""
    data = tmp_path_factory.mktemp("mosquitto")
    info = local_mosquitto.start(data, free_port())
    try:
        yield info
    finally:
        local_mosquitto.stop(data)
