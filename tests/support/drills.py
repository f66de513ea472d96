"""What the crash drills share: the job and the producer as real processes, a crash
(SIGKILL of the whole process group), and the oracles that compare a drilled lake with
an uninterrupted run (tests/jobs/test_drills.py, tests/jobs/writer/test_maintenance.py,
the lake in a bucket in tests/lake/test_s3_lake.py)."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from conf.paths import PROJECT_ROOT, RULES_FILE
from contract.rules.model import AbsenceRule, ReadingRule
from contract.rules.parsing import read_rules
from jobs.stream import run
from lake.lease import FENCE_APP_ID
from tests.support.brokers import Broker
from tests.support.job_settings import available_now
from tests.support.polling import STUCK
from tests.support.processes import Running


def start_job(
    kafka: Broker, topic: str, lake: str | Path, registry: Path, env: dict[str, str] | None = None
) -> Running:
    """The streaming job on short triggers, as a process of its own (``env`` adds to ours)."""
    return Running(
        [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
         "--topic", topic, "--lake", str(lake), "--registry", str(registry),
         "--trigger", "1 second", "--readers-trigger", "5 seconds"],
        env=env, cwd=PROJECT_ROOT,
    )  # fmt: skip


def start_producer(
    bootstrap: str, topic: str, tmp: Path, count: int | None = None, rate: int = 150
) -> Running:
    """The producer, ``rate`` messages a second until it is sent SIGTERM or has sent
    ``count`` (manifest and fleet under ``tmp``)."""
    limit = [] if count is None else ["--count", str(count)]
    return Running(
        [sys.executable, "-m", "producer", "--bootstrap-servers", bootstrap, "--topic", topic,
         "--sensors", "50", "--rate", str(rate), "--seed", "17", *limit,
         "--start-time", "2026-01-01T00:00:00Z", "--manifest", str(tmp / "manifest.jsonl"),
         "--registry-out", str(tmp / "fleet.jsonl"), "--late-fraction", "0",
         "--spike-rate", "2", "--sustained-rate", "0.5", "--silence-rate", "0.5",
         "--progress-interval", "1"],
        cwd=PROJECT_ROOT,
    )  # fmt: skip


def delivered_count(line: str) -> int | None:
    """The count of a producer's progress line ("1,234 delivered (...)"), else None."""
    head, found, _ = line.partition(" delivered (")
    count = head.rpartition(" ")[2].replace(",", "")
    return int(count) if found and count.isdigit() else None


def wait_for_more_deliveries(producer: Running, timeout: float, after: str) -> None:
    """Return once the producer's delivered count exceeds the count of its last progress
    line so far: it delivers again ``after`` something (a broker's outage)."""
    counts = [c for line in producer.output() if (c := delivered_count(line)) is not None]
    before = counts[-1] if counts else 0
    producer.wait_for_line(
        lambda line: (delivered_count(line) or 0) > before, timeout,
        f"the producer to deliver more than {before:,} messages {after}",
    )  # fmt: skip


def kill_hard(running: Running) -> None:
    """SIGKILL the job's whole process group (Python and Spark's JVM), like a crash."""
    members = [running.proc, *psutil.Process(running.proc.pid).children(recursive=True)]
    running.interrupt_group(signal.SIGKILL)
    running.proc.wait(timeout=30)
    psutil.wait_procs([psutil.Process(m.pid) for m in members if psutil.pid_exists(m.pid)], 30)


def wait_for_new_commit(log_dir: Path, before: set[Path], timeout: float, job: Running) -> None:
    """Return as soon as a data commit (one that adds a file) not in ``before`` appears in
    a Delta log folder: not the table's creation, nor the maintenance settings' commit.
    Polls with a deadline.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = set(log_dir.glob("*.json")) - before
        if any('{"add":' in p.read_text(encoding="utf-8") for p in new):
            return
        assert job.proc.poll() is None, "the job died:\n" + "\n".join(job.output()[-30:])
        time.sleep(0.02)
    raise AssertionError(f"no new commit in {log_dir} within {timeout:.0f}s")


def started(line: str) -> bool:
    """The job's line that names its topic and lake: it holds the lake, its JVM starts."""
    return line.startswith("jobs.stream: ") and " -> " in line


