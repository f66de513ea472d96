"""Reading a query's checkpoint: the watermark of a batch, and what to tell an operator
whose query can no longer use its checkpoint."""

from __future__ import annotations

import json
import re
from datetime import datetime

from conf.lake_location import join
from contract.times import from_epoch_ms
from lake.layout import (
    BASELINES,
    PANES,
    QUARANTINE,
    READINGS,
    SENSOR_STATS_1M,
    SENSOR_STATS_5M,
    Lake,
)
from lake.storage import delete_file, list_names, read_text

# Spark's error classes for "this checkpoint was written by a different query".
INCOMPATIBLE = re.compile(
    r"STATEFUL_OPERATOR_NOT_MATCH|STATE_SCHEMA|StateSchemaNotCompatible|INVALID_CHECKPOINT"
    r"|STATE_STORE_(KEY|VALUE)_SCHEMA|CANNOT_LOAD_STATE_STORE|STREAM_FAILED.*checkpoint"
)

# Starting a query afresh re-reads its whole input: safe only if its output is rebuilt.
_FRESH_START = {
    "ingest": "do not start it afresh unless the topic still holds every record: a new "
    f"checkpoint re-reads the topic and would append to {READINGS} and {QUARANTINE} again. "
    "Restore the previous version of the job instead",
    "windows": "to start it afresh, stop the job, move {checkpoint} aside and delete the "
    f"tables {SENSOR_STATS_1M}, {SENSOR_STATS_5M}, {PANES} and {BASELINES} (they are "
    f"rebuilt from {READINGS}; alerts are kept once by alert_id), then start the job",
}


def incompatible_checkpoint(error_text: str) -> bool:
    """True when Spark refused a checkpoint because the query changed."""
    return bool(INCOMPATIBLE.search(error_text))


# What Spark says when another run of the query wrote the checkpoint entry it was about to
# write (the log's create-if-absent: a rename onto an existing file). For the commit log
# Spark 4.2 raises java.util's ConcurrentModificationException, whose message alone is
# what the query's failure carries (a standby's windows query after a takeover, CI
# 2026-12-07).
CONCURRENT = re.compile(
    r"CONCURRENT_STREAM_LOG_UPDATE|SparkConcurrentModificationException"
    r"|FileAlreadyExistsException|Multiple streaming queries are concurrently using "
)


def concurrent_checkpoint_update(error_text: str) -> bool:
    """True when a query failed on a checkpoint entry another run of it wrote."""
    return bool(CONCURRENT.search(error_text))


def advice(query: str, lake: Lake) -> str:
    """What to do when ``query`` cannot reuse its checkpoint."""
    checkpoint = lake.checkpoint(query)
    what = _FRESH_START.get(query, "restore the previous version of the job")
    return (
        f"query {query} changed in a way its checkpoint {checkpoint} cannot follow "
        f"(its state was written by a different query). Either restore the previous "
        f"version of the query, or {what.format(checkpoint=checkpoint)}."
    )


def clear_unfinished_start(checkpoint: str) -> list[str]:
    """Remove what a query killed while writing its first offsets left in ``checkpoint``;
    returns the names removed (usually none).

    Spark writes ``offsets/0`` as a hidden temporary file (``.0.<uuid>.tmp``, and its
    ``.crc`` on a local disk) renamed into place. A kill -9 in between leaves the hidden
    file and no batch: at the next start Spark takes the query for a new one, finds its
    ``offsets`` folder not empty and refuses to start (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY),
    for good. Only hidden files go, and only while no batch was ever planned and nothing
    was committed: anything else in a checkpoint is left for Spark to judge.
    """
    offsets, commits = join(checkpoint, "offsets"), join(checkpoint, "commits")
    planned = list_names(offsets)
    if any(not name.startswith(".") for name in planned):
        return []
    if any(not name.startswith(".") for name in list_names(commits)):
        return []
    for name in planned:
        delete_file(join(offsets, name))
    return planned


