"""Spark reads Kafka with format("kafka") and writes Delta with a checkpoint, exactly once."""

from __future__ import annotations

from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from tests.support.kafka_io import produce


def copy_topic_to_delta(spark: SparkSession, bootstrap: str, topic: str, lake: Path) -> None:
    """Run one availableNow query from the topic into a Delta table and wait for it."""
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
            "partition",
            "offset",
            "timestamp",
        )
        .writeStream.format("delta")
        .option("checkpointLocation", str(lake / "_checkpoints" / "raw"))
        .trigger(availableNow=True)
        .start(str(lake / "raw"))
    )
    query.awaitTermination(timeout=300)
    assert not query.isActive, "availableNow query did not finish within 300 s"
    assert query.exception() is None


def test_stream_from_kafka_into_delta_adds_only_new_rows(spark, kafka, new_topic, tmp_path) -> None:
    topic = new_topic("spark-smoke", partitions=6)
    first = produce(kafka.bootstrap, topic, [(f"s{i % 7}", f"first-{i}") for i in range(3000)])

    copy_topic_to_delta(spark, kafka.bootstrap, topic, tmp_path)
    table = spark.read.format("delta").load(str(tmp_path / "raw"))

    assert table.count() == 3000
    assert table.select("partition", "offset").distinct().count() == 3000
    assert {r.value for r in table.select("value").collect()} == {
        rec.value.decode() for rec in first
    }

    second = produce(kafka.bootstrap, topic, [(f"s{i % 7}", f"second-{i}") for i in range(1000)])
    copy_topic_to_delta(spark, kafka.bootstrap, topic, tmp_path)
    table = spark.read.format("delta").load(str(tmp_path / "raw"))

    assert table.count() == 4000
    assert table.select("partition", "offset").distinct().count() == 4000
    assert table.filter("value LIKE 'second-%'").count() == len(second) == 1000

    # A third run with nothing new in the topic commits nothing new.
    version_before = DeltaTable.forPath(spark, str(tmp_path / "raw")).history(1).first().version
    copy_topic_to_delta(spark, kafka.bootstrap, topic, tmp_path)
    version_after = DeltaTable.forPath(spark, str(tmp_path / "raw")).history(1).first().version
    assert version_after == version_before
    assert spark.read.format("delta").load(str(tmp_path / "raw")).count() == 4000
