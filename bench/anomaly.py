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
contract/rules/model.py does not know those kinds (the rules file is validated first, as the
job would). Every rule holds its incidents open for ``hold`` (30 minutes by default): at
the job's default 5 minutes, a rule firing on readings 5 minutes apart would open an
incident per reading.
"""

from __future__ import annotations

import csv
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from bench.anomaly_score import LabelledWindow, Score, best_within, score
from bench.recordings import (
    FIELD,
    MIN_HOLD,
    Recording,
    RecordingError,
    labels_for,
    read_recording,
    read_windows,
    write_mapped,
)
from bench.report import OutputOptions
from bench.rule_sets import rules_toml
from conf.paths import PROJECT_ROOT
from contract.rules.model import KINDS, RuleSet
from contract.rules.parsing import RulesError, read_rules
from contract.times import interval_seconds
from ops.rules_cli import describe

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
# On another recording, the thresholds are its own quantiles (of the values replayed).
LOW_QUANTILES = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1)
HIGH_QUANTILES = (0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def _bundled(recording: Recording | None) -> bool:
    return recording is None or recording.path.resolve() == RECORDING.resolve()


def fixed_rules(recording: Recording | None = None) -> list[dict[str, Any]]:
    """Reading rules on temperature_c. On the bundled recording (or none given): below
    each of :data:`BELOW`, above each of :data:`ABOVE` (°C). On another: below each of
    its :data:`LOW_QUANTILES`, above each of its :data:`HIGH_QUANTILES` (named by the
    quantile, e.g. ``below_q1`` for the 1 % quantile), as it is replayed."""
    if _bundled(recording):
        below = [(f"below_{t}", float(t)) for t in BELOW]
        above = [(f"above_{t}", float(t)) for t in ABOVE]
    else:
        assert recording is not None
        below = [(f"below_q{q * 100:g}", recording.quantile(q)) for q in LOW_QUANTILES]
        above = [(f"above_q{q * 100:g}", recording.quantile(q)) for q in HIGH_QUANTILES]
    return [
        *({"name": name.replace(".", "_"), "kind": "reading", "field": FIELD, "op": "<",
           "threshold": t} for name, t in below),
        *({"name": name.replace(".", "_"), "kind": "reading", "field": FIELD, "op": ">",
           "threshold": t} for name, t in above),
    ]  # fmt: skip


def rate_rules(recording: Recording | None = None) -> list[dict[str, Any]]:
    """``rate`` rules on temperature_c, the kind's defaults otherwise. On the bundled
    recording: falling faster than 0.5 and 1 °C/min, rising faster than 1 °C/min (its
    readings change by less than 0.5 °C/min from one to the next 99 % of the time). On
    another: falling and rising faster than its 99th percentile of change per minute."""
    if _bundled(recording):
        given = (("falling", 0.5), ("falling", 1.0), ("rising", 1.0))
    else:
        assert recording is not None
        fast = recording.change_quantile(0.99)
        given = (("falling", fast), ("rising", fast))
    return [
        {"name": f"rate_{trend}_{per_minute:g}".replace(".", "_"), "kind": "rate",
         "field": FIELD, "trend": trend, "per_minute": per_minute}
        for trend, per_minute in given
    ]  # fmt: skip


def deviation_rules(recording: Recording | None = None) -> list[dict[str, Any]]:
    """``deviation`` rules on temperature_c with the kind's defaults (issue 69: no
    per-dataset tuning), on every recording: either side of the baseline, and below it
    only."""
    return [
        {"name": "deviation_default", "kind": "deviation", "field": FIELD},
        {"name": "deviation_below", "kind": "deviation", "field": FIELD, "direction": "below"},
    ]


@dataclass(frozen=True)
class RuleSetDef:
    """A rule set of the benchmark: its rules (without severity and hold) and what it is."""

    rules: Callable[[Recording | None], list[dict[str, Any]]]
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

    recordings: tuple[Path, ...] = (RECORDING,)
    labels: Path | None = None  # None: each recording's <name>.labels.json beside it
    sensor_id: str = SENSOR_ID
    hold: str | None = None  # None: per recording, six of its steps, at least 30 minutes
    lead: timedelta = timedelta(0)
    most_false: int = MOST_FALSE
    sets: tuple[str, ...] = tuple(RULE_SETS)
    rows: int | None = None  # only each recording's first rows (None: all)
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The plan as plain JSON values."""
        given = asdict(self)
        given.update(
            recordings=[_shown(p) for p in self.recordings],
            labels=None if self.labels is None else _shown(self.labels),
            lead_min=self.lead.total_seconds() / 60,
        )
        del given["lead"], given["notes"]  # the notes go with the figures
        return given


