"""The rule_changes table (jobs/alerting/rule_changes.py): one row per rule set taken up."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from deltalake import DeltaTable

from conf.paths import RULES_FILE
from contract.rules.parsing import parse_rules, read_rules
from jobs.alerting.rule_changes import newest_version, record_rules
from jobs.writer.tables import create_tables
from lake.layout import Lake

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def test_a_row_per_rule_set_and_none_for_the_same_again(tmp_path) -> None:
    lake = Lake(tmp_path / "lake")
    create_tables(lake)
    path = lake.table("rule_changes")
    first = read_rules(RULES_FILE)
    edited = parse_rules({"rule": [
        {"name": "hot", "kind": "reading", "field": "temperature_c", "op": ">=",
         "threshold": 50, "severity": "critical"},
    ]})  # fmt: skip

    assert newest_version(path) is None
    assert record_rules(path, first, "conf/rules.toml", T0)
    assert not record_rules(path, first, "conf/rules.toml", T0.replace(hour=10))  # a restart
    assert record_rules(path, edited, "/etc/rules.toml", T0.replace(hour=11))
    assert record_rules(path, first, "conf/rules.toml", T0.replace(hour=12))  # and back

    rows = sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["changed_at"])
    assert [(r["version"], r["rule_count"], r["source"]) for r in rows] == [
        (first.version(), len(first.rules), "conf/rules.toml"),
        (edited.version(), 1, "/etc/rules.toml"),
        (first.version(), len(first.rules), "conf/rules.toml"),
    ]
    assert parse_rules({"rule": json.loads(rows[1]["rules"])}) == edited
    assert newest_version(path) == first.version()
