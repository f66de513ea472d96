"""``scripts/bench --anomaly``: rule sets scored on a labelled recording of a real failure
(issue 69), the way the Numenta Anomaly Benchmark frames it (bench/anomaly_score.py).

One run: a local Kafka broker (as every benchmark's), one topic, ``python -m producer
replay`` of the recording into it (as fast as possible, each reading at its recorded
event time, one sensor), then per rule set one ``availableNow`` run of the job on a lake
of its own, with the rule set as its rules file; the set's incidents are read from the
lake with ``deltalake`` (lake/reader.py) and each rule of the set is scored by its name:
one job run scores every rule of a set. No registry: the rules name no registry key, and
the job runs without one.

Rule sets (:data:`RULE_SETS`): a sweep of fixed thresholds on ``temperature_c`` in both
directions (``reading`` rules: NAB's readings are 5 minutes apart, so a 5-minute window
holds one reading and a window average is the reading itself); ``rate`` and
``deviation`` with the kinds' own defaults, skipped with a line saying so while
contract/rules.py does not know those kinds (the rules file is validated first, as the
job would). Every rule holds its incidents open for ``hold`` (30 minutes by default): at
the job's default 5 minutes, a rule firing on readings 5 minutes apart would open an
incident per reading.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.anomaly_score import LabelledWindow, Score, best_within, read_windows, score
from bench.rule_sets import rules_toml
from conf.paths import PROJECT_ROOT
from contract.rules import KINDS, RulesError, RuleSet, describe, read_rules
from contract.times import interval_seconds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAB = PROJECT_ROOT / "bench" / "data" / "nab"
RECORDING = NAB / "machine_temperature_system_failure.csv"
LABELS = NAB / "machine_temperature_system_failure.labels.json"
SENSOR_ID = "machine-temperature"
# How long an incident stays open without a new alert (every rule's resolve_after here).
HOLD = "30 minutes"
# "The best fixed threshold with at most this many false incidents" (issue 69's target).
MOST_FALSE = 2

# The fixed thresholds swept, °C: NAB's failures here are drops (values run 2 to 108.5,
# mostly 80 to 100), so most look down; a few look up.
BELOW = (10, 20, 30, 40, 45, 50, 55, 60, 65, 70)
ABOVE = (100, 102, 104, 106)


def fixed_rules() -> list[dict[str, Any]]:
    """Reading rules on temperature_c: below each of :data:`BELOW`, above each of
    :data:`ABOVE`."""
    return [
        *({"name": f"below_{t}", "kind": "reading", "field": "temperature_c", "op": "<",
           "threshold": float(t)} for t in BELOW),
        *({"name": f"above_{t}", "kind": "reading", "field": "temperature_c", "op": ">",
           "threshold": float(t)} for t in ABOVE),
    ]  # fmt: skip


def rate_rules() -> list[dict[str, Any]]:
    """``rate`` rules on temperature_c: falling faster than 0.5 and 1 °C/min, rising
    faster than 1 °C/min (NAB's readings change by less than 0.5 °C/min from one to the
    next 99 % of the time), the kind's defaults otherwise."""
    return [
        {"name": f"rate_{trend}_{str(per_minute).replace('.', '_')}", "kind": "rate",
         "field": "temperature_c", "trend": trend, "per_minute": per_minute}
        for trend, per_minute in (("falling", 0.5), ("falling", 1.0), ("rising", 1.0))
    ]  # fmt: skip


def deviation_rules() -> list[dict[str, Any]]:
    """``deviation`` rules on temperature_c with the kind's defaults (issue 69: no
    per-dataset tuning): either side of the baseline, and below it only."""
    return [
        {"name": "deviation_default", "kind": "deviation", "field": "temperature_c"},
        {"name": "deviation_below", "kind": "deviation", "field": "temperature_c",
         "direction": "below"},
    ]  # fmt: skip


@dataclass(frozen=True)
class RuleSetDef:
    """A rule set of the benchmark: its rules (without severity and hold) and what it is."""

    rules: Callable[[], list[dict[str, Any]]]
    about: str
    fixed: bool = False  # a set of fixed thresholds: the one the best is picked from


RULE_SETS: dict[str, RuleSetDef] = {
    "fixed": RuleSetDef(
        fixed_rules,
        "reading rules on temperature_c: below "
        + ", ".join(map(str, BELOW))
        + "; above "
        + ", ".join(map(str, ABOVE))
        + " (°C)",
        fixed=True,
    ),
    "rate": RuleSetDef(rate_rules, "rate of change of temperature_c, °C/min"),
    "deviation": RuleSetDef(deviation_rules, "temperature_c against its own baseline"),
}


