"""Where a new windows query starts reading the readings table: its whole history, commit
by commit, when that history holds exactly the table's rows; else Delta's snapshot.

A streaming query new to a Delta table that already holds rows reads it as an initial
snapshot: Delta computes the snapshot's state and lists its files with Spark jobs (eight
of them, about 2 s per start on 2 cores; docs/benchmarks.md). That is the case of every
``availableNow`` run on a new lake, where the windows query starts after ingest is done.
Read from version 0 instead (``startingVersion``), the same rows come from the commits'
own files, listed by the driver from the log. Only the same rows, though, while every
commit is still in the log, none removed a file (a compaction, a DELETE, a VACUUM) and
the schema never changed: otherwise the snapshot it is. A query that has a checkpoint
resumes from it either way.
"""

from __future__ import annotations

import json

from conf.lake_location import join
from lake.storage import list_names, read_text

# A longer history is read as a snapshot: checking it would cost what the snapshot saves.
MOST_COMMITS = 100


def whole_history_is_the_table(table: str, most: int = MOST_COMMITS) -> bool:
    """True when reading ``table``'s commits from version 0 gives exactly its rows: every
    commit is in the log (at most ``most``), none removed a file and every schema in it
    is the same."""
    log = join(table, "_delta_log")
    versions = sorted(
        int(name.removesuffix(".json"))
        for name in list_names(log)
        if name.endswith(".json") and name.removesuffix(".json").isdigit()
    )
    if not versions or len(versions) > most or versions != list(range(len(versions))):
        return False
    schemas = set()
    for version in versions:
        for line in read_text(join(log, f"{version:020d}.json")).splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "remove" in action:
                return False
            if "metaData" in action:
                schemas.add(action["metaData"].get("schemaString"))
    return len(schemas) == 1


def source_options(table: str, new_query: bool) -> dict[str, str]:
    """The Delta source options for the windows query reading ``table``."""
    options = {
        # Commits that remove rows (raw_retention's DELETE of rows read long ago) are
        # skipped rather than failing the query; compactions change no data and are
        # skipped anyway.
        "skipChangeCommits": "true",
    }
    if new_query and whole_history_is_the_table(table):
        options["startingVersion"] = "0"
    return options
