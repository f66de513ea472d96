"""Which rules a micro-batch runs with (jobs/alerting/rule_history.py): those in force
when Spark planned it, by rule_changes and the batch's offsets file, the same on a
replay. delta-rs and files, no JVM."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conf.paths import RULES_FILE
from contract.rules.parsing import parse_rules, read_rules
from jobs.alerting.rule_changes import record_rules
from jobs.alerting.rule_history import BatchRules, RuleHistory
from jobs.spark.checkpoints import planned_at
from jobs.writer.tables import create_tables
from lake.layout import Lake

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
FIRST = read_rules(RULES_FILE)
EDITED = parse_rules({"rule": [
    {"name": "hot", "kind": "reading", "field": "temperature_c", "op": ">=",
     "threshold": 50, "severity": "critical"},
]})  # fmt: skip


def plan(checkpoint: Path, batch_id: int, at: datetime) -> None:
    """An offsets file as Spark writes it before a batch runs."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": int(at.timestamp() * 1000), "conf": {}}
    (folder / str(batch_id)).write_text(f'v1\n{json.dumps(meta)}\n{{"t":{{"0":1}}}}')


def lake_with_changes(tmp_path: Path) -> str:
    lake = Lake(tmp_path / "lake")
    create_tables(lake)
    path = lake.table("rule_changes")
    record_rules(path, FIRST, "conf/rules.toml", T0)
    return path


def test_a_batch_runs_with_the_rules_in_force_when_it_was_planned_replay_or_not(
    tmp_path: Path,
) -> None:
    path, checkpoint = lake_with_changes(tmp_path), tmp_path / "checkpoint"
    plan(checkpoint, 7, T0 + timedelta(minutes=5))  # planned under FIRST, then a crash
    assert planned_at(str(checkpoint), 7) == T0 + timedelta(minutes=5)
    # The rules edited before the restart, which records them at start.
    record_rules(path, EDITED, "conf/rules.toml", T0 + timedelta(minutes=6))

    judged = BatchRules(RuleHistory(path))
    assert judged.rules_for(str(checkpoint), 7, EDITED, changes=0) == FIRST  # the replay
    plan(checkpoint, 8, T0 + timedelta(minutes=7))
    assert judged.rules_for(str(checkpoint), 8, EDITED, changes=0) == EDITED
    # A batch planned after the newest change needs no read of its offsets file.
    assert judged.rules_for(str(checkpoint), 9, EDITED, changes=0) == EDITED

    # An edit taken while running: the history is read again, and a batch planned before
    # it (its offsets written, the edit taken before its function ran) keeps FIRST.
    record_rules(path, FIRST, "conf/rules.toml", T0 + timedelta(minutes=9))
    plan(checkpoint, 10, T0 + timedelta(minutes=8, seconds=59))
    assert judged.rules_for(str(checkpoint), 10, FIRST, changes=1) == EDITED
    plan(checkpoint, 11, T0 + timedelta(minutes=9, seconds=1))
    assert judged.rules_for(str(checkpoint), 11, FIRST, changes=1) == FIRST


def test_without_a_history_the_current_rules_judge(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    plan(checkpoint, 0, T0)
    no_table = BatchRules(RuleHistory(str(tmp_path / "lake" / "rule_changes")))
    assert no_table.rules_for(str(checkpoint), 0, EDITED, changes=0) == EDITED

    path = lake_with_changes(tmp_path)  # rule sets recorded only after the batch's plan
    plan(checkpoint, 1, T0 - timedelta(minutes=1))
    later = BatchRules(RuleHistory(path))
    assert later.rules_for(str(checkpoint), 1, EDITED, changes=0) == EDITED


def test_a_rule_set_with_alerting_off_comes_back_as_off(tmp_path: Path) -> None:
    path, checkpoint = lake_with_changes(tmp_path), tmp_path / "checkpoint"
    off = parse_rules({"alerting": "off"})
    record_rules(path, off, "conf/rules.toml", T0 + timedelta(minutes=1))
    plan(checkpoint, 3, T0 + timedelta(minutes=2))
    assert BatchRules(RuleHistory(path)).rules_for(str(checkpoint), 3, FIRST, changes=0).off
