"""The rules file in a running job, with the real-time path on: an edit is taken up
without a restart, a bad edit is refused with one line while the last good rules run on,
a file written in place is never taken half-written, no rule set stops the job, and each
rule set the job ran with is a row of rule_changes. Then the drill of too few task slots
after a restart of the real-time query. One job for the module, its tests in file order;
the kill drill (a rule edited between a kill -9 and the restart) has a job of its own."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from deltalake import DeltaTable

from conf.paths import PROJECT_ROOT, RULES_FILE
from contract.alerts import OVERHEAT
from contract.rules.parsing import read_rules
from jobs.stream import run
from tests.support.brokers import Broker
from tests.support.drills import kill_hard
from tests.support.expected_alerts import overheat, valid_readings
from tests.support.expected_stats import epoch
from tests.support.job_output import noise
from tests.support.job_settings import available_now
from tests.support.kafka_io import consume_all, make_topic, produce
from tests.support.polling import STUCK, wait_until
from tests.support.processes import Running
from tests.support.producer_run import read_jsonl, run_producer

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
# A rule added while the job runs (the file holds "warm" by then).
TEPID = WARM.replace('"warm"', '"tepid"').replace("-100.0", "30.0")
DEFAULT = RULES_FILE.read_text(encoding="utf-8")
SETTLE_S = 3.0  # the job's rules_settle here
HALF_GAP_S = 1.5  # between the two halves of a slow write: more than a look, less than SETTLE_S


def table(lake: Path, name: str) -> list[dict]:
    return DeltaTable(str(lake / name)).to_pyarrow_table().to_pylist()


def landed(lake: Path) -> int:
    """Kafka records in readings and quarantine (0 before the tables exist)."""
    names = ("readings", "quarantine")
    if not all(DeltaTable.is_deltatable(str(lake / name)) for name in names):
        return 0
    return sum(len(table(lake, name)) for name in names)


def versions(lake: Path) -> list[str]:
    return [
        r["version"] for r in sorted(table(lake, "rule_changes"), key=lambda r: r["changed_at"])
    ]


@dataclass
class Job:
    """The module's job: its topics, lake, rules file and process."""

    kafka: Broker
    topic: str
    alerts_topic: str
    lake: Path
    rules: Path
    tmp: Path
    run: Running
    sent: int = 0

    def produce(self, seed: int, start: str, count: int = 300) -> list[dict]:
        manifest = self.tmp / f"manifest-{seed}.jsonl"
        done = run_producer(
            "--bootstrap-servers", self.kafka.bootstrap, "--topic", self.topic, "--count", count,
            "--sensors", 5, "--seed", seed, "--start-time", start, "--manifest", manifest,
            "--rules", self.rules,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        self.sent += count
        return read_jsonl(manifest)

    def all_landed(self) -> None:
        wait_until(lambda: landed(self.lake) >= self.sent, STUCK, f"{self.sent} records landed",
                   detail=self.tail)  # fmt: skip
        assert landed(self.lake) == self.sent, self.tail()

    def hot_reading_on_the_alerts_topic(
        self, sensor: str, temperature: float = 60.0, rule: str = OVERHEAT
    ) -> None:
        """A hot reading of a sensor the registry lacks (45 °C applies) reaches the topic
        as an alert of ``rule``."""
        self.reading(sensor, temperature)

        def sent() -> bool:
            return (sensor, rule) in self.on_the_alerts_topic()

        wait_until(sent, STUCK, f"{sensor}'s hot reading on {self.alerts_topic}", detail=self.tail)

    def reading(self, sensor: str, temperature: float, kafka_time: datetime | None = None) -> None:
        """A reading of ``sensor`` now; ``kafka_time``: its Kafka time (now when None)."""
        at = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        value = {
            "event_id": sensor, "sensor_id": sensor, "event_time": at,
            "temperature_c": temperature, "humidity_pct": 40.0, "battery_pct": 90.0, "seq": 1,
        }  # fmt: skip
        stamp = None if kafka_time is None else int(kafka_time.timestamp() * 1000)
        produce(self.kafka.bootstrap, self.topic, [(sensor, json.dumps(value))], stamp)
        self.sent += 1

    def on_the_alerts_topic(self) -> set[tuple[str, str]]:
        """(sensor, rule) of every message on the alerts topic."""
        found = consume_all(self.kafka.bootstrap, self.alerts_topic, timeout=10)
        messages = [json.loads(m.value()) for m in found]
        return {(m["sensor_id"], m["rule"]) for m in messages}

    def tail(self) -> str:
        return "\n".join(self.run.output()[-40:])

    def alive(self) -> None:
        assert self.run.proc.poll() is None, "the job died:\n" + self.tail()


def rewrite(path: Path, text: str) -> None:
    """Replace the file as docs/alerting.md says to: a temporary file renamed over it."""
    temporary = path.with_name(f".{path.name}.new")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def write_slowly(path: Path, text: str, cut: int) -> None:
    """Write ``text`` into ``path`` in place, in two halves ``HALF_GAP_S`` apart."""
    with path.open("w", encoding="utf-8") as out:
        out.write(text[:cut])
    time.sleep(HALF_GAP_S)  # the fault itself: a writer that takes its time
    with path.open("a", encoding="utf-8") as out:
        out.write(text[cut:])


@pytest.fixture(scope="module")
def job(kafka: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    """The job with the real-time path on a one-partition topic (local[2] and a slot for
    the path: local[3]), a settle time of 3 s, the topics looked at every 2 s; the path
    commits every 5 minutes (so its restart after an edit reads the module's readings
    again)."""
    tmp = tmp_path_factory.mktemp("job-rules")
    topic, alerts_topic = make_topic(kafka, "rules", 1), make_topic(kafka, "rules-alerts", 1)
    lake, rules = tmp / "lake", tmp / "rules.toml"
    rules.write_text(DEFAULT, encoding="utf-8")
    run = Running(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--lake", str(lake), "--rules", str(rules),
         "--trigger", "1 second", "--readers-trigger", "5 seconds", "--realtime", "true",
         "--alerts-topic", alerts_topic, "--realtime-checkpoint-interval", "5 minutes",
         "--rules-settle", f"{SETTLE_S:g} seconds", "--realtime-topic-check", "2 seconds"],
        cwd=PROJECT_ROOT,
    )  # fmt: skip
    given = Job(kafka, topic, alerts_topic, lake, rules, tmp, run)
    try:
        yield given
        run.terminate()
        assert run.finish(timeout=STUCK) == 0, given.tail()
        lines = run.output()
        assert noise(lines) == [], "\n".join(lines)  # no traceback, no Spark warning
    finally:
        run.kill()


def test_an_edit_of_the_rules_file_is_taken_up_while_the_job_runs(job: Job) -> None:
    job.produce(1, "2026-01-01T00:00:00Z")
    job.all_landed()

    job.rules.write_text(DEFAULT.replace('kind = "window"', 'kind = "sometimes"', 1))
    job.run.wait_for_line(lambda line: "the edit is refused" in line, STUCK)
    job.rules.write_text(DEFAULT + WARM, encoding="utf-8")
    edited = read_rules(job.rules)
    job.run.wait_for_line(lambda line: f"-> {edited.version()} from {job.rules}" in line, STUCK)

    second = job.produce(2, "2026-01-01T02:00:00Z")
    job.all_landed()
    minutes = {
        (r["sensor_id"], math.floor(epoch(r["event_time"]) / 60)) for r in valid_readings(second)
    }
    wait_until(
        lambda: len([a for a in table(job.lake, "alerts") if a["rule"] == "warm"]) >= len(minutes),
        120, "the warm rule's alerts",
    )  # fmt: skip

    warm = [a for a in table(job.lake, "alerts") if a["rule"] == "warm"]
    assert {
        (a["sensor_id"], math.floor(a["window_start"].timestamp() / 60)) for a in warm
    } == minutes
    assert all(a["severity"] == "warning" and a["threshold"] == -100.0 for a in warm)
    refused = [line for line in job.run.output() if "the edit is refused" in line]
    assert len(refused) == 1 and "rule 'sustained_high': unknown kind 'sometimes'" in refused[0]
    assert versions(job.lake) == [read_rules(RULES_FILE).version(), edited.version()]


def test_a_rules_file_written_slowly_is_never_taken_half_and_no_rule_set_stops_the_job(
    job: Job,
) -> None:
    """Two slow writes in place, each in two halves 1.5 s apart (the job looks every
    second, the settle time is 3 s): cut inside the opening comments (no rules: taken, the
    real-time query's restart on it killed the job), and cut after a whole rule (the
    first rule alone: four rules silently off). Then alerting turned off and on again: the
    real-time path idles, saying so, and runs again."""
    before = versions(job.lake)
    text = job.rules.read_text(encoding="utf-8")
    first_rule = text.index("\n[[rule]]")
    write_slowly(job.rules, text, first_rule // 2)  # the same rules again: nothing to take
    edited = text.replace("threshold = 45.0", "threshold = 44.0")
    write_slowly(job.rules, edited, text.index("\n[[rule]]", first_rule + 1))
    whole = read_rules(job.rules)
    job.run.wait_for_line(lambda line: f"-> {whole.version()} from {job.rules}" in line, STUCK)
    job.alive()
    assert versions(job.lake) == [*before, whole.version()]  # no half in between

    rewrite(job.rules, 'alerting = "off"\n' + edited)
    job.run.wait_for_line(lambda line: "alerting is off; the real-time path idles" in line, STUCK)
    job.produce(3, "2026-01-01T04:00:00Z", count=100)
    job.all_landed()  # the lake path runs on
    rewrite(job.rules, edited)
    job.run.wait_for_line(lambda line: "real-time alert path runs again" in line, STUCK)
    job.hot_reading_on_the_alerts_topic("fridge-after-the-halves")
    job.alive()
    off = [line for line in job.run.output() if "the real-time path idles" in line]
    assert len(off) == 1, job.tail()


def test_an_edit_does_not_judge_the_readings_the_path_judged_before_it(job: Job) -> None:
    """A rule added while the real-time path runs on its 5-minute checkpoint interval:
    its restart reads again what came since its last commit, but a reading it judged
    before the edit (by the rules then in force, as the lake path did) raises no alert of
    the new rule on the topic; one sent after the edit does. (Without the cut, the first
    reading's alert came on the topic and never into the table.)"""
    job.reading("tepid-before-the-edit", 40.0, datetime.now(UTC) - timedelta(minutes=1))
    job.hot_reading_on_the_alerts_topic("fridge-before-the-edit")  # read after it: judged
    job.all_landed()
    rewrite(job.rules, job.rules.read_text(encoding="utf-8") + TEPID)
    version = read_rules(job.rules).version()
    job.run.wait_for_line(lambda line: f"-> {version} from {job.rules}" in line, STUCK)
    job.run.wait_for_line(lambda line: "realtime: the rules changed" in line, STUCK)

    job.hot_reading_on_the_alerts_topic("tepid-after-the-edit", 40.0, rule="tepid")

    def tepid() -> set[str]:
        return {a["sensor_id"] for a in table(job.lake, "alerts") if a["rule"] == "tepid"}

    wait_until(lambda: "tepid-after-the-edit" in tepid(), STUCK, "its alert in the table")
    assert "tepid-before-the-edit" not in tepid()
    assert ("tepid-before-the-edit", "tepid") not in job.on_the_alerts_topic()


def test_too_few_slots_after_a_restart_stop_the_real_time_path_and_the_lake_writes_on(
    job: Job,
) -> None:
    """Two partitions more: the path's restart (to read them) finds that its three tasks
    and the lake path's two no longer fit local[3]; it stops in one line, and every record
    sent afterwards still lands, exactly once."""
    job.hot_reading_on_the_alerts_topic("fridge-before-the-partitions")  # the path runs
    admin = AdminClient({"bootstrap.servers": job.kafka.bootstrap})
    admin.create_partitions([NewPartitions(job.topic, 3)])[job.topic].result(timeout=60)
    stopped = job.run.wait_for_line(lambda line: "needs a task slot" in line, STUCK)
    assert "for each of the 3 partitions" in stopped and "offers 3" in stopped
    assert stopped.endswith("the path stops, the lake path runs on")

    job.produce(4, "2026-01-01T06:00:00Z")  # into all three partitions
    job.all_landed()
    job.alive()
    lines = job.run.output()
    assert sum("needs a task slot" in line for line in lines) == 1
    after = lines[lines.index(stopped) + 1 :]
    assert not [line for line in after if line.startswith("jobs.stream: realtime:")]


def test_a_rule_edited_between_a_kill_and_the_restart_leaves_the_replayed_batch_whole(
    spark, kafka: Broker, new_topic, tmp_path: Path
) -> None:
    """The job killed -9 while its first micro-batch runs (planned, nothing of it
    committed), the overheat threshold raised to 200 °C, the job run again: the replayed
    batch is judged with the rules it first ran with, so its overheat alerts (which the
    real-time path would have sent already) are all in the table, none lost to the edit."""
    topic, lake, rules = new_topic("rules-kill", 1), tmp_path / "lake", tmp_path / "rules.toml"
    rules.write_text(DEFAULT, encoding="utf-8")
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 300,
        "--sensors", 5, "--seed", 7, "--start-time", "2026-01-01T00:00:00Z",
        "--spike-rate", 30, "--manifest", tmp_path / "manifest.jsonl",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    expected = overheat(read_jsonl(tmp_path / "manifest.jsonl"), {})
    assert expected

    killed = Running(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--lake", str(lake), "--rules", str(rules), "--trigger", "1 second",
         "--readers", "false"],
        cwd=PROJECT_ROOT,
    )  # fmt: skip
    planned = lake / "_checkpoints" / "ingest" / "offsets" / "0"
    try:
        wait_until(planned.exists, STUCK, "the first micro-batch planned", every=0.005,
                   detail=lambda: "\n".join(killed.output()[-30:]))  # fmt: skip
        kill_hard(killed)
    finally:
        killed.kill()
    assert not (lake / "_checkpoints" / "ingest" / "commits" / "0").exists()
    assert table(lake, "alerts") == [], "the kill came after the batch's alerts: too late"

    raised = DEFAULT.replace("threshold = 45.0", "threshold = 200.0").replace(
        'registry_threshold = "max_temp_c"\n', ""
    )
    rules.write_text(raised, encoding="utf-8")
    lines: list[str] = []
    run(available_now(kafka, topic, lake, rules=rules, readers=False), spark, lines.append)

    found = {
        (a["sensor_id"], a["window_start"].timestamp())
        for a in table(lake, "alerts")
        if a["rule"] == OVERHEAT
    }
    assert found == expected
    assert any("ingest: batch 0 runs with rules" in line for line in lines), lines
    assert versions(lake) == [read_rules(RULES_FILE).version(), read_rules(rules).version()]