@dataclass(frozen=True)
class AnomalyPlan:
    """What one ``--anomaly`` run scores, and how."""

    recording: Path = RECORDING
    labels: Path = LABELS
    sensor_id: str = SENSOR_ID
    hold: str = HOLD
    lead: timedelta = timedelta(0)
    most_false: int = MOST_FALSE
    sets: tuple[str, ...] = tuple(RULE_SETS)
    rows: int | None = None  # only the recording's first rows (None: all)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The plan as plain JSON values."""
        given = asdict(self)
        given.update(
            recording=str(self.recording.relative_to(PROJECT_ROOT))
            if self.recording.is_relative_to(PROJECT_ROOT)
            else str(self.recording),
            labels=str(self.labels.relative_to(PROJECT_ROOT))
            if self.labels.is_relative_to(PROJECT_ROOT)
            else str(self.labels),
            lead_min=self.lead.total_seconds() / 60,
        )
        del given["lead"], given["notes"]  # the notes go with the figures
        return given


def rule_set_document(name: str, hold: str) -> list[dict[str, Any]]:
    """The rules of set ``name``, each a warning held open for ``hold``."""
    return [
        {**rule, "severity": "warning", "resolve_after": hold} for rule in RULE_SETS[name].rules()
    ]


def prepare_rules(name: str, hold: str, path: Path) -> tuple[RuleSet | None, str | None]:
    """Write set ``name``'s rules file at ``path`` and validate it as the job would:
    (the rules, None), or (None, why the set is skipped)."""
    rules = rule_set_document(name, hold)
    path.write_text(rules_toml(rules), encoding="utf-8")
    try:
        return read_rules(path), None
    except RulesError as exc:
        unknown = sorted({r["kind"] for r in rules} - set(KINDS))
        if unknown:
            return None, (
                f"rule kind {', '.join(map(repr, unknown))} not available yet "
                f"(contract/rules.py knows {', '.join(KINDS)})"
            )
        return None, "its rules file does not validate: " + "; ".join(exc.problems)


def recording_slice(source: Path, rows: int, target: Path) -> Path:
    """The header and the first ``rows`` rows of a CSV recording, written at ``target``."""
    with source.open(encoding="utf-8", newline="") as given:
        lines = [line for _, line in zip(range(rows + 1), given, strict=False)]
    target.write_text("".join(lines), encoding="utf-8")
    return target


def replay(bootstrap: str, topic: str, recording: Path, sensor_id: str) -> dict[str, Any]:
    """``python -m producer replay`` of ``recording`` into ``topic``, as fast as possible,
    every reading at its recorded event time, as ``sensor_id``.

    Raises:
        RuntimeError: the replay failed or lost messages.
    """
    from bench.env import parse_summary

    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "producer", "replay", str(recording),
         "--bootstrap-servers", bootstrap, "--topic", topic, "--sensor-id", sensor_id,
         "--time-column", "timestamp", "--value-column", "value", "--speed", "0",
         "--metrics", "false", "--progress-interval", "3600"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"replay exited {done.returncode}:\n{done.stderr[-2000:]}")
    delivered, failed, seconds, per_second = parse_summary(done.stderr)
    return {
        "delivered": delivered,
        "failed": failed,
        "seconds": seconds,
        "msgs_per_s": round(per_second),
        "process_seconds": round(time.monotonic() - started, 2),
    }


def run_job(
    spark: SparkSession, bootstrap: str, topic: str, rules: Path, lake: Path, readers: bool
) -> float:
    """The job, availableNow, on a fresh ``lake`` with the rules file ``rules``: the
    shipped conf/pipeline.toml, the lake path alone (no real-time path, no maintenance);
    ``readers`` off: ingest alone, enough for reading rules. Returns its seconds."""
    from conf.settings import JobSettings, SettingsFile, load_settings
    from jobs.stream import DEFAULT_CONFIG, run

    given = {
        "bootstrap_servers": bootstrap, "topic": topic, "lake": lake, "rules": rules,
        "trigger": "availableNow", "readers": readers, "realtime": False, "maintenance": False,
    }  # fmt: skip
    settings = load_settings(JobSettings, given, SettingsFile(DEFAULT_CONFIG))
    started = time.monotonic()
    run(settings, spark)
    return time.monotonic() - started


