"""``scripts/bench --learned-state``: what the learned rules' state costs per sensor
(issue 69: "memory per sensor measured and documented for 100,000 sensors").

The ``deviation`` rule's state is one row of ``_baselines`` per (sensor, rule), two once
pruned (jobs/writer/baseline_pruning.py); the ``rate`` rule keeps none (it reads the panes
back). Measured for ``sensors`` sensors and one rule of each kind:

- the state's bytes: on disk (the pruned Delta table's Parquet files), as Arrow (what a
  batch reads) and as pandas (what one sensor's group costs the Python worker, times
  the sensors of a batch);
- one windows batch that closed a pane of every sensor: learned_results on static
  DataFrames (the panes, ``rate_reach`` of earlier panes, the pruned table), alerts
  collected and the moved baselines counted as the job would write them; its seconds
  and the peak resident memory of the JVM and its Python workers meanwhile, sampled.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
from pydantic import Field

from bench.report import OutputOptions
from contract.rules.parsing import parse_rules
from lake.layout import BASELINES

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
RULES = {
    "rule": [
        {"name": "warming_fast", "kind": "rate", "severity": "warning", "field": "temperature_c",
         "per_minute": 0.2, "window": "10 minutes", "for": "3 minutes"},
        {"name": "off_normal", "kind": "deviation", "severity": "warning",
         "field": "temperature_c"},
    ]
}  # fmt: skip


def baseline_rows(sensors: int, batches: tuple[int, ...] = (8, 9)) -> pa.Table:
    """The pruned ``_baselines`` of ``sensors`` sensors and the deviation rule: one row
    per sensor for each of ``batches``."""
    from jobs.spark.arrow_schema import arrow_schema
    from jobs.writer.tables import BASELINES_SCHEMA

    names = [f"sensor-{i:06d}" for i in range(sensors)]
    rng = random.Random(69)  # values as varied as real ones: Parquet compresses constants
    columns = {
        "sensor_id": names * len(batches),
        "rule": ["off_normal"] * sensors * len(batches),
        "params": ['{"deviations":3.0,"direction":"both","horizon_s":86400.0}']
        * sensors
        * len(batches),
        "writer": ["windows-00000000-0000-0000-0000-000000000000"] * sensors * len(batches),
        "batch_id": [b for b in batches for _ in range(sensors)],
        "mean": [rng.uniform(-20.0, 40.0) for _ in range(sensors * len(batches))],
        "var": [rng.uniform(0.01, 4.0) for _ in range(sensors * len(batches))],
        "learned_s": [rng.uniform(0, 86_400.0) for _ in range(sensors * len(batches))],
        "taught": [rng.randrange(10, 1_440) for _ in range(sensors * len(batches))],
        "last_pane": [T0 + b * MINUTE for b in batches for _ in range(sensors)],
        "breach_since": [None] * sensors * len(batches),
    }
    return pa.Table.from_pydict(columns, arrow_schema(BASELINES_SCHEMA))


def state_bytes(sensors: int, workdir: Path) -> dict[str, float]:
    """The pruned state's bytes per sensor: on disk, as Arrow, as pandas."""
    from deltalake import DeltaTable, write_deltalake

    from jobs.spark.arrow_schema import arrow_schema
    from jobs.writer.tables import BASELINES_SCHEMA

    rows = baseline_rows(sensors)
    path = workdir / BASELINES
    write_deltalake(str(path), rows.cast(arrow_schema(BASELINES_SCHEMA)), mode="overwrite")
    disk = sum(f.stat().st_size for f in path.glob("*.parquet"))
    frame = rows.to_pandas()
    assert len(DeltaTable(str(path)).file_uris()) >= 1
    return {
        "rows": rows.num_rows,
        "disk_bytes_per_sensor": round(disk / sensors, 1),
        "arrow_bytes_per_sensor": round(rows.nbytes / sensors, 1),
        "pandas_bytes_per_sensor": round(int(frame.memory_usage(deep=True).sum()) / sensors, 1),
    }


