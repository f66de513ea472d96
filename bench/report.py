"""figures.json and the short table printed at the end of a run."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from conf.paths import PROJECT_ROOT
from ops.table_text import fitted

DEFAULT_OUT = PROJECT_ROOT / "artifacts" / "bench"


class OutputOptions(BaseModel):
    """Where a benchmark writes its figures (``--out``)."""

    out: Path = Field(
        DEFAULT_OUT,
        description="where figures.json and figures.png go, or the mode's own (soak.json and "
        "soak.png, anomaly.json, learned_state.json, bridge.json)",
    )


def measured_run(
    figures: dict[str, Any],
    name: str,
    measure: Callable[[Path], None],
    say: Callable[[str], None],
) -> int:
    """Run ``measure`` in a temporary folder (``sensorwatch-<name>-``), so that what it
    measured into ``figures`` is kept however it ends: Ctrl-C is a note (status 130), a
    failure a note with its first line (status 1). Then the run's length and the
    machine's load at the end: other work on the machine shows there, the run's own load
    is about 2 on 2 cores. Returns the exit status (0: it ran through)."""
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"sensorwatch-{name}-") as tmp:
        try:
            measure(Path(tmp))
        except KeyboardInterrupt:
            say("interrupted: writing what was measured")
            figures["notes"].append("interrupted before the end")
            status = 130
        except Exception as exc:
            say(f"failed: {exc}")
            # The first line of what it said, or what it is when it said nothing.
            first_line = str(exc).splitlines()[0] if str(exc) else repr(exc)
            figures["notes"].append(f"failed: {first_line}")
            status = 1
    figures["total_seconds"] = round(time.monotonic() - started, 1)
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return status


def write_json(figures: dict[str, Any], path: Path) -> None:
    """Write the figures as indented JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, default=str) + "\n", encoding="utf-8")


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}{unit}"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value}{unit}"


