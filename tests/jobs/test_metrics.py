"""The job's Prometheus metrics agree with its tables (jobs/metrics.py): one run of
the job over a topic with every rule's incidents, duplicates and malformed records, in
several micro-batches; then each figure is compared with pipeline_metrics and with the
rows the tables hold."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client import generate_latest

from jobs.metrics import JobMetrics
from jobs.stream import run
from lake.reader import LakeReader
from tests.support.job_settings import available_now
from tests.support.kafka_io import make_topic
from tests.support.lake_rows import produce_comparable
from tests.support.metrics import samples

pytestmark = pytest.mark.pipeline


def by(got: dict, name: str, label: str) -> dict[str, float]:
    return {
        dict(labels)[label]: value
        for (sample, labels), value in got.items()
        if sample == name and label in dict(labels)
    }


def test_the_metrics_agree_with_pipeline_metrics_and_the_tables(spark, kafka, tmp_path) -> None:
    topic, registry, lake = make_topic(kafka, "prom"), tmp_path / "fleet.jsonl", tmp_path / "lake"
    produce_comparable(
        kafka.bootstrap, topic, registry, count=3_000, sensors=10, seed=36,
        start="2026-03-01T10:00:00Z",
    )  # fmt: skip
    metrics = JobMetrics()
    settings = available_now(kafka, topic, lake, registry=registry, max_offsets_per_trigger=700)
    run(settings, spark, metrics=metrics)

    got = samples(generate_latest(metrics.registry).decode())
    reader = LakeReader(str(lake))
    table = {name: reader.read(name).to_pylist() for name in
             ("pipeline_metrics", "readings", "quarantine", "alerts")}  # fmt: skip
    progress = table["pipeline_metrics"]
    ingest = [r for r in progress if r["query"] == "ingest"]
    assert len(ingest) >= 4, "the run should take several micro-batches"

    inputs = by(got, "sensorwatch_input_rows_total", "query")
    outputs = by(got, "sensorwatch_output_rows_total", "query")
    batches = by(got, "sensorwatch_batch_duration_seconds_count", "query")
    for query in {r["query"] for r in progress}:
        rows = [r for r in progress if r["query"] == query]
        assert inputs[query] == sum(r["input_rows"] for r in rows), query
        assert outputs[query] == sum(r["output_rows"] for r in rows), query
        assert batches[query] == len(rows), query
    # Every offset landed once: ingest read as many rows as the two tables hold.
    assert inputs["ingest"] == len(table["readings"]) + len(table["quarantine"])

    quarantined = by(got, "sensorwatch_quarantined_records_total", "reason")
    assert quarantined == dict(Counter(r["error"] for r in table["quarantine"]))
    assert sum(quarantined.values()) == sum(r["quarantined_rows"] for r in ingest) > 0

    raised = by(got, "sensorwatch_alerts_total", "rule")
    assert raised == dict(Counter(a["rule"] for a in table["alerts"]))
    overheat = sum(1 for a in table["alerts"] if a["rule"] == "overheat_reading")
    latency = by(got, "sensorwatch_alert_latency_seconds_count", "path")
    assert latency == {"lake": overheat} and overheat > 0

    # Against the topic: each of its partitions reported, and nothing left behind its end
    # once the run has read it all.
    behind = by(got, "sensorwatch_kafka_records_behind", "partition")
    assert behind == {str(p): 0 for p in range(6)}

    commits = by(got, "sensorwatch_commit_duration_seconds_count", "table")
    for name in ("readings", "quarantine", "alerts", "incidents"):
        assert commits.get(name, 0) > 0, f"no commit of {name} timed: {commits}"
    assert got[("sensorwatch_lake_lease_held", ())] == 0  # handed back at the end
