"""The lake's layout: the name of every table (one folder each) and a checkpoint per
query, under a lake's root (a folder or an object store URI, conf/lake_location.py). The
job writes by it (the schemas: jobs/writer/tables.py); every reader reads by it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from conf.lake_location import join, parse_lake
from lake.storage import read_text

# The tables of docs/architecture.md#tables (the contract).
READINGS = "readings"
QUARANTINE = "quarantine"
SENSOR_STATS_1M = "sensor_stats_1m"
SENSOR_STATS_5M = "sensor_stats_5m"
ALERTS = "alerts"
INCIDENTS = "incidents"
PIPELINE_METRICS = "pipeline_metrics"
RULE_CHANGES = "rule_changes"
# The job's own working tables (a leading underscore keeps them apart from the contract's):
# the windows query's panes, and the deviation rules' learned baselines, which the
# dashboard also reads (a sensor's band).
PANES = "_panes"
BASELINES = "_baselines"


@dataclass(frozen=True)
class Lake:
    """The lake: one folder per table, one checkpoint per query, under ``root`` (a folder
    or an object store URI, conf/lake_location.py)."""

    root: str

    def __init__(self, root: str | Path) -> None:
        object.__setattr__(self, "root", parse_lake(root))

    def table(self, name: str) -> str:
        """Path or URI of a table."""
        return join(self.root, name)

    def checkpoint(self, query: str) -> str:
        """Path or URI of a query's checkpoint: <lake>/_checkpoints/<query>."""
        return join(self.root, "_checkpoints", query)

    def checkpoint_id(self, query: str) -> str:
        """The id Spark gave the query when its checkpoint was created.

        It stays the same across restarts on that checkpoint and changes with a new one,
        which makes it the right application id for idempotent Delta writes.
        """
        text = read_text(join(self.checkpoint(query), "metadata"))
        return str(json.loads(text.splitlines()[0])["id"])

    def writer_id(self, query: str) -> str:
        """The application id the query's micro-batches commit with (and ``_baselines``
        tags its rows with): the query's name and its checkpoint's id.

        Raises:
            FileNotFoundError: the query has no checkpoint yet.
        """
        return f"{query}-{self.checkpoint_id(query)}"
