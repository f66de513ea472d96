"""The job on a Spark standalone cluster writes exactly what it writes in local mode.

The scale-out path (docs/architecture.md#running-it) without Docker: a master and two
workers from the pinned pyspark on loopback, the unchanged
``python -m jobs.stream --master spark://...``, and the same topic processed by the job in
local mode for comparison. The cluster's
driver may receive at most :data:`RESULT_LIMIT` per Spark job (``spark.driver.maxResultSize``),
far less than a micro-batch's rows: the executors write the tables, the driver commits.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter

import pytest
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT
from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from jobs.stream import run
from local_stack.spark_cluster import cluster_env, standalone_cluster
from tests.support.job_settings import available_now
from tests.support.kafka_io import make_topic
from tests.support.lake_rows import TABLES, comparable
from tests.support.processes import with_spark_conf
from tests.support.producer_run import run_producer

START = "2026-01-01T00:00:00Z"
READINGS = 20_000
RESULT_LIMIT = 1024 * 1024  # Spark's smallest non-zero spark.driver.maxResultSize: 1m

# A master, two workers, their executors and a driver start cold: on CI's slowest run
# the cluster's run alone outlasted 600 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def rows(lake, name: str) -> list[tuple]:
    return comparable(DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist())


@pytest.fixture(scope="module")
def lakes(spark, kafka, tmp_path_factory):
    """One topic through the job twice: in local mode, and on a standalone cluster."""
    tmp = tmp_path_factory.mktemp("cluster")
    topic, registry = make_topic(kafka, "cluster"), tmp / "fleet.jsonl"
    # No late or out-of-order injection: which window a late reading still reaches
    # depends on micro-batch boundaries, which differ between any two runs. Duplicates,
    # malformed records and every kind of incident are in.
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", READINGS,
        "--sensors", 20, "--seed", 5, "--start-time", START, "--registry-out", registry,
        "--spike-rate", 2, "--sustained-rate", 1, "--silence-rate", 1, "--warming-rate", 1,
        "--late-fraction", 0, "--out-of-order-fraction", 0,
        "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    local = tmp / "lake-local"
    run(available_now(kafka, topic, local, registry=registry), spark)

    on_cluster = tmp / "lake-cluster"
    with standalone_cluster(tmp / "spark", workers=2, cores=1) as cluster:
        job = subprocess.run(
            [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
             "--topic", topic, "--lake", str(on_cluster), "--registry", str(registry),
             "--trigger", "availableNow", "--master", cluster.master_url],
            capture_output=True, text=True, timeout=1200, cwd=PROJECT_ROOT,
            env=with_spark_conf(
                cluster_env(tmp / "spark"),
                f"spark.driver.maxResultSize={RESULT_LIMIT // 1024 // 1024}m",
            ),
        )  # fmt: skip
        state = cluster.state()
        applications = state.get("completedapps", []) + state.get("activeapps", [])
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    # Each worker writes the command it started its executor with into the executor's log.
    launched = [
        line
        for log in (tmp / "spark").glob("worker-*/app-*/*/stderr")
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.startswith("Spark Executor Command:")
    ]
    return {
        "local": local, "cluster": on_cluster, "applications": applications,
        "executor_commands": launched,
    }  # fmt: skip


def test_the_job_ran_on_the_cluster(lakes) -> None:
    # The master saw the job as an application with an executor on each worker.
    assert [app["name"] for app in lakes["applications"]] == ["sensorwatch-job"]
    assert lakes["applications"][0]["cores"] == 2


def test_the_job_s_spark_settings_reach_the_executors(lakes) -> None:
    """SENSORWATCH_SPARK_CONF (here the run's JIT options, tests/conftest.py) is in the
    command each worker started its executor with."""
    given = load_settings(JobSettings, {}).spark_conf["spark.executor.extraJavaOptions"]
    wanted = [f'"{option}"' for option in given.split()]  # quoted, one by one

    assert wanted and len(lakes["executor_commands"]) == 2, lakes["executor_commands"]
    for command in lakes["executor_commands"]:
        assert all(option in command for option in wanted), (wanted, command)


def test_a_batch_would_not_fit_in_the_driver_s_result_limit(spark, lakes) -> None:
    """The limit is meaningful: the largest ingest batch, as Arrow, exceeds it."""
    metrics = spark.read.format("delta").load(str(lakes["cluster"] / "pipeline_metrics"))
    largest = max(r.input_rows for r in metrics.filter("query = 'ingest'").collect())
    readings = DeltaTable(str(lakes["cluster"] / "readings")).to_pyarrow_table()
    per_row = readings.nbytes / readings.num_rows
    assert largest * per_row > 2 * RESULT_LIMIT, (largest, per_row)


@pytest.mark.parametrize("name", TABLES)
def test_cluster_tables_equal_local_tables(lakes, name: str) -> None:
    local, on_cluster = rows(lakes["local"], name), rows(lakes["cluster"], name)

    assert local, f"{name}: the local run wrote nothing to compare"
    assert on_cluster == local


def test_pipeline_metrics_account_for_every_row_once(spark, lakes) -> None:
    """Batch boundaries may differ between two runs; what each query read may not."""

    def per_query(lake) -> dict[str, int]:
        rows = spark.read.format("delta").load(str(lake / "pipeline_metrics")).collect()
        batches = Counter((r.query, r.batch_id) for r in rows)
        assert set(batches.values()) == {1}, "a batch's metrics row written twice"
        totals: Counter = Counter()
        for r in rows:
            totals[r.query] += r.input_rows
        return dict(totals)

    local = per_query(lakes["local"])
    assert local["ingest"] == READINGS
    assert per_query(lakes["cluster"]) == local


def test_every_rule_the_input_scripts_is_compared(spark, lakes) -> None:
    """The default file's rules but battery_low and humidity_high (no failing batteries or
    humid stretches): the learned ones too, over the run's 83 minutes of warmings."""
    alerts = spark.read.format("delta").load(str(lakes["local"] / "alerts"))
    assert {r.rule for r in alerts.select("rule").distinct().collect()} == {
        "overheat_reading",
        "sustained_high",
        "sensor_silent",
        "temperature_rising",
        "temperature_off_normal",
    }