def crash_while_sending(
    kafka: Broker,
    topic: str,
    lake: str | Path,
    log_dir: Path,
    tmp: Path,
    kills: int,
    seed: int,
    env: dict[str, str] | None = None,
    standby: bool = False,
    pause_first: bool = False,
) -> int:
    """The kill drill: the producer sends (manifest and fleet under ``tmp``) while the job
    is started and killed hard ``kills`` times: first right after a data commit appears
    in ``log_dir`` (the readings table's Delta log, as files), before Spark records the
    batch as done, so the restart replays a committed batch; then at random moments
    (start-up, mid-batch or mid-commit alike). With ``standby`` the job after each kill but
    the last is already waiting as a standby (``--standby``) when its holder is killed,
    and takes the lake over. With ``pause_first`` the first holder is paused (SIGSTOP)
    instead of killed, until the standby took over and committed, then resumed: it must
    exit 1 with one line saying the lake was taken (:func:`resume_after_takeover`). The
    producer then stops cleanly. Returns how many kills or pauses happened."""
    rng, done = random.Random(seed), 0
    producer = start_producer(kafka.bootstrap, topic, tmp)
    waiting: Running | None = None
    try:
        producer.wait_for_line(lambda line: " delivered (" in line, 180)
        for attempt in range(kills):
            before = set(log_dir.glob("*.json"))  # empty before the first start
            job = waiting or start_job(kafka, topic, lake, tmp / "fleet.jsonl", env=env)
            waiting = None
            try:
                if attempt == 0:
                    wait_for_new_commit(log_dir, before, STUCK, job)
                else:
                    job.wait_for_line(started, STUCK)
                    time.sleep(rng.uniform(5.0, 25.0))  # a random moment, not a wait
                if standby and attempt < kills - 1:
                    waiting = start_job(
                        kafka, topic, lake, tmp / "fleet.jsonl",
                        env={**(env or {}), "SENSORWATCH_STANDBY": "true"},
                    )  # fmt: skip
                    waiting.wait_for_line(lambda line: "waits for it to stop" in line, STUCK)
                if pause_first and attempt == 0 and waiting is not None:
                    job.interrupt_group(signal.SIGSTOP)
                    waiting.wait_for_line(lambda line: "lease: took the lake" in line, STUCK)
                    wait_for_new_commit(log_dir, set(log_dir.glob("*.json")), STUCK, waiting)
                    resume_after_takeover(job)
                    done += 1
                    continue
                kill_hard(job)
                done += 1
                if waiting is not None:
                    waiting.wait_for_line(lambda line: "lease: took the lake" in line, STUCK)
            finally:
                job.kill()
        producer.terminate()  # it flushes what it holds and writes the rest of its manifest
        assert producer.finish(timeout=STUCK) == 0, "\n".join(producer.lines[-20:])
    finally:
        producer.kill()
        if waiting is not None:
            waiting.kill()
    return done


def resume_after_takeover(job: Running) -> None:
    """Resume (SIGCONT) a job paused past its lease after another took the lake over: it
    must commit nothing more and exit 1, its last word one line saying why, with no stack
    trace (Spark's errors about the new holder's checkpoint entries are dropped:
    jobs/spark/jvm_stderr.py)."""
    woke = len(job.output())
    job.interrupt_group(signal.SIGCONT)
    assert job.finish(timeout=STUCK) == 1, "\n".join(job.lines[-30:])
    after = [line for line in job.lines[woke:] if line.strip()]
    assert "taken over by another job" in after[-1] and "commits nothing more" in after[-1]
    noise = [line for line in after if "Exception" in line or line.startswith(("\t", "Trace"))]
    assert not noise, after


