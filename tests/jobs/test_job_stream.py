"""The streaming job against the real broker, checked against the producer's manifest."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from conf.settings.job import JobSettings
from jobs.stream import run
from producer.reading import IsoClock, Reading, encode
from tests.support.expected_stats import expected_windows
from tests.support.job_settings import available_now
from tests.support.kafka_io import produce
from tests.support.producer_run import read_jsonl, run_producer

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

START = "2026-01-01T00:00:00Z"
DATA_TABLES = ["readings", "quarantine", "sensor_stats_1m", "sensor_stats_5m"]


def job_settings(kafka, topic: str, lake) -> JobSettings:
    return available_now(kafka, topic, lake)


def table(spark, lake, name: str):
    return spark.read.format("delta").load(str(lake / name))


def versions(spark, lake) -> dict[str, int]:
    return {
        name: DeltaTable.forPath(spark, str(lake / name)).history(1).first().version
        for name in DATA_TABLES
    }


@pytest.fixture(scope="module")
def pipeline(spark, kafka, tmp_path_factory):
    """50 000 readings, every injection at 2 %, through the job (availableNow) twice."""
    from tests.support.kafka_io import make_topic

    tmp = tmp_path_factory.mktemp("pipeline")
    topic, manifest, lake = make_topic(kafka, "job"), tmp / "manifest.jsonl", tmp / "lake"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 50_000,
        "--sensors", 100, "--seed", 21, "--start-time", START, "--manifest", manifest,
        "--late-fraction", 0.02, "--out-of-order-fraction", 0.02,
        "--duplicate-fraction", 0.02, "--malformed-fraction", 0.02,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    settings = job_settings(kafka, topic, lake)
    run(settings, spark=spark)
    first = {name: table(spark, lake, name).count() for name in DATA_TABLES}
    first_versions = versions(spark, lake)
    run(settings, spark=spark)
    return {
        "lake": lake,
        "manifest": read_jsonl(manifest),
        "counts_after_first_run": first,
        "versions_after_first_run": first_versions,
    }


def test_every_offset_lands_exactly_once(spark, pipeline) -> None:
    lake, manifest = pipeline["lake"], pipeline["manifest"]
    positions = Counter(
        (r.kafka_partition, r.kafka_offset)
        for name in ("readings", "quarantine")
        for r in table(spark, lake, name).select("kafka_partition", "kafka_offset").collect()
    )

    assert set(positions.values()) == {1}, "an offset was written twice"
    assert set(positions) == {(line["partition"], line["offset"]) for line in manifest}


def test_counts_and_reasons_match_the_manifest(spark, pipeline) -> None:
    lake, manifest = pipeline["lake"], pipeline["manifest"]
    kinds = Counter(line["kind"] for line in manifest)
    labels = {
        (line["partition"], line["offset"]): line["malformation"]
        for line in manifest
        if line["kind"] == "malformed"
    }
    quarantine = table(spark, lake, "quarantine").collect()
    readings = table(spark, lake, "readings")

    assert len(quarantine) == kinds["malformed"] > 0
    assert {(q.kafka_partition, q.kafka_offset): q.error for q in quarantine} == labels
    assert readings.count() == 50_000 - kinds["malformed"]
    # Duplicates are kept in readings (one row per Kafka record) ...
    assert readings.select("event_id").distinct().count() == readings.count() - kinds["duplicate"]
    # ... with the values the producer sent.
    sent = {line["event_id"]: line for line in manifest if line["kind"] != "malformed"}
    for row in readings.limit(2000).collect():
        assert row.temperature_c == sent[row.event_id]["temperature_c"]
        assert row.event_time.astimezone(UTC) == datetime.fromisoformat(
            sent[row.event_id]["event_time"]
        )


@pytest.mark.parametrize(
    ("name", "size", "slide"), [("sensor_stats_1m", 60, 60), ("sensor_stats_5m", 300, 60)]
)
def test_window_statistics_equal_an_independent_computation(
    spark, pipeline, name: str, size: int, slide: int
) -> None:
    lake, manifest = pipeline["lake"], pipeline["manifest"]
    expected, touched_by_late = expected_windows(manifest, size, slide)
    metrics = table(spark, lake, "pipeline_metrics").filter(F.col("query") == "windows")
    watermark = metrics.agg(F.max("watermark")).first()[0].astimezone(UTC).timestamp()
    rows = table(spark, lake, name).collect()
    written = {(r.sensor_id, r.window_start.astimezone(UTC).timestamp()): r for r in rows}

    assert len(written) == len(rows), "a window was written twice"
    compared = 0
    for key, row in written.items():
        assert row.window_end.astimezone(UTC).timestamp() <= watermark, "window still open"
        if key in touched_by_late:
            continue
        want = expected[key]
        assert (row.readings, row.min_temperature_c, row.max_temperature_c) == (
            want.readings, want.low, want.high,
        ), key  # fmt: skip
        assert row.avg_temperature_c == pytest.approx(want.avg, abs=1e-9)
        compared += 1
    closed = {k for k in expected if k[1] + size <= watermark and k not in touched_by_late}
    assert closed <= set(written), "a closed window is missing"
    assert compared > 1000


def test_second_run_writes_nothing(spark, pipeline) -> None:
    lake = pipeline["lake"]

    assert {n: table(spark, lake, n).count() for n in DATA_TABLES} == pipeline[
        "counts_after_first_run"
    ]
    assert versions(spark, lake) == pipeline["versions_after_first_run"]


def test_pipeline_metrics_has_a_row_per_query_batch(spark, pipeline) -> None:
    rows = table(spark, pipeline["lake"], "pipeline_metrics").collect()
    per_query = Counter(r.query for r in rows)

    assert set(per_query) == {"ingest", "windows"}
    assert len({(r.query_id, r.batch_id) for r in rows}) == len(rows)
    assert sum(r.input_rows for r in rows if r.query == "ingest") == 50_000
    ingest = [r for r in rows if r.query == "ingest"]
    kinds = Counter(line["kind"] for line in pipeline["manifest"])
    assert sum(r.quarantined_rows for r in ingest) == kinds["malformed"]
    windows = [r for r in rows if r.query == "windows"]
    assert (
        sum(r.output_rows for r in windows)
        == table(spark, pipeline["lake"], "sensor_stats_1m").count()
    )
    assert all(r.batch_duration_ms > 0 and r.timestamp is not None for r in rows)


def test_reading_beyond_the_watermark_is_kept_but_not_counted(
    spark, kafka, new_topic, tmp_path
) -> None:
    topic, lake = new_topic("late"), tmp_path / "lake"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 3000,
        "--sensors", 10, "--seed", 2, "--start-time", START, "--late-fraction", 0,
        "--out-of-order-fraction", 0, "--duplicate-fraction", 0, "--malformed-fraction", 0,
        "--spike-rate", 0, "--sustained-rate", 0, "--silence-rate", 0,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    settings = job_settings(kafka, topic, lake)
    run(settings, spark=spark)
    first_window = F.col("window_start") == F.lit(datetime(2026, 1, 1, tzinfo=UTC))
    before = (
        table(spark, lake, "sensor_stats_1m")
        .filter(first_window)
        .filter(F.col("sensor_id") == "sensor-0001")
        .first()
    )
    assert before is not None and before.readings > 0

    # Sent after the watermark has moved ~40 minutes past it.
    when = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC).timestamp()
    late = Reading("late-0001", "sensor-0001", when, 22.0, 40.0, 90.0, 999_999)
    produce(
        kafka.bootstrap, topic, [("sensor-0001", encode(late, IsoClock().format(late.event_time)))]
    )
    run(settings, spark=spark)

    readings = table(spark, lake, "readings")
    assert readings.filter(F.col("event_id") == "late-0001").count() == 1
    after = (
        table(spark, lake, "sensor_stats_1m")
        .filter(first_window)
        .filter(F.col("sensor_id") == "sensor-0001")
        .collect()
    )
    assert [r.readings for r in after] == [before.readings], "the late reading changed a window"
    metrics = table(spark, lake, "pipeline_metrics").filter(F.col("query") == "windows")
    dropped = {r.query: r.dropped for r in metrics.groupBy("query").agg(
        F.sum("rows_dropped_by_watermark").alias("dropped")).collect()}  # fmt: skip
    assert dropped == {"windows": 1}


def test_a_start_killed_before_its_first_batch_starts_again(spark, kafka, tmp_path) -> None:
    """A kill -9 while a query wrote its first offsets leaves a hidden temporary file in
    ``offsets``; Spark then refuses a new query there (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
    unless the job clears it."""
    from tests.support.kafka_io import make_topic

    topic, lake = make_topic(kafka, "unfinished"), tmp_path / "lake"
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 400,
        "--sensors", 4, "--seed", 8, "--start-time", START,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    left = [".0.0b6e2c1d-7f3a-4d5e-8a9b-1c2d3e4f5a6b.tmp",
            "..0.0b6e2c1d-7f3a-4d5e-8a9b-1c2d3e4f5a6b.tmp.crc"]  # fmt: skip
    for query in ("ingest", "windows"):
        offsets = lake / "_checkpoints" / query / "offsets"
        offsets.mkdir(parents=True)
        for name in left:
            (offsets / name).write_text("v1\n")

    run(job_settings(kafka, topic, lake), spark=spark)

    landed = table(spark, lake, "readings").count() + table(spark, lake, "quarantine").count()
    assert landed == 400
    assert table(spark, lake, "sensor_stats_1m").count() > 0
    for query in ("ingest", "windows"):
        assert (lake / "_checkpoints" / query / "offsets" / "0").exists()
        assert not any((lake / "_checkpoints" / query / "offsets" / name).exists() for name in left)