class PeakMemory:
    """The peak resident memory of this process's children (the JVM, its Python workers)
    sampled every ``every`` seconds on a thread, by kind."""

    def __init__(self, every: float = 0.2) -> None:
        self.every = every
        self.peak: dict[str, int] = {"jvm": 0, "python_workers": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(self.every):
            jvm = workers = 0
            for child in me.children(recursive=True):
                try:
                    rss, name = child.memory_info().rss, " ".join(child.cmdline()[:3])
                except psutil.Error:
                    continue
                if "java" in name:
                    jvm += rss
                else:
                    workers += rss
            self.peak["jvm"] = max(self.peak["jvm"], jvm)
            self.peak["python_workers"] = max(self.peak["python_workers"], workers)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def pane_frame(spark, sensors: int, minutes: range):  # type: ignore[no-untyped-def]
    """One pane per sensor per minute of ``minutes`` (two readings each), as _panes rows."""
    from pyspark.sql import functions as F

    from jobs.writer.tables import PANES_SCHEMA

    ids = spark.range(sensors).withColumnRenamed("id", "n")
    offsets = spark.range(minutes.start, minutes.stop).withColumnRenamed("id", "m")
    start = F.lit(T0) + F.make_dt_interval(F.lit(0), F.lit(0), F.col("m").cast("int"))
    value = F.lit(20.0) + (F.col("n") % 100) / 10
    columns = {
        "sensor_id": F.format_string("sensor-%06d", F.col("n")),
        "window_start": start,
        "window_end": start + F.expr("INTERVAL 1 MINUTE"),
        "readings": F.lit(2).cast("long"),
        "sum_temperature_c": 2 * value,
        "min_temperature_c": value,
        "max_temperature_c": value,
        "sum_humidity_pct": F.lit(80.0),
        "first_reading_at": start,
        "last_reading_at": start + F.expr("INTERVAL 30 SECONDS"),
        "min_humidity_pct": F.lit(40.0),
        "max_humidity_pct": F.lit(40.0),
        "sum_battery_pct": F.lit(180.0),
        "min_battery_pct": F.lit(90.0),
        "max_battery_pct": F.lit(90.0),
    }
    frame = ids.crossJoin(offsets)
    return frame.select(
        *(columns[f.name].cast(f.dataType).alias(f.name) for f in PANES_SCHEMA.fields)
    )


def one_batch(sensors: int, workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """A windows batch that closed one pane of every sensor (minute 10), with the ten
    minutes before it as earlier panes and the pruned state of batches 8 and 9: its
    seconds (the second of two runs: the first pays the JVM's warm-up) and peak memory."""
    from pyspark.sql import functions as F

    from conf.settings.base import load_settings
    from conf.settings.job import JobSettings
    from jobs.alerting.learned_rules import learned_results, learned_rules
    from jobs.spark.spark_session import build_spark_session

    rule_set = parse_rules(RULES)
    learned = learned_rules(rule_set, {})
    spark = build_spark_session(
        "sensorwatch-bench-learned-state", warehouse_dir=workdir / "warehouse",
        master="local[2]", extra=load_settings(JobSettings, {}).spark_conf,
    )  # fmt: skip
    try:
        registry = spark.createDataFrame([], "sensor_id string, site string")
        new = pane_frame(spark, sensors, range(10, 11)).cache()
        earlier = pane_frame(spark, sensors, range(0, 10)).cache()
        baselines = spark.read.format("delta").load(str(workdir / BASELINES))
        new.count(), earlier.count()
        runs = []
        for attempt in range(2):
            with PeakMemory() as peak:
                started = time.monotonic()
                judged = learned_results(
                    learned, new, earlier, baselines, registry, F.current_timestamp(),
                    "windows-00000000-0000-0000-0000-000000000000", 10,
                )  # fmt: skip
                alerts = judged.alerts.count()
                moved = judged.baselines.count()
                seconds = time.monotonic() - started
                judged.release()
            runs.append((seconds, dict(peak.peak), alerts, moved))
            say(f"learned state: batch run {attempt + 1}: {seconds:.1f} s, {moved:,} baselines")
        seconds, peak_rss, alerts, moved = runs[-1]
        return {
            "seconds_first": round(runs[0][0], 2),
            "seconds": round(seconds, 2),
            "alerts": alerts,
            "baselines_moved": moved,
            "peak_rss_mib": {k: round(v / 2**20) for k, v in peak_rss.items()},
        }
    finally:
        spark.stop()


class LearnedStateOptions(OutputOptions):
    """The flags of ``scripts/bench --learned-state``."""

    learned_state: bool = Field(
        False,
        description="run it instead of the rest (issue 69; a minute or two): what the learned "
        "rules' state costs per sensor: the deviation rule's pruned _baselines on disk, as "
        "Arrow and as pandas, and one windows batch closing a pane of every sensor: its "
        "seconds and the peak memory of the JVM and the Python workers. Writes "
        "learned_state.json to --out",
    )
    learned_sensors: int = Field(100_000, ge=1, description="sensors")


def main(args: LearnedStateOptions, say: Callable[[str], None], machine: dict[str, Any]) -> int:
    """``scripts/bench --learned-state``: writes learned_state.json to ``args.out`` and
    prints the figures; returns the exit status."""
    from bench.report import write_json

    sensors = args.learned_sensors
    figures: dict[str, Any] = {
        "mode": "learned_state",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "sensors": sensors,
        "rules": RULES["rule"],
    }
    with tempfile.TemporaryDirectory(prefix="sensorwatch-learned-") as tmp:
        workdir = Path(tmp)
        figures["state"] = state_bytes(sensors, workdir)
        say(f"learned state: {figures['state']}")
        figures["batch"] = one_batch(sensors, workdir, say)
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(figures, args.out / "learned_state.json")
    state, batch = figures["state"], figures["batch"]
    print(
        f"learned state, {sensors:,} sensors, one deviation and one rate rule:\n"
        f"  state per sensor: {state['disk_bytes_per_sensor']:.0f} B on disk, "
        f"{state['arrow_bytes_per_sensor']:.0f} B as Arrow, "
        f"{state['pandas_bytes_per_sensor']:.0f} B as pandas ({state['rows']:,} rows pruned)\n"
        f"  a batch closing a pane of every sensor: {batch['seconds']:.1f} s "
        f"(first {batch['seconds_first']:.1f} s), {batch['baselines_moved']:,} baselines moved, "
        f"peak RSS JVM {batch['peak_rss_mib']['jvm']:,} MiB, Python workers "
        f"{batch['peak_rss_mib']['python_workers']:,} MiB"
    )
    return 0
