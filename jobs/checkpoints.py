"""What to tell an operator whose query can no longer use its checkpoint."""

from __future__ import annotations

import re

from jobs.tables import Lake

# Spark's error classes for "this checkpoint was written by a different query".
INCOMPATIBLE = re.compile(
    r"STATEFUL_OPERATOR_NOT_MATCH|STATE_SCHEMA|StateSchemaNotCompatible|INVALID_CHECKPOINT"
    r"|STATE_STORE_(KEY|VALUE)_SCHEMA|CANNOT_LOAD_STATE_STORE|STREAM_FAILED.*checkpoint"
)

# Starting a query afresh re-reads its whole input: safe only if its output is rebuilt.
_FRESH_START = {
    "ingest": "do not start it afresh unless the topic still holds every record: a new "
    "checkpoint re-reads the topic and would append to readings and quarantine again. "
    "Restore the previous version of the job instead",
    "sensor_stats_1m": "to start it afresh, stop the job, move {checkpoint} aside and delete "
    "the table {table} (it is rebuilt from readings), then start the job",
    "sensor_stats_5m": "to start it afresh, stop the job, move {checkpoint} aside and delete "
    "the table {table} (it is rebuilt from readings; alerts are kept once by alert_id), "
    "then start the job",
    "sensor_silence": "to start it afresh, stop the job and move {checkpoint} aside (alerts "
    "are kept once by alert_id), then start the job",
}


def incompatible_checkpoint(error_text: str) -> bool:
    """True when Spark refused a checkpoint because the query changed."""
    return bool(INCOMPATIBLE.search(error_text))


def advice(query: str, lake: Lake) -> str:
    """What to do when ``query`` cannot reuse its checkpoint."""
    checkpoint = lake.checkpoint(query)
    what = _FRESH_START.get(query, "restore the previous version of the job")
    return (
        f"query {query} changed in a way its checkpoint {checkpoint} cannot follow "
        f"(its state was written by a different query). Either restore the previous "
        f"version of the query, or {what.format(checkpoint=checkpoint, table=lake.table(query))}."
    )
