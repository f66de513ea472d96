"""Kafka records to readings or quarantine: parsing and validation, pure DataFrame functions.

Every record gets exactly one outcome: a valid reading, or an ``error`` naming the first
problem found, in this order: null value, bytes that are not UTF-8, invalid JSON, not an
object, a missing field, a field of the wrong JSON type, an unparseable event time, a
value out of range, a key that is not the reading's sensor (empty, or another's).

Two paths, one outcome. The common case, a well-formed reading, is recognised by
``from_json`` with the event's fixed schema (fast: one pass of a streaming JSON parser).
Only the records it cannot vouch for take the thorough path: JSON parsed into Spark's
VARIANT type, which keeps each value's JSON type (an integer is BIGINT, ``12.0`` is
DECIMAL, ``"12"`` is STRING), so type errors are told apart from missing fields, and
nothing is coerced silently. The thorough path decides those records alone, so the
reasons are exactly what it alone would give; the fast path only ever says "valid", and
only for records the thorough path would also call valid with the same values.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from contract.event import (
    EVENT_TIME_PATTERN,
    FIELDS,
    INVALID_EVENT_TIME,
    INVALID_JSON,
    INVALID_UTF8,
    KEY_MISMATCH,
    KEY_WITHOUT_SENSOR,
    MISSING_FIELD,
    NOT_AN_OBJECT,
    NULL_VALUE,
    OUT_OF_RANGE,
    RANGES,
    WRONG_TYPE,
)
from jobs.spark.sql_text import projection
from jobs.writer.tables import EVENT_JSON, QUARANTINE_SCHEMA, READINGS_SCHEMA, SPARK_TYPES

# schema_of_variant() names of the JSON types each field may have.
_JSON_TYPES = {
    str: r"^STRING$",
    float: r"^(BIGINT|INT|SMALLINT|TINYINT|DOUBLE|FLOAT|DECIMAL\(\d+,\d+\))$",
    int: r"^(BIGINT|INT|SMALLINT|TINYINT)$",
}


def _json_type(doc: Column, field: str) -> Column:
    """The JSON type of a field: NULL when absent, VOID when JSON null."""
    return F.schema_of_variant(F.variant_get(doc, f"$.{field}", "variant"))


# The fast path reads with EVENT_JSON. from_json refuses a JSON string for a number, and a
# non-integer for a long (the field comes back null), but turns any JSON value into text
# for a string field: hence _NOT_TEXT below.
# What a non-string JSON value looks like once from_json made text of it (a number, a
# boolean, an object or array): such a string field is left to the thorough path.
_NOT_TEXT = r"^([-+0-9.eE]+|true|false|[\[{].*)$"


def _event_time(text: Column) -> Column:
    # The time must look like ISO-8601 with a zone before Spark may parse it.
    return F.when(text.rlike(EVENT_TIME_PATTERN), F.try_to_timestamp(text))


def _key_fits(key: Column, sensor_id: Column) -> Column:
    """True where the record's key is null or names the reading's sensor."""
    return key.isNull() | (key == F.encode(sensor_id, "UTF-8"))


def _fast_valid(fast: Column, event_time: Column, key: Column, text: Column) -> Column:
    """True where the fast parse (with its event time parsed) alone proves a valid reading.
    from_json takes bytes that are not UTF-8 inside a string as they are: checked here."""
    ok = fast.isNotNull() & event_time.isNotNull() & _key_fits(key, fast["sensor_id"])
    ok &= F.is_valid_utf8(text)
    for name, kind in FIELDS.items():
        ok &= fast[name].isNotNull()
        if kind is str:
            ok &= ~fast[name].rlike(_NOT_TEXT)
    for name, (low, high) in RANGES.items():
        ok &= fast[name].between(low, high)
    return ok


def parse_records(records: DataFrame) -> DataFrame:
    """Kafka source rows -> one row per record with the reading's columns and ``error``.

    Input columns: ``key`` and ``value`` (binary), ``partition``, ``offset``,
    ``timestamp``. Output: the reading columns (null where invalid), ``kafka_*``,
    ``raw_value`` (the value as text; for bytes that are not UTF-8, base64) and ``error``
    (null for a valid reading).
    """
    text = F.col("value").cast("string")
    fast = records.select(
        "*", text.alias("raw_value"), F.from_json(text, EVENT_JSON).alias("fast")
    ).withColumn("fast_time", _event_time(F.col("fast.event_time")))
    valid = _fast_valid(F.col("fast"), F.col("fast_time"), F.col("key"), F.col("raw_value"))
    fast = fast.withColumn("fast_valid", F.coalesce(valid, F.lit(False)))
    # The thorough parse, only where the fast one could not vouch for the record.
    doc = F.when(~F.col("fast_valid"), F.try_parse_json(F.col("raw_value")))
    typed = fast.select(
        "raw_value",
        F.col("key").alias("kafka_key"),
        F.col("value").alias("raw_bytes"),
        "fast",
        "fast_time",
        "fast_valid",
        doc.alias("doc"),
        F.schema_of_variant(doc).alias("doc_type"),
        *(_json_type(doc, name).alias(f"type_{name}") for name in FIELDS),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.col("timestamp").alias("kafka_timestamp"),
    )
    fast_value = F.col("fast")
    values = [
        F.when(
            F.col("fast_valid"),
            F.col("fast_time") if name == "event_time" else fast_value[name],
        )
        .otherwise(
            _event_time(F.try_variant_get("doc", "$.event_time", "string"))
            if name == "event_time"
            else F.try_variant_get("doc", f"$.{name}", SPARK_TYPES[kind].simpleString())
        )
        .alias(name)
        for name, kind in FIELDS.items()
    ]

    error = F.when(F.col("fast_valid"), F.lit(None).cast("string"))
    error = error.when(F.col("raw_value").isNull(), F.lit(NULL_VALUE))
    error = error.when(~F.is_valid_utf8(F.col("raw_value")), F.lit(INVALID_UTF8))
    error = error.when(F.col("doc").isNull(), F.lit(INVALID_JSON))
    error = error.when(~F.col("doc_type").startswith("OBJECT"), F.lit(NOT_AN_OBJECT))
    for name in FIELDS:
        absent = F.col(f"type_{name}").isNull() | (F.col(f"type_{name}") == "VOID")
        error = error.when(absent, F.lit(f"{MISSING_FIELD}:{name}"))
    for name, kind in FIELDS.items():
        error = error.when(
            ~F.col(f"type_{name}").rlike(_JSON_TYPES[kind]), F.lit(f"{WRONG_TYPE}:{name}")
        )
    error = error.when(F.col("event_time").isNull(), F.lit(INVALID_EVENT_TIME))
    for name, (low, high) in RANGES.items():
        error = error.when(~F.col(name).between(low, high), F.lit(f"{OUT_OF_RANGE}:{name}"))
    key = F.col("kafka_key")
    error = error.when(F.length(key) == 0, F.lit(KEY_WITHOUT_SENSOR))
    error = error.when(~_key_fits(key, F.col("sensor_id")), F.lit(KEY_MISMATCH))

    parsed = typed.select("*", *values).withColumn("error", error)
    raw = F.when(F.col("error") == INVALID_UTF8, F.base64("raw_bytes")).otherwise(
        F.col("raw_value")
    )
    return parsed.withColumn("raw_value", raw).drop(
        "kafka_key", "raw_bytes", "fast", "fast_time", "fast_valid", "doc", "doc_type",
        *(f"type_{name}" for name in FIELDS),
    )  # fmt: skip


# Every column of readings and of quarantine, once: what each ingest task receives.
INGESTED = StructType(
    list({f.name: f for f in (*READINGS_SCHEMA.fields, *QUARANTINE_SCHEMA.fields)}.values())
)


def to_ingested(parsed: DataFrame, ingested_at: Column) -> DataFrame:
    """Every record of a micro-batch with the columns of both ``readings`` and
    ``quarantine`` (null where they do not apply), for one pass by each ingest task;
    :func:`split_ingested` divides them there. The raw text is kept for bad records only
    (only quarantine keeps it): what the tasks take from the JVM is a fraction of the size.
    One projection in SQL text (jobs/spark/sql_text.py projection): it is built again in
    every micro-batch."""
    computed = {
        "raw_value": "CASE WHEN `error` IS NOT NULL THEN `raw_value` END",
        "ingested_at": "`_ingested_at`",
    }
    stamped = parsed.select("*", ingested_at.alias("_ingested_at"))
    return stamped.selectExpr(*projection(INGESTED, computed))


def split_ingested(batch: pa.Table) -> tuple[pa.Table, pa.Table]:
    """:func:`to_ingested`'s rows as Arrow (an ingest task's share), divided into the
    ``readings`` rows (no error) and the ``quarantine`` rows, each in its table's columns."""
    valid = pc.is_null(batch["error"])
    readings = batch.filter(valid).select(READINGS_SCHEMA.fieldNames())
    quarantine = batch.filter(pc.invert(valid)).select(QUARANTINE_SCHEMA.fieldNames())
    return readings, quarantine