def _shown(path: Path) -> str:
    """A path as the figures show it: relative to the project when inside it."""
    path = path.absolute()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def rule_set_document(
    name: str, hold: str, recording: Recording | None = None
) -> list[dict[str, Any]]:
    """The rules of set ``name`` for ``recording`` (None: the bundled one), each a warning
    held open for ``hold``."""
    return [
        {**rule, "severity": "warning", "resolve_after": hold}
        for rule in RULE_SETS[name].rules(recording)
    ]


def prepare_rules(
    name: str, hold: str, path: Path, recording: Recording | None = None
) -> tuple[RuleSet | None, str | None]:
    """Write set ``name``'s rules file for ``recording`` at ``path`` and validate it as
    the job would: (the rules, None), or (None, why the set is skipped)."""
    rules = rule_set_document(name, hold, recording)
    path.write_text(rules_toml(rules), encoding="utf-8")
    try:
        return read_rules(path), None
    except RulesError as exc:
        unknown = sorted({r["kind"] for r in rules} - set(KINDS))
        if unknown:
            return None, (
                f"rule kind {', '.join(map(repr, unknown))} not available yet "
                f"(contract/rules/model.py knows {', '.join(KINDS)})"
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
    from conf.settings.base import SettingsFile, load_settings
    from conf.settings.job import JobSettings
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
    from lake.layout import INCIDENTS
    from lake.reader import LakeReader

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


@dataclass(frozen=True)
class Prepared:
    """One recording made ready: what is replayed, its windows, its hold and its sets."""

    recording: Recording
    replayed: Path  # the file the replay sends (a slice or a mapped copy, or the recording)
    windows: tuple[LabelledWindow, ...]
    hold: str
    ready: dict[str, tuple[RuleSet, Path]]


def prepare(
    plan: AnomalyPlan, path: Path, workdir: Path, entry: dict[str, Any], say: Callable[[str], None]
) -> Prepared:
    """Read ``path`` and its labels, write what is replayed and every set's rules file
    under ``workdir``, and fill ``entry`` with the recording's facts (a set skipped says
    why there)."""
    workdir.mkdir(parents=True, exist_ok=True)
    recording = read_recording(path)
    windows = read_windows(labels_for(path, plan.labels), path)
    replayed = path
    if plan.rows is not None:
        replayed = recording_slice(path, plan.rows, workdir / path.name)
        recording = read_recording(replayed)
    if not recording.fits:
        replayed = write_mapped(recording, workdir / f"mapped-{path.name}")
        low, high = recording.span
        entry.setdefault("notes", []).append(
            f"values {low:g} to {high:g} mapped linearly onto 0 to 100 (outside {FIELD}'s range)"
        )
    hold = plan.hold or f"{round(recording.hold.total_seconds() / 60)} minutes"
    entry.update(
        recording=_shown(path),
        facts=recording_facts(replayed),
        step_min=round(recording.step.total_seconds() / 60, 2),
        hold=hold,
        windows=[{"start": w.start.isoformat(), "end": w.end.isoformat()} for w in windows],
    )
    sets: dict[str, Any] = entry.setdefault("rule_sets", {})
    ready: dict[str, tuple[RuleSet, Path]] = {}
    for name in plan.sets:
        rules_path = workdir / f"rules-{name}.toml"
        rules, skipped = prepare_rules(name, hold, rules_path, recording)
        if rules is None:
            say(f"{path.name}: {name}: skipped: {skipped}")
            sets[name] = {"about": RULE_SETS[name].about, "skipped": skipped}
        else:
            ready[name] = (rules, rules_path)
    return Prepared(recording, replayed, windows, hold, ready)


def measure(
    plan: AnomalyPlan,
    workdir: Path,
    figures: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Run the plan: one broker and one Spark session for every recording; fill
    ``figures["recordings"]`` as each set is scored (an interrupted run keeps what it
    scored)."""
    from bench.env import local_broker
    from conf.settings.base import load_settings
    from conf.settings.job import JobSettings
    from jobs.spark.spark_session import build_spark_session
    from jobs.writer.data_files import LAKE_SLOTS

    runs: list[dict[str, Any]] = figures.setdefault("recordings", [])
    prepared: list[tuple[Prepared, dict[str, Any]]] = []
    for n, path in enumerate(plan.recordings):
        entry: dict[str, Any] = {}
        runs.append(entry)
        prepared.append((prepare(plan, path, workdir / f"recording-{n}", entry, say), entry))
    if not any(p.ready for p, _ in prepared):
        return
    with local_broker(workdir / "kafka") as broker:
        say("starting Spark")
        started = time.monotonic()
        spark = build_spark_session(
            "sensorwatch-bench-anomaly", warehouse_dir=workdir / "warehouse", master="local[2]",
            extra={LAKE_SLOTS: "2", **load_settings(JobSettings, {}).spark_conf},
        )  # fmt: skip
        figures["spark_session_start_s"] = round(time.monotonic() - started, 2)
        try:
            for (ready, entry), path in zip(prepared, plan.recordings, strict=True):
                if ready.ready:
                    score_recording(spark, broker.bootstrap, plan, ready, path, entry, say)
        finally:
            spark.stop()


def score_recording(
    spark: SparkSession,
    bootstrap: str,
    plan: AnomalyPlan,
    ready: Prepared,
    path: Path,
    entry: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Replay one prepared recording into a topic of its own, run the job once per rule
    set on a lake of its own, and score every rule into ``entry["rule_sets"]``."""
    from bench.env import new_topic

    topic = new_topic(bootstrap, "anomaly", 1)  # one sensor: one partition
    say(f"replay of {path.name} into {topic} as {plan.sensor_id}")
    entry["replay"] = replay(bootstrap, topic, ready.replayed, plan.sensor_id)
    sets = entry["rule_sets"]
    for name, (rules, rules_path) in ready.ready.items():
        readers = any(rule.kind != "reading" for rule in rules.rules)
        say(f"{path.name}: {name}: {len(rules.rules)} rules, the job availableNow")
        lake = rules_path.parent / f"lake-{name}"
        try:
            seconds = run_job(spark, bootstrap, topic, rules_path, lake, readers)
            incidents = read_incidents(lake)
        except Exception as exc:  # the next set still runs; the table says why
            why = str(exc).splitlines()[0] if str(exc) else repr(exc)
            say(f"{path.name}: {name}: failed: {why}")
            sets[name] = {"about": RULE_SETS[name].about, "failed": why}
            continue
        finally:
            shutil.rmtree(lake, ignore_errors=True)
        scores = score_rules(incidents, rules, plan.sensor_id, ready.windows, plan.lead)
        sets[name] = set_figures(name, rules, scores, seconds, plan.most_false)


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
    """The scored rules, one line each, recording by recording and set by set (a set
    skipped or failed, with why); with more than one recording, each rule scored on every
    one of them, added up."""
    from ops.table_text import fitted

    plan = figures.get("plan", {})
    machine = figures.get("machine", {})
    lines: list[str] = []
    runs = figures.get("recordings") or []
    for entry in runs:
        lines += _recording_table(entry, plan, machine, fitted)
    if len(runs) > 1:
        lines += ["", *_totals_table(runs, fitted)]
    for note in figures.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _recording_table(entry, plan, machine, fitted) -> list[str]:  # type: ignore[no-untyped-def]
    lines = [
        f"anomaly: {entry.get('recording')}, {len(entry.get('windows', []))} labelled windows, "
        f"lead {plan.get('lead_min', 0):g} min, every rule's resolve_after "
        f"{entry.get('hold')} ({machine.get('cpu_count')} cores)",
        *(f"  {note}" for note in entry.get("notes", [])),
        "",
    ]
    rows = [("set", "rule", "detected", "false", "incidents", "median delay", "delays (h)")]
    best_lines = []
    sets = entry.get("rule_sets") or {}
    order = [*(n for n in plan.get("sets", ()) if n in sets), *sets]
    for name in dict.fromkeys(order):  # the plan's order, whichever finished first
        found_set = sets[name]
        if "skipped" in found_set or "failed" in found_set:
            why = (
                f"skipped: {found_set['skipped']}"
                if "skipped" in found_set
                else f"failed: {found_set['failed']}"
            )
            rows.append((name, "-", "-", "-", "-", "-", why))
            continue
        best = (found_set.get("best_within_false") or {}).get("rule")
        for rule, found in found_set["rules"].items():
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
        if "best_within_false" in found_set:
            most = found_set["best_within_false"]["most_false"]
            best_lines.append(
                f"* {name}: the best with <= {most} false incidents (most windows, then the "
                f"earliest median delay): {best or 'none detects a window'}"
            )
    lines += fitted(rows)
    lines += ["", *best_lines] if best_lines else []
    return lines


def totals(runs: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each rule scored on every recording of ``runs`` (by its name: the learned kinds'
    rules are named alike everywhere), added up: windows, detected, false incidents and
    the median of every detected window's delay."""
    found: dict[str, list[Mapping[str, Any]]] = {}
    for entry in runs:
        for found_set in (entry.get("rule_sets") or {}).values():
            for rule, scored in (found_set.get("rules") or {}).items():
                found.setdefault(rule, []).append(scored)
    summed = {}
    for rule, scores in found.items():
        if len(scores) != len(runs):
            continue  # not scored on every recording (a fixed threshold of one of them)
        delays = [
            w["delay_min"] for s in scores for w in s["per_window"] if w["delay_min"] is not None
        ]
        summed[rule] = {
            "recordings": len(scores),
            "windows": sum(s["windows"] for s in scores),
            "detected": sum(s["detected"] for s in scores),
            "false_incidents": sum(s["false_incidents"] for s in scores),
            "median_delay_min": round(statistics.median(delays), 1) if delays else None,
        }
    return summed


def _totals_table(runs, fitted) -> list[str]:  # type: ignore[no-untyped-def]
    rows = [("rule", "recordings", "detected", "false", "median delay")]
    for rule, s in totals(runs).items():
        delay = s["median_delay_min"]
        rows.append(
            (
                rule,
                str(s["recordings"]),
                f"{s['detected']}/{s['windows']}",
                f"{s['false_incidents']:,}",
                "-" if delay is None else f"{delay / 60:.1f} h",
            )
        )
    return [f"every recording ({len(runs)}), added up:", "", *fitted(rows)]


def recording_facts(path: Path) -> dict[str, Any]:
    """Rows, first and last time of a ``timestamp,value`` recording."""
    with path.open(encoding="utf-8", newline="") as given:
        times = [row["timestamp"] for row in csv.DictReader(given)]
    return {
        "rows": len(times),
        "first": times[0] if times else None,
        "last": times[-1] if times else None,
    }


class AnomalyOptions(OutputOptions):
    """The flags of ``scripts/bench --anomaly``."""

    anomaly: bool = Field(
        False,
        description="run it instead of the rest (issue 69; a minute or two per recording): "
        "rule sets scored on labelled recordings, by default NAB's machine-temperature "
        "failure (bench/data/nab): each recording replayed into a local broker, the job "
        "availableNow once per rule set, every rule's incidents scored against the "
        "labelled windows (bench/anomaly_score.py). Writes anomaly.json to --out",
    )
    anomaly_lead: float = Field(
        0.0,
        description="minutes an incident may open before a window and still detect it (0: "
        "NAB's windows already include their lead time)",
    )
    anomaly_recording: list[Path] | None = Field(
        None,
        description="recordings to score instead of the bundled one (repeatable): NAB's data "
        "files (timestamp,value); values outside temperature_c's range are mapped onto 0 to "
        "100",
    )
    anomaly_labels: Path | None = Field(
        None,
        description="their labelled windows: NAB's labels/combined_windows.json, or a file "
        "like bench/data/nab/*.labels.json (default: <recording>.labels.json beside each)",
    )
    anomaly_hold: str | None = Field(
        None,
        description="every rule's resolve_after (default: six of the recording's steps, at "
        f"least {MIN_HOLD.total_seconds() / 60:.0f} minutes: '{HOLD}' for the bundled one, "
        "whose readings are 5 minutes apart; the job's default of 5 minutes would open an "
        "incident per reading)",
    )
    anomaly_most_false: int = Field(
        MOST_FALSE, description="mark the best fixed threshold with at most N false incidents"
    )
    anomaly_sets: list[str] = Field(
        default_factory=lambda: list(RULE_SETS),
        description=f"the rule sets to score (comma-separated; default: {','.join(RULE_SETS)})",
    )
    anomaly_rows: int | None = Field(
        None, ge=1, description="only each recording's first N rows (for trying things out)"
    )


def main(args: AnomalyOptions, say: Callable[[str], None], machine: dict[str, Any]) -> int:
    """``scripts/bench --anomaly``: returns the exit status (0 done, 1 failed, 2 bad
    arguments, 130 interrupted). Writes anomaly.json to ``args.out`` and prints the table;
    ``machine``: the machine the figures come from."""
    from bench.report import measured_run, write_json

    unknown = [name for name in args.anomaly_sets if name not in RULE_SETS]
    if unknown:
        say(f"unknown rule set {unknown[0]!r}; known: {', '.join(RULE_SETS)}")
        return 2
    try:
        if args.anomaly_hold is not None:
            interval_seconds(args.anomaly_hold)
    except ValueError as exc:
        say(f"--anomaly-hold: {exc}")
        return 2
    if args.anomaly_lead < 0 or args.anomaly_most_false < 0:
        say("--anomaly-lead and --anomaly-most-false must not be negative")
        return 2
    plan = AnomalyPlan(
        recordings=tuple(args.anomaly_recording or (RECORDING,)),
        labels=args.anomaly_labels,
        hold=args.anomaly_hold,
        lead=timedelta(minutes=args.anomaly_lead),
        most_false=args.anomaly_most_false,
        sets=tuple(args.anomaly_sets),
        rows=args.anomaly_rows,
        notes=[f"only each recording's first {args.anomaly_rows:,} rows"]
        if args.anomaly_rows
        else [],
    )
    try:  # every recording and its labels readable before anything starts
        for path in plan.recordings:
            read_windows(labels_for(path, plan.labels), path)
            read_recording(path)
    except RecordingError as exc:
        say(str(exc))
        return 2
    figures: dict[str, Any] = {
        "mode": "anomaly",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "plan": plan.as_json(),
        "notes": list(plan.notes),
    }
    status = measured_run(figures, "anomaly", lambda tmp: measure(plan, tmp, figures, say), say)
    if len(figures.get("recordings") or []) > 1:
        figures["totals"] = totals(figures["recordings"])
    write_json(figures, args.out / "anomaly.json")
    print(anomaly_table(figures))
    say(f"wrote {args.out / 'anomaly.json'} in {figures['total_seconds']:.0f} s")
    return status
