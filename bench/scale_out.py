"""Scale-out figures (docs/architecture.md#performance-targets): what the driver receives
per micro-batch against the batch's row count, and the job's rows/s with one and with two
executor cores."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from pyspark.sql import SparkSession

from bench.measure import Bench, Topic, job_settings
from bench.stats import rate
from conf.paths import PROJECT_ROOT
from lake.layout import PIPELINE_METRICS
from local_stack.spark_cluster import cluster_env, standalone_cluster

# The description Structured Streaming gives every Spark job of a micro-batch:
# "<query name>\nid = <uuid>\nrunId = <uuid>\nbatch = <n>" (the UI shows <br/> for \n).
_BATCH = re.compile(
    r"^(?P<query>[^\n<]*)(?:\n|<br/>)id = \S+(?:\n|<br/>)runId = (?P<run>\S+)"
    r"(?:\n|<br/>)batch = (?P<batch>\d+)"
)


def task_result_bytes(spark: SparkSession) -> dict[tuple[str, int], int]:
    """(query run id, batch id) -> bytes of task results the driver received for the batch's
    Spark jobs: the sum of their stages' ``resultSize`` in Spark's status store (what
    ``spark.driver.maxResultSize`` limits, per job)."""
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    no_quantiles = gateway.new_array(gateway.jvm.double, 0)
    stages = store.stageList(None, False, False, no_quantiles, None)
    by_stage: dict[int, int] = defaultdict(int)
    for i in range(stages.size()):
        stage = stages.apply(i)
        by_stage[stage.stageId()] += stage.resultSize()
    found: dict[tuple[str, int], int] = defaultdict(int)
    jobs = store.jobsList(None)
    for i in range(jobs.size()):
        job = jobs.apply(i)
        described = job.description()
        match = _BATCH.match(described.get()) if described.isDefined() else None
        if match:
            ids = job.stageIds()
            key = (match["run"], int(match["batch"]))
            found[key] += sum(by_stage[ids.apply(k)] for k in range(ids.size()))
    return dict(found)


def driver_results(bench: Bench, topic: Topic, batch_sizes: tuple[int, ...]) -> dict[str, Any]:
    """The job (availableNow, every query) on the topic once per ``maxOffsetsPerTrigger``
    in ``batch_sizes``: per ingest micro-batch, its rows and the task result bytes the
    driver received. Flat in the rows means no row crosses to the driver."""
    from jobs.stream import run

    points = []
    for size in batch_sizes:
        lake = bench.workdir / f"lake-results-{size}"
        settings = job_settings(
            bench, topic.name, lake, trigger="availableNow", max_offsets_per_trigger=size,
            realtime=False,
        )  # fmt: skip
        bench.progress.take()
        run(settings, bench.spark)
        events = bench.progress.take()
        received = task_result_bytes(bench.spark)
        shutil.rmtree(lake, ignore_errors=True)
        for query in ("ingest", "windows"):
            batches = [
                (int(e["numInputRows"]), received.get((e["runId"], int(e["batchId"])), 0))
                for e in events
                if e.get("name") == query and e.get("numInputRows")
            ]
            if not batches:
                continue
            received_kb = [b / 1024 for _, b in batches]
            points.append(
                {
                    "query": query,
                    "max_offsets_per_trigger": size,
                    "batches": len(batches),
                    "rows_per_batch": round(sum(r for r, _ in batches) / len(batches)),
                    "result_kb_per_batch": round(sum(received_kb) / len(batches), 1),
                    "result_kb_max": round(max(received_kb), 1),
                }
            )
    return {"messages": topic.messages, "points": points}


def _processing_rate(lake: Path, messages: int) -> dict[str, Any]:
    """rows/s from a lake's pipeline_metrics: the topic's messages over the span from the
    first batch's start to the last batch's end, any query (start-up excluded)."""
    rows = DeltaTable(str(lake / PIPELINE_METRICS)).to_pyarrow_table().to_pylist()
    starts = [r["timestamp"] for r in rows]
    ends = [r["timestamp"] + timedelta(milliseconds=r["batch_duration_ms"]) for r in rows]
    seconds = (max(ends) - min(starts)).total_seconds()
    ingested = sum(r["input_rows"] for r in rows if r["query"] == "ingest")
    return {
        "seconds": round(seconds, 2),
        "rows_per_s": round(rate(messages, seconds)),
        "complete": ingested == messages,
    }


def _job(bench: Bench, topic: Topic, lake: Path, master: str, env: dict[str, str]) -> float:
    """``python -m jobs.stream`` (availableNow, every query) as its own process; its wall
    seconds, JVM start included."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", bench.bootstrap,
         "--topic", topic.name, "--lake", str(lake), "--trigger", "availableNow",
         "--master", master, "--realtime", "false"],  # the lake path's scale-out
        capture_output=True, text=True, cwd=PROJECT_ROOT, env=env, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the job on {master} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def core_scaling(bench: Bench, topic: Topic, cluster: bool = True) -> dict[str, Any]:
    """The job's rows/s with one and with two executor cores, each run a process of its
    own on the same topic: local[1] against local[2], and (``cluster``) a standalone
    cluster of one worker with one core against two workers with one core each."""
    runs: list[dict[str, Any]] = []

    def measure(label: str, master: str, cores: int, env: dict[str, str]) -> None:
        # No brackets in the path: delta-rs takes "local[1]" for a bad URL and panics.
        lake = bench.workdir / f"lake-cores-{re.sub(r'[^a-z0-9]+', '-', label)}"
        bench.say(f"scale-out: {label} ({cores} executor core(s)) ...")
        wall = _job(bench, topic, lake, master, env)
        runs.append(
            {"setup": label, "cores": cores, "wall_s": round(wall, 2),
             **_processing_rate(lake, topic.messages)}
        )  # fmt: skip
        shutil.rmtree(lake, ignore_errors=True)

    for cores in (1, 2):
        measure(f"local[{cores}]", f"local[{cores}]", cores, dict(os.environ))
    if cluster:
        for workers in (1, 2):
            work = bench.workdir / f"spark-{workers}"
            with standalone_cluster(work, workers=workers, cores=1) as running:
                measure(f"standalone {workers}x1", running.master_url, workers, cluster_env(work))
            shutil.rmtree(work, ignore_errors=True)
    ratios = {}
    for kind in ("local", "standalone"):
        one = next((r for r in runs if r["setup"].startswith(kind) and r["cores"] == 1), None)
        two = next((r for r in runs if r["setup"].startswith(kind) and r["cores"] == 2), None)
        if one and two and one["rows_per_s"]:
            ratios[kind] = round(two["rows_per_s"] / one["rows_per_s"], 2)
    return {"messages": topic.messages, "runs": runs, "two_over_one": ratios}
