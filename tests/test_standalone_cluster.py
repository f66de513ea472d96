"""The job on a Spark standalone cluster writes exactly what it writes in local mode.

The scale-out path of SPEC section 5 without Docker: a master and a worker from the pinned
pyspark on loopback, the unchanged ``python -m jobs.stream --master spark://...``, and the
same topic processed by the job in local mode for comparison.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from conf.paths import PROJECT_ROOT
from jobs.stream import run
from tests.conftest import available_now, make_topic
from tests.producer_run import run_producer
from tests.spark_cluster import cluster_env, standalone_cluster

START = "2026-01-01T00:00:00Z"
# Columns stamped with the wall clock at write time differ between any two runs.
WALL_CLOCK = {"ingested_at", "detected_at"}
TABLES = ["readings", "quarantine", "sensor_stats_1m", "sensor_stats_5m", "alerts"]

pytestmark = pytest.mark.slow


def rows(spark, lake, name: str) -> list[tuple]:
    frame = spark.read.format("delta").load(str(lake / name))
    columns = sorted(c for c in frame.columns if c not in WALL_CLOCK)
    return sorted(tuple(r) for r in frame.select(*columns).collect())


@pytest.fixture(scope="module")
def lakes(spark, kafka, tmp_path_factory):
    """One topic through the job twice: in local mode, and on a standalone cluster."""
    tmp = tmp_path_factory.mktemp("cluster")
    topic, registry = make_topic(kafka, "cluster"), tmp / "fleet.jsonl"
    # No late or out-of-order injection: which window a late reading still reaches
    # depends on micro-batch boundaries, which differ between any two runs. Duplicates,
    # malformed records and every kind of incident are in.
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 8_000,
        "--sensors", 20, "--seed", 5, "--start-time", START, "--registry-out", registry,
        "--spike-rate", 2, "--sustained-rate", 1, "--silence-rate", 1,
        "--late-fraction", 0, "--out-of-order-fraction", 0,
        "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    local = tmp / "lake-local"
    run(available_now(kafka, topic, local, registry=registry), spark)

    on_cluster = tmp / "lake-cluster"
    with standalone_cluster(tmp / "spark") as cluster:
        job = subprocess.run(
            [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
             "--topic", topic, "--lake", str(on_cluster), "--registry", str(registry),
             "--trigger", "availableNow", "--master", cluster.master_url],
            capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
            env=cluster_env(tmp / "spark"),
        )  # fmt: skip
        state = cluster.state()
        applications = state.get("completedapps", []) + state.get("activeapps", [])
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    return {"local": local, "cluster": on_cluster, "applications": applications}


def test_the_job_ran_on_the_cluster(lakes) -> None:
    # The master saw the job as an application with executors on its worker.
    assert [app["name"] for app in lakes["applications"]] == ["sensorwatch-job"]


@pytest.mark.parametrize("name", TABLES)
def test_cluster_tables_equal_local_tables(spark, lakes, name: str) -> None:
    local, on_cluster = rows(spark, lakes["local"], name), rows(spark, lakes["cluster"], name)

    assert local, f"{name}: the local run wrote nothing to compare"
    assert on_cluster == local


def test_all_three_alert_rules_are_compared(spark, lakes) -> None:
    alerts = spark.read.format("delta").load(str(lakes["local"] / "alerts"))
    assert {r.rule for r in alerts.select("rule").distinct().collect()} == {
        "overheat_reading",
        "sustained_high",
        "sensor_silent",
    }