def table(figures: dict[str, Any]) -> str:
    """A short plain-text table of the headline figures."""
    rows: list[tuple[str, str]] = []
    machine = figures.get("machine", {})
    rows.append(
        (
            "mode",
            f"{figures.get('mode')} ({machine.get('cpu_count')} cores, "
            f"{machine.get('memory_gb')} GB)",
        )
    )
    rows.append(("spark session start", _fmt(figures.get("spark_session_start_s"), " s")))
    throughput = figures.get("throughput", {})
    for key, label in (
        ("producer", "producer msg/s"),
        ("consumer", "plain consumer msg/s (ceiling)"),
        ("minimal_query", "minimal Spark query rows/s (floor)"),
        ("job_all_tables", "job rows/s, all tables"),
        ("job_readings_only", "job rows/s, readings path only"),
    ):
        entry = throughput.get(key)
        if entry:
            rows.append(_rate_row(label, entry))
    cost = throughput.get("metrics_cost")
    if cost:
        rows.append(
            (
                "job rows/s, Prometheus metrics off / on",
                f"{_fmt(cost['median_off'])} / {_fmt(cost['median_on'])} "
                f"({cost['on_vs_off_pct']:+.1f} %, medians of {len(cost['rows_per_s_on'])}; "
                f"runs of one kind {cost.get('spread_pct', '-')} % apart)",
            )
        )
        if "cpu_on_vs_off_pct" in cost:
            rows.append(
                (
                    "  job CPU per 1,000 rows, metrics on vs off",
                    f"{cost['cpu_on_vs_off_pct']:+.1f} % (medians of "
                    f"{len(cost['cpu_ms_per_1k_rows_on'])})",
                )
            )
    for key, prefix in (("latency", ""), ("latency_lake_only", "without real-time path: ")):
        latency = figures.get(key)
        if latency:
            rows.extend(_latency_rows(prefix, latency))
            rows.append(
                (
                    f"{prefix}  ingest kept up",
                    f"{latency['caught_up']} (ingest "
                    f"{_fmt(latency['ingest_rows_per_s'])} rows/s, backlog max "
                    f"{_fmt(latency['backlog_max'])}; job CPU "
                    f"{_fmt(latency.get('job_cpu_cores'))} cores)",
                )
            )
    for count, entry in (figures.get("rules") or {}).items():
        lat, realtime = entry["latency_s"], entry.get("realtime_latency_ms") or {}
        rows.append(
            (
                f"{count} rules: job rows/s, overheat latency",
                f"{_fmt(entry['rows_per_s'])} rows/s ({_fmt(entry['cpu_ms_per_1k_rows'])} CPU-ms "
                f"per 1,000); lake p50 {_fmt(lat['p50'], ' s')}, p95 {_fmt(lat['p95'], ' s')}; "
                f"real-time p95 {_fmt(realtime.get('p95'), ' ms')}; kept up {entry['caught_up']}",
            )
        )
    burst = (figures.get("burst") or {}).get("realtime_tail_by_phase_ms")
    if burst:
        for phase in ("first_10s", "boundaries", "steady"):
            got = burst[phase]
            rows.append(
                (
                    f"burst after {figures['burst']['idle_s']:.0f} s idle: real-time, {phase}",
                    f"p50 {_fmt(got['p50'], ' ms')}, p95 {_fmt(got['p95'], ' ms')}, p99 "
                    f"{_fmt(got['p99'], ' ms')}, max {_fmt(got['max'], ' ms')} "
                    f"({_fmt(got['count'])} alerts)",
                )
            )
        rows.append(
            (
                "burst: missing on the topic",
                f"{_fmt(figures['burst'].get('realtime_missing'))} (boundaries at "
                f"{burst['boundaries_at_s']} s)",
            )
        )
    behind = figures.get("latency_lake_behind")
    if behind:
        rows.extend(_latency_rows("lake path behind: ", behind))
        rows.append(
            (
                "lake path behind: ingest held back",
                f"{_fmt(behind['ingest_rows_per_s'])} rows/s, at most "
                f"{_fmt(behind['lake_limit'])} per micro-batch (backlog max "
                f"{_fmt(behind['backlog_max'])}, at the end "
                f"{_fmt(behind['backlog_when_sending_ended'])})",
            )
        )
    small = figures.get("small_batches")
    if small:
        rows.append(_small_batch_row("", small))
    for key, label in (("steady", "every query on"), ("steady_lake_only", "lake path alone")):
        if figures.get(key):
            rows.extend(_steady_rows(figures[key], label))
    memory = figures.get("memory", {})
    if memory:
        rows.append(("job peak RSS (python + JVM)", _fmt(memory.get("job_peak_rss_mb"), " MiB")))
    scaling = figures.get("scaling", {})
    for point in scaling.get("partitions", []):
        rows.append(
            (f"scaling: {point['partitions']} partitions", f"{_fmt(point['rows_per_s'])} rows/s")
        )
    for point in scaling.get("sensors", []):
        rows.append(
            (f"scaling: {point['sensors']:,} sensors", f"{_fmt(point['rows_per_s'])} rows/s")
        )
    for point in (figures.get("driver_results") or {}).get("points", []):
        rows.append(
            (
                f"driver receives, {point['query']} batch",
                f"{_fmt(point['result_kb_per_batch'])} KiB per batch of "
                f"{_fmt(point['rows_per_batch'])} rows (max {_fmt(point['result_kb_max'])} KiB)",
            )
        )
    cores = figures.get("cores") or {}
    for run in cores.get("runs", []):
        rows.append(
            (
                f"cores: {run['setup']}",
                f"{_fmt(run['rows_per_s'])} rows/s ({_fmt(run['seconds'], ' s')} processing, "
                f"{_fmt(run['wall_s'], ' s')} wall)",
            )
        )
    for kind, ratio in (cores.get("two_over_one") or {}).items():
        rows.append((f"cores: {kind} two over one", f"{ratio}x"))
    rows.extend(_s3_rows(figures.get("s3") or {}))
    first = figures.get("first_alert")
    if first:
        rows.append(
            (
                "first alert after a cold start",
                f"ALERT line {_fmt(first['to_alert_line_s'], ' s')}, row in alerts "
                f"{_fmt(first['to_alert_row_s'], ' s')} "
                f"(spike {first['first_spike_after_s']} s in)",
            )
        )
    return "\n".join(fitted(rows))


