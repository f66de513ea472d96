"""The ``rule_changes`` table: one row per rule set the job ran with, so that any alert
can be read against the rules that raised it (its detected_at falls between two rows).

The job writes a row when it starts with rules other than the newest row's, and each
time it takes up an edit of the rules file (conf.rules_watch.RulesFile); delta-rs appends,
from the driver, under the job's lease on the lake.
"""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
from deltalake import write_deltalake

from contract.rules.model import RuleSet
from contract.times import utc_now
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.delta_io import committing
from jobs.writer.tables import RULE_CHANGES_SCHEMA
from lake.reader import read_path


def newest_version(path: str) -> str | None:
    """The version of the newest row (None: no row yet)."""
    rows = read_path(path, ["changed_at", "version"]).to_pylist()
    return max(rows, key=lambda r: r["changed_at"])["version"] if rows else None


def record_rules(path: str, rules: RuleSet, source: str, now: datetime | None = None) -> bool:
    """Append a row for ``rules`` unless the newest row has their version already;
    returns whether it wrote one."""
    version = rules.version()
    if newest_version(path) == version:
        return False
    text = json.dumps(
        [rule.model_dump(mode="json", by_alias=True) for rule in rules.rules], sort_keys=True
    )
    row = {
        "changed_at": now or utc_now(),
        "version": version,
        "rule_count": len(rules.rules),
        "rules": text,
        "source": source,
    }
    data = pa.Table.from_pylist([row], arrow_schema(RULE_CHANGES_SCHEMA))
    with committing(path) as commit:
        write_deltalake(commit.table, data, mode="append", commit_properties=commit.properties())
    return True
