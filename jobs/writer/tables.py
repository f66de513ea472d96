"""The Delta tables' schemas, the one definition, keyed by the tables' names
(lake/layout.py: where each table lives), and their creation."""

from __future__ import annotations

from deltalake import DeltaTable
from pyspark.sql.types import (
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from contract.event import FIELDS
from jobs.spark.arrow_schema import arrow_schema
from lake import layout as names
from lake.layout import Lake
from lake.storage import delta_options

SPARK_TYPES: dict[type, DataType] = {str: StringType(), float: DoubleType(), int: LongType()}

# One Kafka message's JSON as docs/architecture.md#the-event defines it (event_time still
# text): the schema the job's fast parse reads with, and the benchmark's minimal query.
EVENT_JSON = StructType([StructField(name, SPARK_TYPES[kind]) for name, kind in FIELDS.items()])

KAFKA_COLUMNS = [
    StructField("kafka_partition", IntegerType()),
    StructField("kafka_offset", LongType()),
    StructField("kafka_timestamp", TimestampType()),
]

# The event's fields as docs/architecture.md#the-event defines them, with event_time
# parsed to a timestamp.
READING_COLUMNS = [
    StructField(name, TimestampType() if name == "event_time" else SPARK_TYPES[kind])
    for name, kind in FIELDS.items()
]

READINGS_SCHEMA = StructType(
    [*READING_COLUMNS, *KAFKA_COLUMNS, StructField("ingested_at", TimestampType())]
)

QUARANTINE_SCHEMA = StructType(
    [
        StructField("raw_value", StringType()),
        StructField("error", StringType()),
        *KAFKA_COLUMNS,
        StructField("ingested_at", TimestampType()),
    ]
)

# A sensor's event-time window and how many readings it holds: the key of every
# windowed table.
WINDOW_COLUMNS = [
    StructField("sensor_id", StringType()),
    StructField("window_start", TimestampType()),
    StructField("window_end", TimestampType()),
    StructField("readings", LongType()),
]

SENSOR_STATS_SCHEMA = StructType(
    [
        *WINDOW_COLUMNS,
        StructField("avg_temperature_c", DoubleType()),
        StructField("min_temperature_c", DoubleType()),
        StructField("max_temperature_c", DoubleType()),
        StructField("avg_humidity_pct", DoubleType()),
    ]
)

PIPELINE_METRICS_SCHEMA = StructType(
    [
        StructField("query", StringType()),
        StructField("query_id", StringType()),
        StructField("batch_id", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("input_rows", LongType()),
        StructField("input_rows_per_second", DoubleType()),
        StructField("processed_rows_per_second", DoubleType()),
        StructField("batch_duration_ms", LongType()),
        StructField("watermark", TimestampType()),
        StructField("rows_dropped_by_watermark", LongType()),
        StructField("state_rows", LongType()),
        StructField("output_rows", LongType()),
        StructField("quarantined_rows", LongType()),
    ]
)

ALERTS_SCHEMA = StructType(
    [
        StructField("alert_id", StringType()),
        StructField("sensor_id", StringType()),
        StructField("site", StringType()),
        StructField("rule", StringType()),
        StructField("severity", StringType()),
        StructField("window_start", TimestampType()),
        StructField("window_end", TimestampType()),
        StructField("observed_value", DoubleType()),
        StructField("threshold", DoubleType()),
        StructField("readings", LongType()),
        StructField("detected_at", TimestampType()),
    ]
)

# One row per episode of one rule on one sensor (jobs/alerting/incidents.py): what ops act on and
# what the notifier (ops/notify.py) keeps Alertmanager in sync with.
INCIDENTS_SCHEMA = StructType(
    [
        StructField("incident_id", StringType()),
        StructField("sensor_id", StringType()),
        StructField("site", StringType()),
        StructField("rule", StringType()),
        StructField("severity", StringType()),
        StructField("status", StringType()),  # firing | resolved
        StructField("started_at", TimestampType()),
        StructField("last_seen_at", TimestampType()),
        StructField("resolved_at", TimestampType()),
        StructField("peak_value", DoubleType()),
        StructField("threshold", DoubleType()),
        StructField("alert_count", LongType()),
        # Wall clock: when the job first wrote the row and last changed it. An incident
        # written resolved straight away (it opened and ended between two micro-batches)
        # has both equal: the notifier then shows it firing briefly, so it is notified.
        StructField("created_at", TimestampType()),
        StructField("updated_at", TimestampType()),
    ]
)

# One row per rule set the job ran with (jobs/alerting/rule_changes.py): when it took it up, its
# version (contract.rules.model.RuleSet.version), the rules as JSON and the file they came from.
RULE_CHANGES_SCHEMA = StructType(
    [
        StructField("changed_at", TimestampType()),
        StructField("version", StringType()),
        StructField("rule_count", LongType()),
        StructField("rules", StringType()),
        StructField("source", StringType()),
    ]
)

# A one-minute pane per sensor: what sensor_stats_1m, sensor_stats_5m, the window rules and
# the absence rules are assembled from (jobs/windows/panes.py). Kept with the sum, min and max of
# every measured field and the first/last event time, so the 5-minute windows and silences
# that span several micro-batches are exact. (Humidity's min and max and battery's columns
# came later: they are last, where the start-up guard adds them to an earlier lake.)
PANES_SCHEMA = StructType(
    [
        *WINDOW_COLUMNS,
        StructField("sum_temperature_c", DoubleType()),
        StructField("min_temperature_c", DoubleType()),
        StructField("max_temperature_c", DoubleType()),
        StructField("sum_humidity_pct", DoubleType()),
        StructField("first_reading_at", TimestampType()),
        StructField("last_reading_at", TimestampType()),
        StructField("min_humidity_pct", DoubleType()),
        StructField("max_humidity_pct", DoubleType()),
        StructField("sum_battery_pct", DoubleType()),
        StructField("min_battery_pct", DoubleType()),
        StructField("max_battery_pct", DoubleType()),
    ]
)

# The tables of docs/architecture.md#tables (the contract).
TABLES: dict[str, StructType] = {
    names.READINGS: READINGS_SCHEMA,
    names.QUARANTINE: QUARANTINE_SCHEMA,
    names.SENSOR_STATS_1M: SENSOR_STATS_SCHEMA,
    names.SENSOR_STATS_5M: SENSOR_STATS_SCHEMA,
    names.ALERTS: ALERTS_SCHEMA,
    names.INCIDENTS: INCIDENTS_SCHEMA,
    names.PIPELINE_METRICS: PIPELINE_METRICS_SCHEMA,
    names.RULE_CHANGES: RULE_CHANGES_SCHEMA,
}

# The learned baselines of the deviation rules (jobs/alerting/learned_rules.py): one row
# per (sensor, rule) for each windows batch that moved it, tagged with the writer (the
# query and its checkpoint: a new checkpoint learns afresh) and the batch; the newest
# before a batch is where that batch starts.
BASELINES_SCHEMA = StructType(
    [
        StructField("sensor_id", StringType()),
        StructField("rule", StringType()),
        StructField("params", StringType()),
        StructField("writer", StringType()),
        StructField("batch_id", LongType()),
        StructField("mean", DoubleType()),
        StructField("var", DoubleType()),
        StructField("learned_s", DoubleType()),
        StructField("taught", LongType()),
        StructField("last_pane", TimestampType()),
        StructField("breach_since", TimestampType()),
    ]
)

# The job's own working tables (not part of the contract; rebuilt from readings with the
# query that writes them). The leading underscore keeps them apart from the contract's.
INTERNAL_TABLES: dict[str, StructType] = {
    names.PANES: PANES_SCHEMA,
    names.BASELINES: BASELINES_SCHEMA,
}
ALL_TABLES: dict[str, StructType] = {**TABLES, **INTERNAL_TABLES}


# Delta writes a log checkpoint every this many commits, inside the commit that reaches it:
# with ingest committing three tables every trigger, Delta's default of 10 stalled one
# micro-batch in ten by a second or more (docs/benchmarks.md). Readers replay at most this
# many small JSON commits after the last checkpoint.
CHECKPOINT_INTERVAL = 100


def columns(schema: StructType, names: str) -> list[StructField]:
    """The fields ``names`` (separated by spaces) of a table's ``schema``, in that order:
    rows that carry some of a table's columns (what a task or a function returns) take
    their types from it."""
    fields = {field.name: field for field in schema.fields}
    return [fields[name] for name in names.split()]


def create_tables(lake: Lake) -> None:
    """Create every table that does not exist yet (empty, with its schema).

    Readers (the alerts CLI, the dashboard) then find every table from the start. Created
    with delta-rs: milliseconds each, where Spark took a second or more for the lot.
    """

    for name, schema in ALL_TABLES.items():
        DeltaTable.create(
            lake.table(name),
            storage_options=delta_options(lake.root),
            schema=arrow_schema(schema),
            mode="ignore",  # an existing table is left as it is
            configuration={"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)},
        )