def _rate_row(label: str, entry: dict[str, Any]) -> tuple[str, str]:
    """A throughput figure: messages or rows per second, and its share of the floor."""
    rate = entry.get("msgs_per_s", entry.get("rows_per_s"))
    share = entry.get("pct_of_minimal_query")
    return (
        label,
        f"{_fmt(rate)}  ({_fmt(entry.get('messages'))} in {_fmt(entry.get('seconds'), ' s')})"
        + (f", {share} % of the minimal query" if share is not None else ""),
    )


def _steady_rows(steady: dict[str, Any], label: str) -> list[tuple[str, str]]:
    """One row per steady rate (and the real-time path's latency in it), then the highest
    kept up."""
    rows = []
    for run in steady["runs"]:
        lat = run.get("latency_s") or {}
        outcome = "kept up" if run["kept_up"] else "fell behind"
        if run.get("producer_limited"):
            outcome += f" with the {_fmt(run['producer_msgs_per_s'])}/s the producer sent"
        rows.append(
            (
                f"steady {run['target_rate']:,}/s, {label}",
                f"{outcome} (ingest {_fmt(run['ingest_rows_per_s'])} rows/s, backlog max "
                f"{_fmt(run['backlog_max'])}, overheat p95 {_fmt(lat.get('p95'), ' s')}, "
                f"job CPU {_fmt(run.get('job_cpu_cores'))} cores)",
            )
        )
        realtime = run.get("realtime_latency_ms")
        if realtime:
            rows.append(
                (
                    "  real-time path: hot reading -> sensor-alerts",
                    f"p50 {_fmt(realtime['p50'], ' ms')}, p95 {_fmt(realtime['p95'], ' ms')}, "
                    f"p99 {_fmt(realtime['p99'], ' ms')} (missing "
                    f"{_fmt(run.get('realtime_missing'))}, unknown "
                    f"{_fmt(run.get('realtime_unknown'))})",
                )
            )
            rows += _slowest_rows(run)
        reached = run.get("incident_latency_s")
        if reached and reached.get("count"):
            rows.append(
                (
                    "  incident active in Alertmanager",
                    f"p50 {_fmt(reached['p50'], ' s')}, p95 {_fmt(reached['p95'], ' s')}, "
                    f"p99 {_fmt(reached['p99'], ' s')} ({reached['count']} incidents)",
                )
            )
    rows.append(
        (
            f"highest steady rate kept up, {label}",
            f"{_fmt(steady['highest_kept_up'])} readings/s (over {steady['seconds']:.0f} s each)",
        )
    )
    return rows


def _slowest_rows(entry: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the real-time path's tail came from: its slowest messages (when, since the
    first send) and when the real-time query's batches started."""
    slow = entry.get("realtime_slowest")
    if not slow:
        return []
    starts = entry.get("realtime_batches_at_s") or []
    return [
        (
            "    slowest to sensor-alerts",
            ", ".join(f"{m['ms']} ms at {m['at_s']} s" for m in slow)
            + f" (real-time batches started at {', '.join(f'{t} s' for t in starts) or '-'})",
        )
    ]


def _latency_rows(prefix: str, latency: dict[str, Any]) -> list[tuple[str, str]]:
    """Overheat latency to the alerts table and, when measured, to Alertmanager."""
    lat = latency["latency_s"]
    rows = []
    realtime = latency.get("realtime_latency_ms")
    if realtime:
        rows.append(
            (
                f"{prefix}real-time path: hot reading -> sensor-alerts",
                f"p50 {_fmt(realtime['p50'], ' ms')}, p95 {_fmt(realtime['p95'], ' ms')}, "
                f"p99 {_fmt(realtime['p99'], ' ms')} ({realtime['count']} messages, "
                f"{_fmt(latency['realtime_alert_ids'])} alert ids; missing "
                f"{_fmt(latency.get('realtime_missing'))}, unknown "
                f"{_fmt(latency.get('realtime_unknown'))})",
            )
        )
        rows += _slowest_rows(latency)
    rows += [
        (
            f"{prefix}overheat latency @{latency['target_rate']:,}/s",
            f"p50 {_fmt(lat['p50'], ' s')}, p95 {_fmt(lat['p95'], ' s')}, "
            f"p99 {_fmt(lat['p99'], ' s')} ({lat['count']} alerts)",
        )
    ]
    page = latency.get("dashboard_latency_ms")
    if page:
        rows.append(
            (
                f"{prefix}real-time path: hot reading -> dashboard page",
                f"p50 {_fmt(page['p50'], ' ms')}, p95 {_fmt(page['p95'], ' ms')}, "
                f"p99 {_fmt(page['p99'], ' ms')} ({page['count']} alerts)",
            )
        )
    reached = latency.get("incident_latency_s")
    if reached:
        rows.append(
            (
                f"{prefix}  incident active in Alertmanager",
                f"p50 {_fmt(reached['p50'], ' s')}, p95 {_fmt(reached['p95'], ' s')}, "
                f"p99 {_fmt(reached['p99'], ' s')} ({reached['count']} incidents)",
            )
        )
    return rows


