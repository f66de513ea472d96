"""The readings topic as Spark's Kafka source, read the same way by the ingest query and
the real-time path."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from conf.kafka_client import spark_options
from conf.settings.job import JobSettings

# A micro-batch's tasks read a known range of offsets, and each task's read of a topic
# that nothing is writing to ended with a wait of Kafka's fetch.max.wait.ms (500 ms by
# default) for records that were not coming: half a second per wave of tasks. An ingest
# batch of 100 readings over 6 partitions on 2 cores (three waves) took 1.9 s with the
# default and 0.4 s with 10 ms (docs/benchmarks.md). Real-time mode's long-running tasks
# wait for new records by design: they keep the default, which a shorter wait would only
# turn into more empty fetches. A fetch.max.wait.ms in the job's kafka_properties wins
# over both (only the job's: librdkafka, the producer's client, refuses that name).
RANGE_FETCH_WAIT_MS = 10


def kafka_source_options(settings: JobSettings, ranged: bool = True) -> dict[str, str]:
    """Options of Spark's Kafka source for the topic; ``ranged``: its tasks read the known
    offset range of a micro-batch (not real-time mode's open-ended reads)."""
    waits = {"kafka.fetch.max.wait.ms": str(RANGE_FETCH_WAIT_MS)} if ranged else {}
    return {
        **waits,
        **spark_options(settings),
        "subscribe": settings.topic,
        "startingOffsets": settings.starting_offsets,
        # true: offsets that vanished (retention, a recreated topic) stop the job with an
        # error instead of being skipped; see fail_on_data_loss in conf/pipeline.toml.
        "failOnDataLoss": str(settings.fail_on_data_loss).lower(),
        # Ride out a broker restart: keep asking for offsets for about a minute (Spark's
        # default gives up after 3 tries 10 ms apart, failing the query on any blip).
        "fetchOffset.numRetries": "60",
        "fetchOffset.retryIntervalMs": "1000",
    }


def kafka_records(
    spark: SparkSession, settings: JobSettings, bounded: bool = True, ranged: bool = True
) -> DataFrame:
    """The topic as a stream of Kafka records (key, value, partition, offset, timestamp);
    ``bounded``: at most ``max_offsets_per_trigger`` per micro-batch; ``ranged``: see
    :func:`kafka_source_options`."""
    reader = spark.readStream.format("kafka").options(**kafka_source_options(settings, ranged))
    if bounded and settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", settings.max_offsets_per_trigger)
    return reader.load()
