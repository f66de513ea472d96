"""The session builder gives a local, loopback-bound Spark with Delta and the Kafka source."""

from __future__ import annotations

from delta.tables import DeltaTable

from jobs.spark_session import spark_conf


def test_session_is_local_on_loopback_with_delta(spark) -> None:
    conf = spark.sparkContext.getConf()

    assert spark.sparkContext.master.startswith("local")
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert int(spark.conf.get("spark.sql.shuffle.partitions")) <= 8
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert "HDFSBacked" in spark.conf.get("spark.sql.streaming.stateStore.providerClass")
    jars = conf.get("spark.jars")
    assert "spark-sql-kafka-0-10_2.13" in jars and "delta-spark_2.13" in jars


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
