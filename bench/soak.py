"""``scripts/bench --soak``: the job for thousands of micro-batches
(docs/architecture.md#running-for-weeks).

Everything runs as a user runs it, each its own process: a local broker, the producer on a
compressed clock, ``python -m jobs.stream`` with a 1-second trigger and its shipped
settings (whatever table maintenance it does is part of what is measured), and the
dashboard. Every ``every`` ingest micro-batches the soak records ingest's batch duration
(p50/p95 over those batches), files and log size per table, the time of
``scripts/alerts --since 1h`` and of the dashboard's API endpoints, and the job's memory.
Flat within noise is the goal; :func:`flatness` says per series how far it moved.

The compressed clock: the producer's simulated event clock (``--start-time``) sends one
reading per sensor every ``interval`` event-seconds, paced to ``rate`` messages per
wall-clock second, so event time runs ``rate * interval / sensors`` times faster than the
wall clock. At 2,000 readings/s, 1,000 sensors and a speed-up of 10 (interval 5 s), a run
of 3,000 one-second batches covers over 8 event hours: windows close, alerts and
incidents open and resolve, as over a working day.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
from pydantic import Field

from bench.plan import SEED
from bench.processes import answers, wait_for
from bench.report import OutputOptions
from bench.stats import percentile
from common.waiting import poll_until
from conf.paths import PROJECT_ROOT
from lake.layout import PIPELINE_METRICS

# A series is "flat" when the median of its last third of samples is within this factor
# of the median of its first third. On a shared 2-core machine timings move by more than
# 10 % between minutes for no reason of their own, so a tighter bound would only measure
# the neighbours.
NOISE_FACTOR = 1.25
# What the dashboard's page fetches on every refresh (ops/dashboard/static/app.js), plus
# the per-sensor statistics of the sensor it selects (the one with the most alerts).
DASHBOARD_ENDPOINTS = (
    "/api/config",
    "/api/incidents?limit=500",
    "/api/alerts/summary",
    "/api/alerts?limit=500",
    "/api/alerts/timeline",
    "/api/sensors",
    "/api/pipeline",
    "/api/pipeline/prometheus",
)
SENSOR_ENDPOINT = "/api/sensors/{sensor}/stats"
# Spark's WARN log lines and Python warnings; not "ALERT WARNING", an alert's severity.
_WARNING = re.compile(r"\bWARN\b|Warning:")
# No committed ingest batch for this long: the job is stuck or fell over.
STALL_S = 300.0
# From the job's launch to its ingest query's checkpoint (JVM and Spark start-up).
JOB_START_S = 300.0
# The SIGTERM stop: the job's own deadline is 30 s per running batch, then it flushes
# pipeline_metrics, stops Spark and prints its summary.
JOB_STOP_S = 180.0


@dataclass(frozen=True)
class SoakPlan:
    """Sizes of a soak run."""

    batches: int = 3000  # ingest micro-batches to run for
    every: int = 250  # a sample every this many ingest batches
    rate: int = 2000  # readings per wall-clock second
    sensors: int = 1000
    speedup: float = 10.0  # event seconds per wall-clock second
    partitions: int = 6
    trigger: str = "1 second"
    alerts_runs: int = 3  # scripts/alerts runs per sample (the median is kept)
    dashboard_rounds: int = 3  # rounds over the endpoints per sample (medians kept)

    @property
    def interval_s(self) -> float:
        """Event seconds between two readings of one sensor (the producer's --interval)."""
        return compressed_interval(self.rate, self.sensors, self.speedup)

    def as_json(self) -> dict[str, Any]:
        """The plan as plain JSON values."""
        return {**asdict(self), "interval_s": self.interval_s}


class SoakOptions(OutputOptions):
    """The flags of ``scripts/bench --soak``."""

    soak: bool = Field(
        False,
        description="run the soak instead of the rest (docs/architecture.md#running-for-weeks; "
        "runs alone, about an hour at the defaults): the job as a process with a 1-second "
        "trigger, the producer on a compressed event clock, the dashboard; every --soak-every "
        "ingest batches: batch duration p50/p95, files and log per table, scripts/alerts "
        "--since 1h and dashboard API times, the job's memory. Writes soak.json, soak.png and "
        "the job's log to --out",
    )
    soak_batches: int = Field(SoakPlan.batches, ge=1, description="ingest micro-batches to run for")
    soak_every: int = Field(SoakPlan.every, ge=1, description="a sample every N ingest batches")
    soak_rate: int = Field(SoakPlan.rate, ge=1, description="readings per wall-clock second")
    soak_speedup: float = Field(
        SoakPlan.speedup, gt=0, description="event seconds per wall-clock second"
    )


# -- pure parts (tests/bench/test_bench.py) ------------------------------------------------------


def compressed_interval(rate: float, sensors: int, speedup: float) -> float:
    """The producer's ``--interval`` for a clock ``speedup`` times faster than the wall:
    ``sensors / interval`` readings per event-second times ``speedup`` event-seconds per
    wall-second must be ``rate`` readings per wall-second."""
    if rate <= 0 or sensors <= 0 or speedup <= 0:
        raise ValueError("rate, sensors and speedup must be positive")
    return sensors * speedup / rate


def compressed_start(now: datetime, speedup: float, batches: int, trigger_s: float) -> datetime:
    """Where the event clock starts: as far back as the run covers at one batch per
    trigger, so event time reaches about ``now`` at the end and never runs far into the
    future (the whole minute, UTC)."""
    start = now.astimezone(UTC) - timedelta(seconds=speedup * batches * trigger_s)
    return start.replace(second=0, microsecond=0)


def committed_batches(commits: Path) -> int:
    """Ingest micro-batches committed so far: the newest batch id in the checkpoint's
    ``commits`` folder plus one (Spark deletes old commit files, so not their count)."""
    if not commits.is_dir():
        return 0
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids, default=-1) + 1