@pytest.mark.jvm
def test_a_port_taken_meanwhile_starts_the_cluster_on_other_ports(tmp_path, monkeypatch) -> None:
    from local_stack import spark_cluster

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks, pick = iter([port]), spark_cluster.free_port
        # The master's RPC port is the first one picked: taken, as another process might.
        monkeypatch.setattr(spark_cluster, "free_port", lambda: next(picks, None) or pick())

        # The master alone: the ports are its (a worker would add a JVM and prove nothing).
        with standalone_cluster(tmp_path / "spark", workers=0) as cluster:
            assert cluster.state()["status"] == "ALIVE"
            assert not cluster.master_url.endswith(f":{port}")
    assert "BindException" in (tmp_path / "spark" / "master.out").read_text()


@pytest.mark.jvm
def test_another_web_page_on_the_ui_port_starts_the_cluster_on_other_ports(
    tmp_path, monkeypatch
) -> None:
    """The port picked for the master's UI taken meanwhile by another web server (a CI run
    met another program's HTML page there): not the master's JSON, so it starts again."""
    import http.server
    import threading

    from local_stack import spark_cluster

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!DOCTYPE html><html>someone else's page</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        pick = spark_cluster.free_port
        picks = iter([pick(), other.server_address[1]])  # the RPC port, then the UI's
        monkeypatch.setattr(spark_cluster, "free_port", lambda: next(picks, None) or pick())

        with standalone_cluster(tmp_path / "spark", workers=0) as cluster:
            assert cluster.state()["status"] == "ALIVE"
            assert not cluster.web_ui.endswith(f":{other.server_address[1]}")
    finally:
        other.shutdown()
        other.server_close()