@contextmanager
def small_disk(folder: Path, size: str = "300m") -> Iterator[Path]:
    """A file system of its own at ``folder`` (tmpfs, ``size``), to be filled up."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def fill_up(disk: Path) -> Path:
    """Fill ``disk`` to the last byte with a ballast file; returns it (delete it to free)."""
    ballast = disk / "ballast"
    # Unbuffered: nothing is left to flush (and fail) at close.
    with ballast.open("ab", buffering=0) as out, contextlib.suppress(OSError):  # ENOSPC
        while True:
            out.write(b"\0" * 65536)
    return ballast


def fenced_commits(lake: Path) -> None:
    """Check every table's Delta log: no transaction (application id, version) committed
    twice, and the lease's fence never going back (no commit of an older holder after a
    newer holder's: lake/lease.py)."""
    for log in sorted(lake.glob("*/_delta_log")):
        seen: dict[tuple[str, int], int] = {}
        terms: list[int] = []
        for entry in sorted(log.glob("*.json")):
            version = int(entry.stem)
            for line in entry.read_text(encoding="utf-8").splitlines():
                txn = json.loads(line).get("txn")
                if txn is None:
                    continue
                key = (txn["appId"], txn["version"])
                if txn["appId"] == FENCE_APP_ID:
                    terms.append(txn["version"])
                else:
                    assert key not in seen, f"{log.parent.name}: {key} in {seen[key]} and {version}"
                    seen[key] = version
        assert terms == sorted(terms), f"{log.parent.name}: an older holder committed {terms}"
        assert terms, f"{log.parent.name}: no commit carries the lease's fence"


def catch_up(spark, kafka: Broker, topic: str, lake: Path, registry: Path) -> None:
    """The rest of the topic into a local lake, in the test session's Spark."""
    run(available_now(kafka, topic, lake, registry=registry), spark)


def landed(spark, lake: Path) -> Counter:
    """How often each (partition, offset) is in ``readings`` and ``quarantine``: once each
    is exactly once."""
    return Counter(
        (r.kafka_partition, r.kafka_offset)
        for table in ("readings", "quarantine")
        for r in rows(spark, lake, table)
    )


def rows(spark, lake: Path, table: str) -> list:
    """Every row of a local lake's table, through Spark."""
    return spark.read.format("delta").load(str(lake / table)).collect()


def same_stats(got: Sequence[Mapping[str, Any]], want: Sequence[Mapping[str, Any]]) -> bool:
    """Equal window statistics; averages may differ in the last bits (summation order).
    Rows are Spark Rows or dicts (both answer ``row["column"]``)."""

    def keyed(table: Sequence[Mapping[str, Any]]) -> dict:
        return {(r["sensor_id"], r["window_start"]): r for r in table}

    got_by, want_by = keyed(got), keyed(want)
    if len(got_by) != len(got) or got_by.keys() != want_by.keys():
        return False
    return all(
        tuple(g[c] for c in ("readings", "min_temperature_c", "max_temperature_c"))
        == tuple(w[c] for c in ("readings", "min_temperature_c", "max_temperature_c"))
        and g["avg_temperature_c"] == pytest.approx(w["avg_temperature_c"], abs=1e-9)
        and g["avg_humidity_pct"] == pytest.approx(w["avg_humidity_pct"], abs=1e-9)
        for key, w in want_by.items()
        for g in [got_by[key]]
    )


def _peaks_by_batch() -> frozenset[str]:
    """The rules of the default rules file whose alert values depend on where the
    micro-batches fell: reading and absence rules decide an alert on the batch that first
    sees it (SPEC: without waiting for the watermark) and keep it (one row per alert_id)."""
    rules = read_rules(RULES_FILE).rules
    return frozenset(r.name for r in rules if isinstance(r, ReadingRule | AbsenceRule))


def episodes(incidents: Iterable[Mapping[str, Any]]) -> set[tuple]:
    """The incidents without the wall-clock times of their writes, and without the peaks
    that depend on where the micro-batches fell, which differ between a drilled run and
    an uninterrupted one:
    - a reading rule's alert (overheat_reading) holds its minute's worst value as of the
      batch that raised it; a worse reading of the same minute in a later batch counts in
      no alert, so the peak does not see it (CI saw 50.35 against 56.42: two breaching
      readings of one minute, split by a batch boundary);
    - a silence's value is its length as known when the alert was decided (up to the
      watermark of that micro-batch).
    Their ids, starts, ends and alert counts do not depend on it, and are compared. A
    window rule's peak is compared: its alerts come from closed windows. A sustained_high
    peak is an average: its last bits depend on the order of the summation (CI saw
    ...333 against ...334), so peaks compare to 9 decimals."""
    by_batch = _peaks_by_batch()
    return {
        tuple(
            round(v, 9) if k == "peak_value" and v is not None else v
            for k, v in sorted(i.items())
            if k not in {"created_at", "updated_at"}
            and not (k == "peak_value" and i["rule"] in by_batch)
        )
        for i in incidents
    }
