"""Pruning of the ``_baselines`` table, a step of table maintenance (jobs/writer/maintenance.py).

Every windows batch appends the moved baseline of each (sensor, deviation rule) it
touched, and a batch reads only each key's newest row from before it
(jobs/alerting/learned_rules.newest_baselines). Left alone, the table grows by a row per
active sensor and rule per batch (100,000 sensors at a batch every 10 s: 864 million rows
a day), and so does the read every batch makes of it.

Kept: per (writer, sensor, rule), the newest :data:`KEEP` rows by batch id. Two, not one:
a job that died after committing batch b's rows but before its checkpoint replays b and
needs the newest row *before* b; rows of batches after the one in flight do not exist
yet, so at most one row of a key is at or after it, and the newest two always hold the
one the replay reads. A rewrite happens once the table holds :data:`GROWTH` times the
rows the last one kept: its cost (read the table, write the kept rows) stays a fixed
share of what the batches wrote meanwhile.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from jobs.writer.delta_io import committing
from lake.storage import delta_table, filesystem, table_rows

KEEP = 2
GROWTH = 2.0
# The columns that name a baseline, and the one that orders its rows.
KEY = ("writer", "sensor_id", "rule")
ORDER = "batch_id"


def newest_rows(rows: pa.Table, keep: int = KEEP) -> pa.Array:
    """A mask of ``rows`` (with the :data:`KEY` columns and :data:`ORDER`) that holds, per
    key, its ``keep`` rows of the highest batch id."""
    count = rows.num_rows
    if count == 0:
        return pa.array([], pa.bool_())
    order = pc.sort_indices(
        rows, sort_keys=[*((k, "ascending") for k in KEY), (ORDER, "descending")]
    ).to_numpy()
    starts = np.zeros(count, dtype=bool)
    starts[0] = True
    for name in KEY:
        column = rows.column(name).take(pa.array(order)).to_numpy(zero_copy_only=False)
        starts[1:] |= column[1:] != column[:-1]
    position = np.arange(count)
    first_of_group = np.maximum.accumulate(np.where(starts, position, 0))
    mask = np.empty(count, dtype=bool)
    mask[order] = (position - first_of_group) < keep
    return pa.array(mask)


def prune(path: str, kept_before: int) -> tuple[int, int] | None:
    """Rewrite the ``_baselines`` table at ``path`` with each key's newest rows, once it
    holds :data:`GROWTH` times ``kept_before`` rows (the last rewrite's): (rows removed,
    rows kept), or None when it was not due (or the table was rewritten meanwhile).

    The table is read and the rows to keep chosen on a snapshot, outside the table's
    lock, so that the windows batches go on committing meanwhile (a table never pruned
    can be large); only the rewrite takes the lock and the lake's fence, as every commit
    of the job (jobs/writer/delta_io.committing), and keeps whole the files the batches
    added since the snapshot."""
    if table_rows(path) <= GROWTH * kept_before:
        return None
    snapshot = delta_table(path)
    rows = snapshot.to_pyarrow_table()
    kept = rows.filter(newest_rows(rows.select([*KEY, ORDER])))
    if kept.num_rows == rows.num_rows:
        return 0, kept.num_rows
    removed = rows.num_rows - kept.num_rows
    seen = _files(snapshot)
    with committing(path) as commit:
        now = _files(commit.table)
        if not seen <= now:
            return None  # rewritten meanwhile (not by an append): the next pass looks again
        added = sorted(now - seen)
        if added:
            system, root = filesystem(path)
            newer = [pq.read_table(f"{root}/{name}", filesystem=system) for name in added]
            kept = pa.concat_tables([kept, *(t.select(rows.schema.names) for t in newer)])
        write_deltalake(
            commit.table,
            kept.cast(rows.schema),
            mode="overwrite",
            commit_properties=commit.properties(),
        )
    return removed, kept.num_rows


def _files(table: DeltaTable) -> set[str]:
    """The data files of a table's snapshot, by their path in the table."""
    actions = pa.table(table.get_add_actions(flatten=True))
    return set(actions.column("path").to_pylist()) if actions.num_rows else set()