def batch_window(rows: Iterable[dict[str, Any]], low: int, high: int) -> dict[str, Any]:
    """Ingest's micro-batches with ``low <= batch_id < high`` (pipeline_metrics rows:
    batch_id, batch_duration_ms, input_rows): count, p50/p95/max duration in seconds and
    the median rows per batch. A batch listed twice (re-run) counts once, its last row."""
    by_id = {int(r["batch_id"]): r for r in rows if low <= int(r["batch_id"]) < high}
    seconds = [by_id[b]["batch_duration_ms"] / 1000 for b in sorted(by_id)]
    if not seconds:
        return {"count": 0, "p50_s": None, "p95_s": None, "max_s": None, "rows_median": None}
    return {
        "count": len(seconds),
        "p50_s": round(percentile(seconds, 50), 3),
        "p95_s": round(percentile(seconds, 95), 3),
        "max_s": round(max(seconds), 3),
        "rows_median": round(statistics.median(int(r["input_rows"]) for r in by_id.values())),
    }


def flatness(
    values: Sequence[float | None], skip: int = 0, noise: float = NOISE_FACTOR
) -> dict[str, Any]:
    """Whether a series stayed flat: the median of its last third of samples over the
    median of its first third (after leaving out the first ``skip``, e.g. warm-up).

    Verdict "flat" within ``noise`` either way, else "grows" or "shrinks"; "too few
    samples" under two. A series at zero stays "flat" at zero.
    """
    kept = [float(v) for v in list(values)[skip:] if v is not None]
    if len(kept) < 2:
        return {"first": None, "last": None, "ratio": None, "verdict": "too few samples"}
    third = max(1, len(kept) // 3)
    first, last = statistics.median(kept[:third]), statistics.median(kept[-third:])
    if first == 0:
        ratio = None if last else 1.0
        verdict = "grows" if last else "flat"
    else:
        ratio = last / first
        verdict = "flat" if 1 / noise <= ratio <= noise else ("grows" if ratio > 1 else "shrinks")
    return {
        "first": round(first, 3),
        "last": round(last, 3),
        "ratio": None if ratio is None else round(ratio, 2),
        "verdict": verdict,
    }


def commit_totals(exposition: str) -> dict[str, tuple[float, float]]:
    """Table -> (seconds, commits) of the job's ``sensorwatch_commit_duration_seconds``
    histogram, from its /metrics text."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name != "sensorwatch_commit_duration_seconds":
            continue
        for sample in family.samples:
            table = sample.labels.get("table")
            if table and sample.name.endswith("_sum"):
                totals.setdefault(table, [0.0, 0.0])[0] = sample.value
            elif table and sample.name.endswith("_count"):
                totals.setdefault(table, [0.0, 0.0])[1] = sample.value
    return {table: (seconds, count) for table, (seconds, count) in totals.items()}


def commit_means(
    now: dict[str, tuple[float, float]], before: dict[str, tuple[float, float]]
) -> dict[str, float | None]:
    """Table -> mean milliseconds per commit between two :func:`commit_totals` (None for
    a table with no commit in between)."""
    means: dict[str, float | None] = {}
    for table, (seconds, count) in sorted(now.items()):
        was_seconds, was_count = before.get(table, (0.0, 0.0))
        commits = count - was_count
        means[table] = round(1000 * (seconds - was_seconds) / commits, 2) if commits > 0 else None
    return means


def series(samples: Sequence[dict[str, Any]], *path: str) -> list[Any]:
    """One figure across the samples, by its keys (None where a sample lacks it)."""
    out: list[Any] = []
    for sample in samples:
        value: Any = sample
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out.append(value)
    return out


def verdicts(samples: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`flatness` of every series the soak is about. Ingest's batch times leave out
    the first sample (JVM warm-up, code generation, the first batches' backlog)."""
    result = {
        "ingest_batch_p50_s": flatness(series(samples, "ingest", "p50_s"), skip=1),
        "ingest_batch_p95_s": flatness(series(samples, "ingest", "p95_s"), skip=1),
        "alerts_cli_s": flatness(series(samples, "alerts_cli_s")),
        "dashboard_slowest_s": flatness(series(samples, "dashboard_slowest", "seconds")),
        "job_pss_mb": flatness(series(samples, "job_memory", "pss_mb")),
        "job_peak_pss_mb": flatness(series(samples, "job_memory_peak", "pss_mb")),
        "job_jvm_pss_mb": flatness(series(samples, "job_memory", "jvm_pss_mb")),
        "job_workers_pss_mb": flatness(series(samples, "job_memory", "workers_pss_mb")),
        "windows_state_rows": flatness(series(samples, "windows_state_rows")),
    }
    # Each table's commit time, from the job's /metrics (the incidents MERGE among them:
    # its cost must not grow with the table).
    for name in sorted({name for s in samples for name in s.get("commit_ms") or {}}):
        result[f"{name}.commit_ms"] = flatness(series(samples, "commit_ms", name), skip=1)
    tables = sorted({name for s in samples for name in s.get("tables", {})})
    for name in tables:
        result[f"{name}.live_files"] = flatness(series(samples, "tables", name, "live_files"))
        result[f"{name}.log_files"] = flatness(series(samples, "tables", name, "log_files"))
    queries = sorted({name for s in samples for name in s.get("checkpoints", {})})
    for name in queries:
        result[f"checkpoint {name}.files"] = flatness(series(samples, "checkpoints", name, "files"))
        result[f"checkpoint {name}.mb"] = flatness(series(samples, "checkpoints", name, "mb"))
    return result


# -- what a sample reads --------------------------------------------------------------------


def folder_size(path: Path, skip: str | None = None) -> tuple[int, int]:
    """(files, bytes) under ``path``, leaving out sub-folders named ``skip``. Files that
    vanish while walking (VACUUM, Spark's clean-up) are not counted."""
    files = size = 0
    for root, dirs, names in os.walk(path):
        if skip is not None and skip in dirs:
            dirs.remove(skip)
        for name in names:
            with suppress(OSError):
                size += (Path(root) / name).stat().st_size
                files += 1
    return files, size


def table_stats(path: Path) -> dict[str, Any]:
    """A Delta table's live data files (in its current version), its files and bytes on
    disk (live or not yet vacuumed, with Hadoop's .crc files), its log's files and bytes,
    and its rows (from the log's per-file statistics, no data read)."""
    from deltalake import DeltaTable  # imported here: --help must stay fast

    files, size = folder_size(path, skip="_delta_log")
    log_files, log_bytes = folder_size(path / "_delta_log")
    stats: dict[str, Any] = {
        "files": files,
        "mb": round(size / 2**20, 2),
        "log_files": log_files,
        "log_mb": round(log_bytes / 2**20, 3),
    }
    for attempt in range(3):  # a commit or a log clean-up between listing and reading
        try:
            table = DeltaTable(str(path))
            actions = table.get_add_actions(flatten=True)
            records = actions.column("num_records").to_pylist()
            stats.update(
                version=table.version(),
                live_files=len(table.file_uris()),
                rows=sum(r or 0 for r in records),
            )
            break
        except Exception as exc:  # deltalake raises several kinds; kept in the figures
            if attempt == 2:
                stats["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            time.sleep(0.5)  # retry after the writer is done; bounded by the loop
    return stats


def lake_tables(lake: Path) -> list[Path]:
    """Every Delta table of the lake (a folder with a _delta_log), ``_panes`` included."""
    if not lake.is_dir():
        return []
    return sorted(p for p in lake.iterdir() if (p / "_delta_log").is_dir())


def checkpoint_stats(lake: Path) -> dict[str, dict[str, Any]]:
    """Files and MiB per query checkpoint, and of its state store on its own."""
    root = lake / "_checkpoints"
    result: dict[str, dict[str, Any]] = {}
    for query in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        files, size = folder_size(query)
        state_files, state_size = folder_size(query / "state")
        result[query.name] = {
            "files": files,
            "mb": round(size / 2**20, 2),
            "state_files": state_files,
            "state_mb": round(state_size / 2**20, 2),
        }
    return result


def read_metrics(lake: Path) -> list[dict[str, Any]]:
    """pipeline_metrics rows (query, batch_id, batch_duration_ms, input_rows, watermark,
    state_rows); empty before the job's first flush."""
    from deltalake import DeltaTable

    from lake.reader import read_table  # the ops readers' own way to read a table

    path = lake / PIPELINE_METRICS
    if not (path / "_delta_log").is_dir():
        return []
    columns = ["query", "batch_id", "batch_duration_ms", "input_rows", "watermark", "state_rows"]
    return read_table(DeltaTable(str(path)), columns).to_pylist()


def ingested_offsets(checkpoint: Path, batch: int) -> int | None:
    """Kafka offsets the ingest query had read up to after batch ``batch`` (its offsets
    file: a version line, a metadata line, one JSON line of topic -> partition -> offset
    per source), summed; None when the file is gone."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    total = 0
    for line in lines[2:]:
        with suppress(ValueError, AttributeError):
            for partitions in json.loads(line).values():
                total += sum(int(v) for v in partitions.values())
    return total


def time_alerts_cli(lake: Path, runs: int) -> dict[str, Any]:
    """Wall time of ``scripts/alerts --lake LAKE --since 1h`` as a user runs it (a new
    process each time, interpreter start-up included): every run and the median."""
    times: list[float] = []
    failures: list[str] = []
    for _ in range(runs):
        start = time.monotonic()
        done = subprocess.run(
            [str(PROJECT_ROOT / "scripts" / "alerts"), "--lake", str(lake), "--since", "1h"],
            cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            timeout=300,
        )  # fmt: skip
        times.append(time.monotonic() - start)
        if done.returncode != 0:
            failures.append(f"exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return {
        "seconds": round(statistics.median(times), 3),
        "runs_s": [round(t, 3) for t in times],
        "errors": failures,
    }


def _get(url: str, timeout: float = 120.0) -> tuple[float, Any]:
    """(seconds, decoded JSON) of one GET.

    Raises:
        OSError: no answer or an error status.
    """
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        body = answer.read()
    return time.monotonic() - start, json.loads(body)


def time_dashboard(base: str, rounds: int) -> dict[str, Any]:
    """Every API endpoint the dashboard's page fetches, one after another, ``rounds``
    times; per endpoint the median seconds, and the slowest endpoint. The per-sensor
    statistics are those of the sensor the page selects (most alerts first)."""
    times: dict[str, list[float]] = {}
    errors: list[str] = []
    for _ in range(rounds):
        sensor = None
        for endpoint in DASHBOARD_ENDPOINTS:
            try:
                seconds, body = _get(base + endpoint)
            except (OSError, ValueError) as exc:
                errors.append(f"{endpoint}: {exc}")
                continue
            times.setdefault(endpoint, []).append(seconds)
            if endpoint == "/api/sensors" and body.get("sensors"):
                sensor = body["sensors"][0]["sensor_id"]
        if sensor is not None:
            path = SENSOR_ENDPOINT.format(sensor=urllib.parse.quote(sensor, safe=""))
            try:
                seconds, _ = _get(base + path)
                times.setdefault(SENSOR_ENDPOINT, []).append(seconds)
            except (OSError, ValueError) as exc:
                errors.append(f"{path}: {exc}")
    medians = {k: round(statistics.median(v), 3) for k, v in times.items()}
    slowest = max(medians, key=lambda k: medians[k], default=None)
    return {
        "endpoints_s": medians,
        "slowest": {"endpoint": slowest, "seconds": medians.get(slowest) if slowest else None},
        "errors": errors[:10],
    }


MEMORY_PARTS = ("python", "jvm", "workers")  # the root process, Java children, the others


def _no_memory() -> dict[str, float]:
    return {
        f"{part}{kind}_mb": 0.0 for part in ("", *(f"{p}_" for p in MEMORY_PARTS))
        for kind in ("rss", "pss")
    }  # fmt: skip


class TreeMemory:
    """Memory of a process and its descendants (the job: its Python driver, Spark's JVM,
    Spark's Python workers), sampled in a background thread: RSS, and PSS (shared pages
    counted once, as the other bench figures) where the system reports it, in all
    (``rss_mb``, ``pss_mb``) and by part (``python_``, ``jvm_``, ``workers_``...): where
    memory goes, so that a change to one part shows as such."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        self.pid, self.interval = pid, interval
        self.now = _no_memory()
        self.peak = _no_memory()  # of the whole run, each figure its own peak
        self._window_peak = _no_memory()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-memory", daemon=True)

    def sample(self) -> dict[str, float]:
        """RSS and PSS now, in all and by part, MiB (zero once the process is gone)."""
        held = {f"{part}_{kind}": 0 for part in MEMORY_PARTS for kind in ("rss", "pss")}
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return _no_memory()
        for process in processes:
            try:
                part = (
                    "python" if process.pid == self.pid
                    else "jvm" if process.name() == "java" else "workers"
                )  # fmt: skip
                try:
                    info = process.memory_full_info()
                except psutil.AccessDenied:
                    info = process.memory_info()
            except psutil.Error:
                continue  # ended between listing and reading
            held[f"{part}_rss"] += info.rss
            held[f"{part}_pss"] += getattr(info, "pss", info.rss)  # no PSS here: RSS
        for kind in ("rss", "pss"):
            held[kind] = sum(held[f"{part}_{kind}"] for part in MEMORY_PARTS)
        return {f"{key}_mb": round(value / 2**20, 1) for key, value in held.items()}

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = self.sample()
            with self._lock:
                self.now = now
                self.peak = {k: max(self.peak[k], v) for k, v in now.items()}
                self._window_peak = {k: max(self._window_peak[k], v) for k, v in now.items()}

    def take_peak(self) -> dict[str, float]:
        """The peak since the last call (a growing peak shows; a run-wide one hides it)."""
        with self._lock:
            peak, self._window_peak = self._window_peak, _no_memory()
        return peak

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout=10)


# -- the run --------------------------------------------------------------------------------


def _tail(path: Path, lines: int = 30) -> str:
    with suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def log_findings(path: Path) -> dict[str, Any]:
    """What the job printed that deserves a look: error and warning lines (first few of
    each, and how many), and its final summary lines."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    errors = [
        line
        for line in text
        if "ERROR" in line or "Traceback" in line or "Exception" in line or " failed" in line
    ]
    warnings = [line for line in text if _WARNING.search(line)]
    ends = [i for i, line in enumerate(text) if line.endswith("jobs.stream: stopped")]
    stopped = ends[-1] if ends else None
    return {
        "lines": len(text),
        "error_lines": len(errors),
        "first_errors": [line[:300] for line in errors[:10]],
        "warning_lines": len(warnings),
        "first_warnings": [line[:300] for line in warnings[:10]],
        "summary": text[stopped:] if stopped is not None else [],
    }


class Soak:
    """One soak run in ``workdir``; :meth:`run` fills ``figures`` as it goes, so an
    interrupted run still leaves what it measured."""

    def __init__(
        self,
        plan: SoakPlan,
        workdir: Path,
        out: Path,
        figures: dict[str, Any],
        say: Callable[[str], None],
    ) -> None:
        self.plan, self.workdir, self.out, self.figures, self.say = plan, workdir, out, figures, say
        self.lake = workdir / "lake"
        self.commits = self.lake / "_checkpoints" / "ingest" / "commits"
        self.job: subprocess.Popen[bytes] | None = None
        self.dashboard: subprocess.Popen[bytes] | None = None
        self.producer: Any = None
        self.memory: TreeMemory | None = None
        self._commits_before: dict[str, tuple[float, float]] = {}

    def _alive(self) -> None:
        for name, proc in (("the job", self.job), ("the dashboard", self.dashboard)):
            if proc is not None and proc.poll() is not None:
                log = self.out / f"soak-{name.split()[-1]}.log"
                raise RuntimeError(f"{name} exited {proc.returncode}:\n{_tail(log)}")
        if self.producer is not None and self.producer.proc.poll() is not None:
            raise RuntimeError(f"the producer exited {self.producer.proc.returncode}")

    def run(self) -> None:
        """Start everything, sample until ``plan.batches`` ingest batches, stop."""
        from bench.env import Producer, local_broker, new_topic
        from local_stack.server import free_port
        from producer.fleet import build_fleet, write_registry

        plan = self.plan
        self.out.mkdir(parents=True, exist_ok=True)
        with local_broker(self.workdir / "kafka") as broker:
            topic = new_topic(broker.bootstrap, "soak", plan.partitions)
            # The registry of the producer's fleet (the same function and seed as its
            # --registry-out), written first: the job needs it at start, and the producer
            # starts only once the job is up, so its readings are not a start-up backlog.
            registry = self.workdir / "fleet.jsonl"
            write_registry(build_fleet(plan.sensors, SEED), registry)
            start = compressed_start(
                datetime.now(UTC), plan.speedup, plan.batches, _trigger_seconds(plan.trigger)
            )
            self.figures["clock"] = {
                "start_time": start.isoformat().replace("+00:00", "Z"),
                "interval_s": plan.interval_s,
                "speedup": plan.speedup,
                "how": "producer --start-time START --interval SENSORS*SPEEDUP/RATE --rate "
                "RATE: event time runs SPEEDUP times faster than the wall clock",
            }
            self.say(f"broker at {broker.bootstrap}; starting the job ({plan.trigger} trigger)")
            started = time.monotonic()
            job_log = (self.out / "soak-job.log").open("wb")
            self.job = subprocess.Popen(
                [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", broker.bootstrap,
                 "--topic", topic, "--lake", str(self.lake), "--registry", str(registry),
                 "--trigger", plan.trigger, "--metrics-port", "0"],
                cwd=PROJECT_ROOT, stdout=job_log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.memory = TreeMemory(self.job.pid)
            self.memory.start()
            port = free_port()
            dash_log = (self.out / "soak-dashboard.log").open("wb")
            # Alertmanager: a free port nothing listens on, so /api/incidents answers
            # without silence state at once instead of asking someone else's.
            self.dashboard = subprocess.Popen(
                [sys.executable, "-m", "ops.dashboard", "--lake", str(self.lake),
                 "--port", str(port), "--registry", str(registry),
                 "--alertmanager-url", f"http://127.0.0.1:{free_port()}"],
                cwd=PROJECT_ROOT, stdout=dash_log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            try:
                wait_for("the dashboard", lambda: answers(base + "/healthz"), 60, self._alive)
                wait_for(
                    "the job's ingest query",
                    lambda: (self.commits.parent / "metadata").exists(),
                    JOB_START_S,
                    self._alive,
                )
                self.figures["job_start_s"] = round(time.monotonic() - started, 1)
                self.say(
                    f"job up after {self.figures['job_start_s']:.0f} s; producer: "
                    f"{plan.rate:,}/s, {plan.sensors:,} sensors, event clock x{plan.speedup:g} "
                    f"from {self.figures['clock']['start_time']}"
                )
                self.producer = Producer(
                    broker.bootstrap, topic, "--rate", plan.rate, "--sensors", plan.sensors,
                    "--interval", plan.interval_s, "--start-time",
                    self.figures["clock"]["start_time"], "--seed", SEED,
                )  # fmt: skip
                self._sample_loop(broker.bootstrap, topic, base, started)
            finally:
                self._stop_all()
                job_log.close()
                dash_log.close()
                self.figures["job_log"] = log_findings(self.out / "soak-job.log")
                self.figures["verdicts"] = verdicts(self.figures["samples"])

    def _sample_loop(self, bootstrap: str, topic: str, base: str, started: float) -> None:
        plan = self.plan
        samples: list[dict[str, Any]] = self.figures["samples"]
        last_count, last_change = 0, time.monotonic()
        window_started = time.monotonic()
        for target in range(plan.every, plan.batches + 1, plan.every):
            while (count := committed_batches(self.commits)) < target:
                self._alive()
                if count != last_count:
                    last_count, last_change = count, time.monotonic()
                elif time.monotonic() - last_change > STALL_S:
                    raise RuntimeError(
                        f"no ingest batch committed for {STALL_S:.0f} s (at batch {count})"
                    )
                time.sleep(1.0)  # sampling period; the loop ends at the stall deadline
            window_s = time.monotonic() - window_started
            window_started = time.monotonic()
            sample = self._sample(target, count, base, bootstrap, topic, started, window_s)
            samples.append(sample)
            ingest = sample["ingest"]
            self.say(
                f"batch {count:,}: ingest p50 {ingest['p50_s']} s, p95 {ingest['p95_s']} s; "
                f"live files {sum(t.get('live_files', 0) for t in sample['tables'].values())}; "
                f"alerts CLI {sample['alerts_cli_s']} s; dashboard slowest "
                f"{sample['dashboard_slowest']['seconds']} s "
                f"({sample['dashboard_slowest']['endpoint']}); backlog {sample['backlog']}"
            )

    def _sample(
        self,
        target: int,
        count: int,
        base: str,
        bootstrap: str,
        topic: str,
        started: float,
        window_s: float,
    ) -> dict[str, Any]:
        """One sample, after ingest batch ``target - 1`` committed."""
        from bench.env import topic_size

        plan = self.plan
        # pipeline_metrics is flushed every few seconds (metrics_flush_seconds): wait
        # until it holds the window's last batch, or take what is there.
        rows = poll_until(
            lambda: read_metrics(self.lake),
            60,
            1.0,
            lambda rows: (
                max((r["batch_id"] for r in rows if r["query"] == "ingest"), default=-1)
                >= target - 1
            ),
        )
        ingest_rows = [r for r in rows if r["query"] == "ingest"]
        window = batch_window(ingest_rows, target - plan.every, target)
        windows_rows = [r for r in rows if r["query"] == "windows"]
        watermark = max((r["watermark"] for r in windows_rows if r["watermark"]), default=None)
        newest = max(windows_rows, key=lambda r: r["batch_id"], default=None)
        # Ingest's committed offsets first, then the topic's end: the backlog right now.
        ingested = ingested_offsets(self.commits.parent, committed_batches(self.commits) - 1)
        produced = topic_size(bootstrap, topic, plan.partitions)
        tables = {p.name: table_stats(p) for p in lake_tables(self.lake)}
        commits = self._commit_totals()
        commit_ms = commit_means(commits, self._commits_before)
        self._commits_before = commits
        cli = time_alerts_cli(self.lake, plan.alerts_runs)
        dashboard = time_dashboard(base, plan.dashboard_rounds)
        memory = self.memory
        clock = datetime.fromisoformat(self.figures["clock"]["start_time"].replace("Z", "+00:00"))
        return {
            "batches": target,
            "committed_at_sample": count,
            "wall_s": round(time.monotonic() - started, 1),
            "window_wall_s": round(window_s, 1),
            "ingest": window,
            "windows_batches": len({r["batch_id"] for r in windows_rows}),
            # Rows in the windows query's state (dedup keys, open panes): bounded by the
            # watermark, or the state grows with the run.
            "windows_state_rows": newest["state_rows"] if newest else None,
            "event_hours": round((watermark.replace(tzinfo=UTC) - clock).total_seconds() / 3600, 2)
            if watermark is not None
            else None,
            "produced": produced,
            "backlog": produced - ingested if ingested is not None else None,
            "tables": tables,
            "commit_ms": commit_ms,
            "checkpoints": checkpoint_stats(self.lake),
            "alerts_cli_s": cli["seconds"],
            "alerts_cli": cli,
            "dashboard_slowest": dashboard["slowest"],
            "dashboard": dashboard,
            "job_memory": dict(memory.now) if memory else {},
            "job_memory_peak": memory.take_peak() if memory else {},
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }

    def _commit_totals(self) -> dict[str, tuple[float, float]]:
        """The job's commit times so far, from its /metrics (nothing when it has none)."""
        log = (self.out / "soak-job.log").read_text(encoding="utf-8", errors="replace")
        found = re.search(r"metrics at (http://\S+/metrics)", log)
        if found is None:
            return {}
        try:
            with urllib.request.urlopen(found[1], timeout=30) as answer:
                return commit_totals(answer.read().decode("utf-8"))
        except OSError:
            return {}

    def _stop_all(self) -> None:
        """Producer, dashboard, then the job (SIGTERM: it stops between two batches and
        prints a summary); killed only when they do not stop in time."""
        if self.producer is not None:
            if self.producer.proc.poll() is None:
                self.producer.proc.send_signal(signal.SIGTERM)
            try:
                sent = self.producer.finish(timeout=60)
                self.figures["producer"] = {
                    "delivered": sent.delivered,
                    "failed": sent.failed,
                    "seconds": sent.seconds,
                    "msgs_per_s": round(sent.rate),
                }
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
                self.figures["producer"] = {"error": str(exc)[-500:]}
            finally:
                self.producer.stop()
        for name, proc, timeout in (
            ("dashboard", self.dashboard, 30.0),
            ("job", self.job, JOB_STOP_S),
        ):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.say(f"{name} did not stop within {timeout:.0f} s: killing it")
                    proc.kill()
                    proc.wait()
            self.figures[f"{name}_exit"] = proc.returncode
        if self.memory is not None:
            self.memory.stop()
            self.figures["job_memory_peak"] = dict(self.memory.peak)


def _trigger_seconds(trigger: str) -> float:
    """Seconds of an interval trigger such as "1 second" or "2 seconds"."""
    number, _, unit = trigger.strip().partition(" ")
    scale = {"second": 1, "minute": 60}.get(unit.rstrip("s").strip() or "second", 1)
    return float(number) * scale


def run_soak(plan: SoakPlan, workdir: Path, out: Path, figures: dict[str, Any], say: Any) -> None:
    """Run a soak; ``figures`` gets the clock, every sample, the verdicts and what the
    job printed (also when it fails or is interrupted)."""
    figures.setdefault("samples", [])
    figures["plan"] = plan.as_json()
    Soak(plan, workdir, out, figures, say).run()