def read_incidents(lake: Path) -> list[dict[str, Any]]:
    """The lake's incidents (rule, sensor_id, started_at, status, alert_count)."""
    from lake.reader import INCIDENTS, LakeReader

    found = LakeReader(lake).read(
        INCIDENTS, ["rule", "sensor_id", "started_at", "status", "alert_count"]
    )
    return [] if found is None else found.to_pylist()


def score_rules(
    incidents: Sequence[Mapping[str, Any]],
    rules: RuleSet,
    sensor_id: str,
    windows: Sequence[LabelledWindow],
    lead: timedelta,
) -> dict[str, Score]:
    """Every rule of ``rules`` scored on its own incidents of ``sensor_id``."""
    return {
        rule.name: score(
            [i for i in incidents if i["rule"] == rule.name and i["sensor_id"] == sensor_id],
            windows,
            lead,
        )
        for rule in rules.rules
    }


def measure(
    plan: AnomalyPlan,
    workdir: Path,
    figures: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Run the plan: fill ``figures["rule_sets"]`` as each set is scored (an interrupted
    run keeps what it scored)."""
    from bench.env import local_broker, new_topic
    from conf.settings import JobSettings, load_settings
    from jobs.spark_session import build_spark_session
    from jobs.writer.data_files import LAKE_SLOTS

    windows = read_windows(plan.labels)
    recording = plan.recording
    if plan.rows is not None:
        recording = recording_slice(recording, plan.rows, workdir / recording.name)
    sets: dict[str, Any] = figures.setdefault("rule_sets", {})
    ready: dict[str, tuple[RuleSet, Path]] = {}
    for name in plan.sets:
        path = workdir / f"rules-{name}.toml"
        rules, skipped = prepare_rules(name, plan.hold, path)
        if rules is None:
            say(f"{name}: skipped: {skipped}")
            sets[name] = {"about": RULE_SETS[name].about, "skipped": skipped}
        else:
            ready[name] = (rules, path)
    if not ready:
        return
    with local_broker(workdir / "kafka") as broker:
        topic = new_topic(broker.bootstrap, "anomaly", 1)  # one sensor: one partition
        say(f"replay of {recording.name} into {topic} as {plan.sensor_id}")
        figures["replay"] = replay(broker.bootstrap, topic, recording, plan.sensor_id)
        say("starting Spark")
        started = time.monotonic()
        spark = build_spark_session(
            "sensorwatch-bench-anomaly", warehouse_dir=workdir / "warehouse", master="local[2]",
            extra={LAKE_SLOTS: "2", **load_settings(JobSettings, {}).spark_conf},
        )  # fmt: skip
        figures["spark_session_start_s"] = round(time.monotonic() - started, 2)
        try:
            for name, (rules, path) in ready.items():
                readers = any(rule.kind != "reading" for rule in rules.rules)
                say(f"{name}: {len(rules.rules)} rules, the job availableNow")
                lake = workdir / f"lake-{name}"
                try:
                    seconds = run_job(spark, broker.bootstrap, topic, path, lake, readers)
                    incidents = read_incidents(lake)
                except Exception as exc:  # the next set still runs; the table says why
                    why = str(exc).splitlines()[0] if str(exc) else repr(exc)
                    say(f"{name}: failed: {why}")
                    sets[name] = {"about": RULE_SETS[name].about, "failed": why}
                    continue
                finally:
                    shutil.rmtree(lake, ignore_errors=True)
                scores = score_rules(incidents, rules, plan.sensor_id, windows, plan.lead)
                sets[name] = set_figures(name, rules, scores, seconds, plan.most_false)
        finally:
            spark.stop()


def set_figures(
    name: str, rules: RuleSet, scores: Mapping[str, Score], seconds: float, most_false: int
) -> dict[str, Any]:
    """One scored set's figures: per rule its description and score; for the fixed
    thresholds, the best with at most ``most_false`` false incidents."""
    lines = dict(zip((r.name for r in rules.rules), describe(rules.rules), strict=True))
    entry: dict[str, Any] = {
        "about": RULE_SETS[name].about,
        "job_seconds": round(seconds, 1),
        "rules": {
            rule: {"rule": lines[rule].split(": ", 1)[-1], **found.as_json()}
            for rule, found in scores.items()
        },
    }
    if RULE_SETS[name].fixed:
        entry["best_within_false"] = {
            "most_false": most_false,
            "rule": best_within(scores, most_false),
        }
    return entry


def anomaly_table(figures: dict[str, Any]) -> str:
    """The scored rules, one line each, set by set; a set skipped or failed, with why."""
    from ops.tables import fitted

    plan = figures.get("plan", {})
    machine = figures.get("machine", {})
    lines = [
        f"anomaly: {plan.get('recording')}, {len(figures.get('windows', []))} labelled windows, "
        f"lead {plan.get('lead_min', 0):g} min, every rule's resolve_after "
        f"{plan.get('hold')} ({machine.get('cpu_count')} cores)",
        "",
    ]
    rows = [("set", "rule", "detected", "false", "incidents", "median delay", "delays (h)")]
    best_lines = []
    sets = figures.get("rule_sets") or {}
    order = [*(n for n in plan.get("sets", ()) if n in sets), *sets]
    for name in dict.fromkeys(order):  # the plan's order, whichever finished first
        entry = sets[name]
        if "skipped" in entry or "failed" in entry:
            why = (
                f"skipped: {entry['skipped']}"
                if "skipped" in entry
                else f"failed: {entry['failed']}"
            )
            rows.append((name, "-", "-", "-", "-", "-", why))
            continue
        best = (entry.get("best_within_false") or {}).get("rule")
        for rule, found in entry["rules"].items():
            delay = found["median_delay_min"]
            per = [w["delay_min"] for w in found["per_window"]]
            rows.append(
                (
                    name,
                    rule + (" *" if rule == best else ""),
                    f"{found['detected']}/{found['windows']}",
                    f"{found['false_incidents']:,}",
                    f"{found['incidents']:,}",
                    "-" if delay is None else f"{delay / 60:.1f} h",
                    " ".join("-" if d is None else f"{d / 60:.1f}" for d in per),
                )
            )
        if "best_within_false" in entry:
            most = entry["best_within_false"]["most_false"]
            best_lines.append(
                f"* {name}: the best with <= {most} false incidents (most windows, then the "
                f"earliest median delay): {best or 'none detects a window'}"
            )
    lines += fitted(rows)
    lines += ["", *best_lines] if best_lines else []
    for note in figures.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def recording_facts(path: Path) -> dict[str, Any]:
    """Rows, first and last time of a ``timestamp,value`` recording."""
    with path.open(encoding="utf-8", newline="") as given:
        times = [row["timestamp"] for row in csv.DictReader(given)]
    return {
        "rows": len(times),
        "first": times[0] if times else None,
        "last": times[-1] if times else None,
    }


def main(args: argparse.Namespace, say: Callable[[str], None], machine: dict[str, Any]) -> int:
    """``scripts/bench --anomaly``: returns the exit status (0 done, 1 failed, 2 bad
    arguments, 130 interrupted). Writes anomaly.json to ``args.out`` and prints the table;
    ``machine``: the machine the figures come from."""
    from bench.report import write_json

    unknown = [name for name in args.anomaly_sets if name not in RULE_SETS]
    if unknown:
        say(f"unknown rule set {unknown[0]!r}; known: {', '.join(RULE_SETS)}")
        return 2
    try:
        interval_seconds(args.anomaly_hold)
    except ValueError as exc:
        say(f"--anomaly-hold: {exc}")
        return 2
    if args.anomaly_lead < 0 or args.anomaly_most_false < 0:
        say("--anomaly-lead and --anomaly-most-false must not be negative")
        return 2
    plan = AnomalyPlan(
        hold=args.anomaly_hold,
        lead=timedelta(minutes=args.anomaly_lead),
        most_false=args.anomaly_most_false,
        sets=tuple(args.anomaly_sets),
        rows=args.anomaly_rows,
        notes=[f"only the recording's first {args.anomaly_rows:,} rows"]
        if args.anomaly_rows
        else [],
    )
    figures: dict[str, Any] = {
        "mode": "anomaly",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "plan": plan.as_json(),
        "recording": recording_facts(plan.recording),
        "windows": [
            {"start": w.start.isoformat(), "end": w.end.isoformat()}
            for w in read_windows(plan.labels)
        ],
        "notes": list(plan.notes),
    }
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sensorwatch-anomaly-") as tmp:
        try:
            measure(plan, Path(tmp), figures, say)
        except KeyboardInterrupt:
            say("interrupted: writing what was measured")
            figures["notes"].append("interrupted before the end")
            status = 130
        except Exception as exc:
            say(f"failed: {exc}")
            figures["notes"].append(f"failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            status = 1
    figures["total_seconds"] = round(time.monotonic() - started, 1)
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(figures, args.out / "anomaly.json")
    print(anomaly_table(figures))
    say(f"wrote {args.out / 'anomaly.json'} in {figures['total_seconds']:.0f} s")
    return status
