"""The rules file in a running job: an edit is taken up without a restart, a bad edit is
refused with one line while the last good rules run on, and each rule set the job ran
with is a row of rule_changes."""

from __future__ import annotations

import math
import sys

import pytest
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT, RULES_FILE
from contract.rules import read_rules
from tests.expected_alerts import valid_readings
from tests.expected_stats import epoch
from tests.polling import STUCK, wait_until
from tests.processes import Running
from tests.producer_run import read_jsonl, run_producer

# Runs in a zone far from UTC like every test (tests/conftest.py, docs/architecture.md#time-zones).
pytestmark = pytest.mark.pipeline

# A rule every valid reading breaches: its alerts are the minutes of the readings after it.
WARM = """
[[rule]]
name = "warm"
kind = "reading"
field = "temperature_c"
op = ">"
threshold = -100.0
severity = "warning"
"""


def minute(seconds: float) -> int:
    return math.floor(seconds / 60)


def table(lake, name: str) -> list[dict]:
    return DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()


def test_an_edit_of_the_rules_file_is_taken_up_while_the_job_runs(kafka, new_topic, tmp_path):
    topic, lake, rules = new_topic("rules-edit"), tmp_path / "lake", tmp_path / "rules.toml"
    default = RULES_FILE.read_text(encoding="utf-8")
    rules.write_text(default, encoding="utf-8")

    def produce(seed: int, start: str, manifest: str) -> list[dict]:
        done = run_producer(
            "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 300,
            "--sensors", 5, "--seed", seed, "--start-time", start,
            "--manifest", tmp_path / manifest, "--rules", rules,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return read_jsonl(tmp_path / manifest)

    def landed() -> int:
        # One batch creates readings, then quarantine: a poll can fall in between.
        names = ("readings", "quarantine")
        if not all(DeltaTable.is_deltatable(str(lake / name)) for name in names):
            return 0
        return sum(len(table(lake, name)) for name in names)

    produce(1, "2026-01-01T00:00:00Z", "first.jsonl")
    job = Running(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--lake", str(lake), "--rules", str(rules),
         "--trigger", "1 second", "--readers-trigger", "5 seconds", "--realtime", "false"],
        cwd=PROJECT_ROOT,
    )  # fmt: skip
    try:
        wait_until(lambda: landed() == 300, STUCK, "the first 300 records in the lake")

        rules.write_text(default.replace('kind = "window"', 'kind = "sometimes"', 1))
        job.wait_for_line(lambda line: "the edit is refused" in line, STUCK)
        rules.write_text(default + WARM, encoding="utf-8")
        edited = read_rules(rules)
        job.wait_for_line(lambda line: f"-> {edited.version()} from {rules}" in line, STUCK)

        second = produce(2, "2026-01-01T02:00:00Z", "second.jsonl")
        wait_until(lambda: landed() == 600, STUCK, "all 600 records in the lake")
        minutes = {
            (r["sensor_id"], math.floor(epoch(r["event_time"]) / 60))
            for r in valid_readings(second)
        }
        wait_until(
            lambda: len([a for a in table(lake, "alerts") if a["rule"] == "warm"]) >= len(minutes),
            120, "the warm rule's alerts",
        )  # fmt: skip
        job.terminate()
        assert job.finish(timeout=STUCK) == 0, "\n".join(job.output()[-30:])
    finally:
        job.kill()

    warm = [a for a in table(lake, "alerts") if a["rule"] == "warm"]
    assert {
        (a["sensor_id"], math.floor(a["window_start"].timestamp() / 60)) for a in warm
    } == minutes
    assert all(a["severity"] == "warning" and a["threshold"] == -100.0 for a in warm)
    refused = [line for line in job.output() if "the edit is refused" in line]
    assert len(refused) == 1 and "rule 'sustained_high': unknown kind 'sometimes'" in refused[0]
    changes = sorted(table(lake, "rule_changes"), key=lambda r: r["changed_at"])
    assert [r["version"] for r in changes] == [read_rules(RULES_FILE).version(), edited.version()]