def batch_ids(folder: str) -> list[int]:
    """The batch ids in a checkpoint's ``offsets`` or ``commits`` folder."""
    return [int(name) for name in list_names(folder) if name.isdigit()]


def has_committed(checkpoint: str) -> bool:
    """True when the query of ``checkpoint`` has completed a micro-batch."""
    return bool(batch_ids(join(checkpoint, "commits")))


def uncommitted_batch(checkpoint: str) -> int | None:
    """The newest batch of ``checkpoint`` that was planned and never committed, or None.

    Spark ends a batch with two writes: ``offsets/<id>``, then ``commits/<id>``. A stop
    in between leaves the first without the second. A micro-batch query runs that batch
    again at its next start; a real-time one deletes its offsets (Spark warns about it)
    and runs again from the last commit, so what it sent since then is sent again.
    """
    planned = batch_ids(join(checkpoint, "offsets"))
    if not planned:
        return None
    newest = max(planned)
    return newest if newest > max(batch_ids(join(checkpoint, "commits")), default=-1) else None


def _batch_metadata(checkpoint: str, batch_id: int) -> dict:
    """What Spark wrote of micro-batch ``batch_id`` before running it (``offsets/<id>``,
    line 2: its watermark, its timestamp, its configuration); a replay reads the same."""
    text = read_text(join(checkpoint, "offsets", str(batch_id)))
    return json.loads(text.splitlines()[1])


def planned_at(checkpoint: str, batch_id: int) -> datetime:
    """When Spark planned micro-batch ``batch_id`` (``batchTimestampMs``, aware UTC): the
    same for the batch's first run and any replay."""
    return from_epoch_ms(int(_batch_metadata(checkpoint, batch_id)["batchTimestampMs"]))


def batch_watermark(checkpoint: str, batch_id: int) -> datetime | None:
    """The event-time watermark micro-batch ``batch_id`` ran with (aware UTC), or None
    before any watermark (batch -1, or a watermark of 0).

    Spark writes it to ``offsets/<batch_id>`` (line 2, ``batchWatermarkMs``) before the
    batch runs, and a replayed batch reads the same file: the one exact, replay-safe
    source of "which windows does this batch close".
    """
    if batch_id < 0:
        return None
    millis = int(_batch_metadata(checkpoint, batch_id)["batchWatermarkMs"])
    if millis <= 0:
        return None
    return from_epoch_ms(millis)


def latest_watermark(checkpoint: str) -> datetime | None:
    """The watermark the query's newest micro-batch ran with (aware UTC), or None when it
    has run no batch or has no watermark yet. After an availableNow run that is the
    watermark every window was closed with."""
    batches = batch_ids(join(checkpoint, "offsets"))
    return batch_watermark(checkpoint, max(batches)) if batches else None


def delta_source_version(checkpoint: str) -> int | None:
    """The first version of its Delta source table a query may still read: where its
    newest completed micro-batch started (the ``reservoirVersion`` of the batch before it).
    None before any batch completed, or when the query's source is not a Delta table.

    Not where that batch ended: at a restart Spark plans the newest completed batch again
    (``getBatch(start, end)``, for sources that expect it) before it plans a new one, and
    Delta's source then lists the log from that batch's start. A log expired up to the end
    failed the restart with DELTA_MISSING_FILES_UNEXPECTED_VERSION ("expecting ... version
    15, but the earliest available version ... is 19", batch 2 having read 15 to 25).
    With only batch 0 done, whose start is the table's beginning: 0.
    """
    done = batch_ids(join(checkpoint, "commits"))
    if not done:
        return None
    newest = max(done)
    if newest == 0:
        return 0
    lines = read_text(join(checkpoint, "offsets", str(newest - 1)))
    source = json.loads(lines.splitlines()[-1])
    version = source.get("reservoirVersion") if isinstance(source, dict) else None
    return int(version) if version is not None else None