def _small_batch_row(prefix: str, small: dict[str, Any]) -> tuple[str, str]:
    """Ingest micro-batches of a few hundred rows: their duration."""
    batch = small.get("ingest_batch_s") or {}
    return (
        f"{prefix}ingest batch @{small['target_rate']:,}/s",
        f"p50 {_fmt(batch.get('p50'), ' s')}, p95 {_fmt(batch.get('p95'), ' s')} "
        f"({_fmt(small.get('ingest_batch_rows_median'))} rows per batch)",
    )


def _s3_rows(s3: dict[str, Any]) -> list[tuple[str, str]]:
    """The lake in a bucket (the s3 part), each figure as its local-disk row shows it."""
    rows: list[tuple[str, str]] = []
    if s3.get("job_all_tables"):
        rows.append(_rate_row("s3: job rows/s, all tables", s3["job_all_tables"]))
    if s3.get("latency"):
        rows.extend(_latency_rows("s3: ", s3["latency"]))
    if s3.get("small_batches"):
        rows.append(_small_batch_row("s3: ", s3["small_batches"]))
    return rows


def soak_table(figures: dict[str, Any]) -> str:
    """The soak's samples, one line each, then the flatness verdict of every series."""
    plan = figures.get("plan", {})
    machine = figures.get("machine", {})
    clock = figures.get("clock", {})
    lines = [
        f"soak: {plan.get('batches', 0):,} ingest batches, trigger {plan.get('trigger')}, "
        f"{plan.get('rate', 0):,} readings/s, {plan.get('sensors', 0):,} sensors, event clock "
        f"x{plan.get('speedup', 0):g} from {clock.get('start_time', '-')} "
        f"({machine.get('cpu_count')} cores)",
        "",
    ]
    header = (
        "batches", "wall s", "p50 s", "p95 s", "rows/b", "live files", "log files",
        "alerts s", "dash s", "job MiB", "backlog", "event h",
    )  # fmt: skip
    rows = [header]
    for s in figures.get("samples", []):
        tables = s.get("tables", {}).values()
        ingest = s.get("ingest", {})
        rows.append(
            (
                _fmt(s.get("batches")),
                _fmt(s.get("wall_s")),
                _fmt(ingest.get("p50_s")),
                _fmt(ingest.get("p95_s")),
                _fmt(ingest.get("rows_median")),
                _fmt(sum(t.get("live_files", 0) for t in tables)),
                _fmt(sum(t.get("log_files", 0) for t in tables)),
                _fmt(s.get("alerts_cli_s")),
                _fmt((s.get("dashboard_slowest") or {}).get("seconds")),
                _fmt((s.get("job_memory") or {}).get("pss_mb")),
                _fmt(s.get("backlog")),
                _fmt(s.get("event_hours")),
            )
        )
    lines += fitted(rows, right=True)
    verdicts = figures.get("verdicts") or {}
    if verdicts:
        lines += ["", "flatness (median of the last third of samples / the first third):"]
        width = max(len(k) for k in verdicts)
        for name, v in verdicts.items():
            ratio = "-" if v.get("ratio") is None else f"x{v['ratio']:.2f}"
            lines.append(
                f"  {name:<{width}}  {v['verdict']:<15} {ratio:>7}  "
                f"({_fmt(v.get('first'))} -> {_fmt(v.get('last'))})"
            )
    for note in figures.get("notes", []):
        lines.append(f"note: {note}")
    return "\n".join(lines)
