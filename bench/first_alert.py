"""The first alert after a cold start, as `scripts/run-local` and `docker compose up` give it.

The demo's promise ("an incident within a minute of start") is a figure measured here,
not a test's assertion: the producer and ``python -m jobs.stream`` start together, as the
demo starts them (real-time clock, the first scripted spike 20 s in, the demo's triggers),
on a fresh topic and lake; the figures are the seconds from their start to the job's first
ALERT line and to the first overheat row readable in ``alerts``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.env import Producer, new_topic
from common.waiting import poll_until
from conf.paths import PROJECT_ROOT
from lake.layout import ALERTS
from lake.reader import LakeReader

FIRST_SPIKE_AFTER = 20  # seconds, as scripts/run-local and .env's DEMO_FIRST_SPIKE_AFTER
DEADLINE = 600.0  # seconds: a start this slow is stuck, not measured


def first_alert(bootstrap: str, workdir: Path, partitions: int) -> dict[str, Any]:
    """Seconds from a cold start to the first alert line and to the first alert row."""
    topic = new_topic(bootstrap, "first-alert", partitions)
    lake, registry = workdir / "first-alert-lake", workdir / "first-alert-fleet.jsonl"
    started = time.monotonic()
    producer = Producer(
        bootstrap, topic, "--sensors", 50, "--interval", 2, "--seed", 42,
        "--first-spike-after", FIRST_SPIKE_AFTER, "--registry-out", registry,
    )  # fmt: skip
    job: subprocess.Popen[str] | None = None
    line_at: list[float] = []
    try:
        # The job reads the fleet the producer writes first.
        if not poll_until(registry.exists, 60 - (time.monotonic() - started), 0.05):
            raise RuntimeError("the producer wrote no fleet within 60 s")
        job = subprocess.Popen(
            [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", bootstrap,
             "--topic", topic, "--lake", str(lake), "--registry", str(registry),
             "--trigger", "5 seconds", "--readers-trigger", "10 seconds"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=PROJECT_ROOT,
        )  # fmt: skip
        threading.Thread(target=_watch_lines, args=(job, started, line_at), daemon=True).start()
        row_at = _first_overheat_row(lake, started, job)
        return {
            "first_spike_after_s": FIRST_SPIKE_AFTER,
            "to_alert_line_s": round(line_at[0], 1) if line_at else None,
            "to_alert_row_s": round(row_at, 1),
        }
    finally:
        if job is not None:
            job.terminate()
            job.wait(timeout=120)
        producer.stop()


def _watch_lines(job: subprocess.Popen[str], started: float, found: list[float]) -> None:
    assert job.stdout is not None
    for line in job.stdout:
        if not found and line.startswith("jobs.stream: ALERT "):
            found.append(time.monotonic() - started)


def _first_overheat_row(lake: Path, started: float, job: subprocess.Popen[str]) -> float:
    reader = LakeReader(lake)

    def found() -> float | None:
        """Seconds since the start when the lake has the alert; None before."""
        seconds = time.monotonic() - started
        if job.poll() is not None:
            raise RuntimeError(f"the job exited {job.returncode} before its first alert")
        alerts = reader.read(ALERTS, ["rule"]) if (lake / ALERTS).is_dir() else None
        if alerts is not None and "overheat_reading" in alerts.column("rule").to_pylist():
            return seconds
        return None

    left = DEADLINE - (time.monotonic() - started)
    seconds = poll_until(found, left, 0.2, lambda seconds: seconds is not None)
    if seconds is None:
        raise RuntimeError(f"no overheat alert in the lake within {DEADLINE:g} s of the start")
    return seconds
