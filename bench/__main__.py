"""``scripts/bench [--quick] [--out DIR]``: run the benchmarks, write figures.json and
figures.png, print a short table. ``scripts/bench --soak``: the soak benchmark alone
(docs/architecture.md#running-for-weeks), soak.json and soak.png. ``scripts/bench
--anomaly``: rule sets scored on a labelled recording (bench/anomaly.py), anomaly.json."""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.anomaly import HOLD, MOST_FALSE, RULE_SETS
from bench.plan import Plan, full_plan, quick_plan
from bench.recordings import MIN_HOLD
from bench.report import soak_table, table, write_json
from bench.run_dir import claim_run_dir
from bench.soak import SoakPlan
from conf.paths import PROJECT_ROOT

DEFAULT_OUT = PROJECT_ROOT / "artifacts" / "bench"
PARTS = (
    "minimal", "job", "readers-only", "metrics", "commits", "latency", "behind", "small",
    "steady", "scaling", "driver", "cores", "s3", "first-alert", "rules", "burst",
)  # fmt: skip

# The s3 part's lakes: a bucket on S3Proxy (scripts/s3-local), started for the run.
S3_BUCKET = "bench"
S3_LAKES = f"s3a://{S3_BUCKET}/lakes"


def build_parser() -> argparse.ArgumentParser:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description=(
            "Benchmarks against a local Kafka broker started for the run (free port, a folder "
            f"in {tempfile.gettempdir()}, stopped at the end): producer msg/s, a plain "
            "consumer's read rate, "
            "the job's rows/s with and without the reader queries, overheat alert latency "
            "at a steady rate, peak memory, scaling with partitions and sensors. Writes "
            "figures.json and figures.png to --out."
        ),
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes: about 9 minutes on 2 cores"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help="where figures.json and figures.png go, or soak.json and soak.png (default: "
        "artifacts/bench)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=PARTS,
        help="leave out a part (repeatable); for trying things out, not for recorded figures",
    )
    parser.add_argument(
        "--steady-rates",
        type=_rates,
        metavar="EPS,...",
        help="the steady runs' rates, readings/s, lowest first (default: the plan's: "
        f"{', '.join(f'{r:,}' for r in full_plan().steady_rates)}; quick: "
        f"{', '.join(f'{r:,}' for r in quick_plan().steady_rates)})",
    )
    parser.add_argument(
        "--rule-counts",
        type=_counts,
        metavar="N,...",
        help="the rules part's rules files, in the order run (default: "
        f"{','.join(map(str, full_plan().rule_counts))}; the reverse order shows what the "
        "order costs)",
    )
    soak = parser.add_argument_group(
        "soak (docs/architecture.md#running-for-weeks; runs alone, about an hour at the defaults)",
        "The job as a process with a 1-second trigger, the producer on a compressed event "
        "clock, the dashboard; every --soak-every ingest batches: batch duration p50/p95, "
        "files and log per table, scripts/alerts --since 1h and dashboard API times, the "
        "job's memory. Writes soak.json, soak.png and the job's log to --out.",
    )
    soak.add_argument("--soak", action="store_true", help="run the soak instead of the rest")
    soak.add_argument(
        "--soak-batches",
        type=_positive,
        default=SoakPlan.batches,
        metavar="N",
        help=f"ingest micro-batches to run for (default {SoakPlan.batches:,})",
    )
    soak.add_argument(
        "--soak-every",
        type=_positive,
        default=SoakPlan.every,
        metavar="N",
        help=f"a sample every N ingest batches (default {SoakPlan.every})",
    )
    soak.add_argument(
        "--soak-rate",
        type=_positive,
        default=SoakPlan.rate,
        metavar="EPS",
        help=f"readings per wall-clock second (default {SoakPlan.rate:,})",
    )
    soak.add_argument(
        "--soak-speedup",
        type=float,
        default=SoakPlan.speedup,
        metavar="X",
        help=f"event seconds per wall-clock second (default {SoakPlan.speedup:g})",
    )
    anomaly = parser.add_argument_group(
        "anomaly (issue 69; runs alone, a minute or two per recording)",
        "Rule sets scored on labelled recordings, by default NAB's machine-temperature "
        "failure (bench/data/nab): each recording replayed into a local broker, the job "
        "availableNow once per rule set, every rule's incidents scored against the "
        "labelled windows (windows detected, false incidents, median delay from a window's "
        "start; bench/anomaly_score.py). Writes anomaly.json to --out.",
    )
    anomaly.add_argument("--anomaly", action="store_true", help="run it instead of the rest")
    anomaly.add_argument(
        "--anomaly-lead",
        type=float,
        default=0.0,
        metavar="MIN",
        help="an incident opening this many minutes before a window still detects it "
        "(default 0: NAB's windows already include their lead time)",
    )
    anomaly.add_argument(
        "--anomaly-recording",
        type=Path,
        nargs="+",
        metavar="CSV",
        help="recordings to score instead of the bundled one: NAB's data files "
        "(timestamp,value); values outside temperature_c's range are mapped onto 0 to 100",
    )
    anomaly.add_argument(
        "--anomaly-labels",
        type=Path,
        metavar="JSON",
        help="their labelled windows: NAB's labels/combined_windows.json, or a file like "
        "bench/data/nab/*.labels.json (default: <recording>.labels.json beside each)",
    )
    anomaly.add_argument(
        "--anomaly-hold",
        default=None,
        metavar="INTERVAL",
        help=f"every rule's resolve_after (default: six of the recording's steps, at least "
        f"{MIN_HOLD.total_seconds() / 60:.0f} minutes: '{HOLD}' for the bundled one, whose "
        "readings are 5 minutes apart; the job's default of 5 minutes would open an "
        "incident per reading)",
    )
    anomaly.add_argument(
        "--anomaly-most-false",
        type=int,
        default=MOST_FALSE,
        metavar="N",
        help=f"mark the best fixed threshold with at most N false incidents (default {MOST_FALSE})",
    )
    anomaly.add_argument(
        "--anomaly-sets",
        type=lambda text: [part.strip() for part in text.split(",") if part.strip()],
        default=list(RULE_SETS),
        metavar="NAME,...",
        help=f"the rule sets to score (default: {','.join(RULE_SETS)})",
    )
    anomaly.add_argument(
        "--anomaly-rows",
        type=_positive,
        metavar="N",
        help="only each recording's first N rows (for trying things out)",
    )
    learned = parser.add_argument_group(
        "learned state (issue 69; runs alone, a minute or two)",
        "What the learned rules' state costs per sensor (bench/learned_state.py): the "
        "deviation rule's pruned _baselines on disk, as Arrow and as pandas, and one windows "
        "batch closing a pane of every sensor: its seconds and the peak memory of the JVM "
        "and the Python workers. Writes learned_state.json to --out.",
    )
    learned.add_argument("--learned-state", action="store_true", help="run it instead of the rest")
    learned.add_argument(
        "--learned-sensors",
        type=_positive,
        default=100_000,
        metavar="N",
        help="sensors (default 100000)",
    )
    bridge = parser.add_argument_group(
        "bridge (issue 70; runs alone, a minute or two)",
        "MQTT in (bench/bridge.py): devices publish with QoS 1 into a local Mosquitto, "
        "python -m bridge forwards into Kafka: readings/s unpaced, and each reading's "
        "time from publish to a Kafka consumer at a steady rate. Writes bridge.json to --out.",
    )
    bridge.add_argument("--bridge", action="store_true", help="run it instead of the rest")
    bridge.add_argument(
        "--bridge-messages", type=_positive, default=200_000, metavar="N",
        help="readings published unpaced, in all (default 200000)",
    )  # fmt: skip
    bridge.add_argument(
        "--bridge-publishers", type=_positive, default=4, metavar="N",
        help="devices publishing them, each a process (default 4)",
    )  # fmt: skip
    bridge.add_argument(
        "--bridge-rate", type=float, default=5_000.0, metavar="EPS",
        help="the steady rate of the latency run (default 5000)",
    )  # fmt: skip
    bridge.add_argument(
        "--bridge-seconds", type=float, default=30.0, metavar="S",
        help="how long the latency run publishes (default 30)",
    )  # fmt: skip
    bridge.add_argument(
        "--bridge-job", action="store_true",
        help="with the job running on the bridge's topic, every query on: also each hot "
        "reading's time from MQTT publish to its alert on the alerts topic",
    )  # fmt: skip
    return parser


def _positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return number


def _counts(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated whole numbers >= 1, in any order."""
    return tuple(_positive(part.strip()) for part in text.split(","))


def _rates(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated whole numbers >= 1, in rising order."""
    rates = tuple(_positive(part.strip()) for part in text.split(","))
    if list(rates) != sorted(set(rates)):
        raise argparse.ArgumentTypeError(f"expected rising rates, got {text!r}")
    return rates


def machine() -> dict[str, Any]:
    """The machine the figures come from."""
    return {
        "cpu_count": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def say(line: str) -> None:
    """Progress on stderr; the table goes to stdout."""
    print(f"bench: {line}", file=sys.stderr, flush=True)


def measure_all(plan: Plan, workdir: Path, skip: set[str], figures: dict[str, Any]) -> None:
    """Start the broker and Spark, run every measurement, fill ``figures`` as it goes
    (so an interrupted run still leaves what it measured)."""
    # Imported here: --help must not pay for Spark's import.
    from bench import measure
    from bench.env import MemorySampler, ProgressRecorder, local_broker
    from conf.settings.base import load_settings
    from conf.settings.job import JobSettings
    from jobs.spark.spark_session import build_spark_session
    from jobs.writer.data_files import LAKE_SLOTS

    memory = MemorySampler()
    start = time.monotonic()
    with local_broker(workdir / "kafka") as broker, s3_server(workdir, "s3" in skip) as s3:
        figures["broker_start_s"] = round(time.monotonic() - start, 2)
        memory.exclude(broker.pid)
        say(f"broker at {broker.bootstrap}; starting Spark")
        start = time.monotonic()
        # With the s3 part, the session has S3A from the start (jars load with the JVM):
        # every measurement runs in it, on a folder and in the bucket alike.
        # As the job sizes local mode (jobs/queries/realtime.py): 2 slots for the lake path and
        # one per partition for the real-time path's long-running tasks.
        job = load_settings(JobSettings, {})
        spark = build_spark_session(
            "sensorwatch-bench", warehouse_dir=workdir / "warehouse", lake=s3 and S3_LAKES,
            master=f"local[{2 + plan.partitions}]", driver_memory=job.driver_memory,
            # The job's own spark_conf and driver_memory settings (SENSORWATCH_SPARK_CONF,
            # SENSORWATCH_DRIVER_MEMORY) apply here too, so either can be measured both ways.
            extra={LAKE_SLOTS: "2", **job.spark_conf},
        )  # fmt: skip
        figures["driver_memory"] = job.driver_memory
        figures["spark_session_start_s"] = round(time.monotonic() - start, 2)
        progress = ProgressRecorder()
        spark.streams.addListener(progress)
        memory.start()
        bench = measure.Bench(spark, broker.bootstrap, workdir, plan, memory, progress, say)
        try:
            _measure(bench, skip, figures)
        finally:
            memory.stop()
            figures["memory"]["overall_peak_rss_mb"] = round(memory.peak_bytes / 2**20, 1)
            spark.stop()


@contextmanager
def s3_server(workdir: Path, skipped: bool) -> Iterator[str | None]:
    """S3Proxy for the s3 part, its endpoint and credentials in this process's
    environment (Spark's JVM, delta-rs and the notifier read them there); None when the
    part is skipped."""
    if skipped:
        yield None
        return
    from jobs.spark.spark_session import environment_set
    from local_stack import s3 as local_s3
    from local_stack.optional_jars import s3a_jars

    s3a_jars()  # the job's session needs the connector: set up here, as scripts/setup --s3
    data_dir = workdir / "s3"
    server = local_s3.start(data_dir, local_s3.free_port(), buckets=(S3_BUCKET,))
    try:
        with environment_set(server.environment()):
            yield server.endpoint
    finally:
        local_s3.stop(data_dir)


def _measure(bench: Any, skip: set[str], figures: dict[str, Any]) -> None:
    from bench import measure

    plan = bench.plan
    if plan.warmup:
        say(f"warm-up: {plan.warmup:,} readings through the job (not counted)")
        warm = measure.fill_topic(bench, "warmup", plan.warmup, plan.sensors, plan.partitions)
        figures["warmup"] = {"seconds": measure.job_rate(bench, warm, "warmup")["seconds"]}

    say(f"producer: {plan.backlog:,} readings, --rate 0")
    topic, figures["throughput"]["producer"] = measure.producer_rate(bench)
    say("plain consumer over the whole topic")
    figures["throughput"]["consumer"] = measure.consumer_rate(bench, topic)
    if "minimal" not in skip:
        say("minimal Spark query: Kafka -> from_json -> one Delta table, availableNow")
        figures["throughput"]["minimal_query"] = measure.minimal_query_rate(bench, topic)
    if "job" not in skip:
        say("job, availableNow, all queries")
        everything = measure.job_rate(bench, topic, "all")
        figures["throughput"]["job_all_tables"] = everything
        figures["memory"]["job_peak_rss_mb"] = everything["peak_rss_mb"]
        figures["memory"]["job_peak_rss_parts_mb"] = everything["peak_rss_parts_mb"]
        _share_of_floor(everything, figures)
    if not {"job", "readers-only"} & skip:
        say("job, availableNow, ingest only (--readers false)")
        figures["throughput"]["job_readings_only"] = measure.job_rate(
            bench, topic, "ingest", readers=False
        )
    if "metrics" not in skip:
        say("job, availableNow, all queries: its Prometheus metrics off and on, alternated")
        figures["throughput"]["metrics_cost"] = measure.metrics_cost(bench, topic)
    if "commits" not in skip:
        say("Delta commit cost (tiny plain append, txn append, alert write)")
        figures["delta_commit"] = measure.commit_costs(
            bench, repeats=3 if plan.mode == "quick" else 5
        )
    if "rules" not in skip:
        figures["rules"] = measure.rule_counts(bench, topic, plan.rule_counts)
    if "latency" not in skip:
        say(f"latency: {plan.latency_rate:,} readings/s for {plan.latency_seconds:.0f} s")
        figures["latency"] = measure.alert_latency(bench, alertmanager=True, dashboard=True)
        # Side by side in one run: the lake path alone, as before the real-time path.
        say(f"latency without the real-time path: {plan.latency_rate:,} readings/s")
        figures["latency_lake_only"] = measure.alert_latency(
            bench, alertmanager=True, realtime=False
        )
    if "burst" not in skip:
        say(f"burst: the job idle {plan.burst_idle_seconds:.0f} s, then "
            f"{plan.latency_rate:,} readings/s for {plan.burst_seconds:.0f} s")  # fmt: skip
        figures["burst"] = measure.alert_latency(
            bench, seconds=plan.burst_seconds, idle_s=plan.burst_idle_seconds
        )
    if "behind" not in skip:
        # The lake path held to half the rate, so its backlog grows all run long: the
        # real-time path, which reads without a limit, must not wait for it.
        limit = plan.latency_rate  # readings per 2-second micro-batch: half the rate
        say(f"latency with the lake path behind: {plan.latency_rate:,} readings/s, ingest "
            f"limited to {limit:,} per micro-batch")  # fmt: skip
        figures["latency_lake_behind"] = measure.alert_latency(bench, lake_limit=limit)
    if "small" not in skip:
        say(f"small batches: {plan.small_batch_rate:,} readings/s, 2 s trigger")
        figures["small_batches"] = measure.small_batches(bench)
    if "steady" not in skip:
        figures["steady"] = measure.steady_rates(bench, figures.get("latency") or {})
        # Side by side: what the real-time path costs the lake path at each rate.
        figures["steady_lake_only"] = measure.steady_rates(
            bench, figures.get("latency_lake_only") or {}, realtime=False
        )
    if "scaling" not in skip:
        figures["scaling"] = measure.scaling(bench, {})
    if "driver" not in skip:
        from bench import scale_out

        say(f"driver results: {plan.results_backlog:,} readings at {plan.results_batch_sizes}")
        small = measure.fill_topic(
            bench, "results", plan.results_backlog, plan.sensors, plan.partitions
        )
        figures["driver_results"] = scale_out.driver_results(bench, small, plan.results_batch_sizes)
    if "cores" not in skip:
        from bench import scale_out

        say("scale-out: the job with one and with two executor cores")
        figures["cores"] = scale_out.core_scaling(bench, topic, cluster=plan.cores_cluster)
    if "s3" not in skip:
        _measure_s3(bench, topic, skip, figures)
    if "first-alert" not in skip:
        from bench.first_alert import first_alert

        say("first alert after a cold start: producer and job started together, as the demo")
        figures["first_alert"] = first_alert(bench.bootstrap, bench.workdir, plan.partitions)


def _share_of_floor(job: dict[str, Any], figures: dict[str, Any]) -> None:
    """Add the job's rows/s as a percentage of the minimal query's, when that was run."""
    floor = figures["throughput"].get("minimal_query")
    if floor and floor["rows_per_s"]:
        job["pct_of_minimal_query"] = round(100 * job["rows_per_s"] / floor["rows_per_s"], 1)


def _measure_s3(bench: Any, topic: Any, skip: set[str], figures: dict[str, Any]) -> None:
    """The lake in a bucket on S3Proxy: the same throughput, latency and small-batch
    runs as on the local disk above, in the same session and on the same topic."""
    from dataclasses import replace

    from bench import measure

    in_bucket = replace(bench, lakes=S3_LAKES)
    result: dict[str, Any] = figures.setdefault("s3", {"lakes": S3_LAKES})
    if "job" not in skip:
        say(f"s3: job, availableNow, all queries, lake in {S3_LAKES}")
        result["job_all_tables"] = measure.job_rate(in_bucket, topic, "all")
        _share_of_floor(result["job_all_tables"], figures)
    if "latency" not in skip:
        say(f"s3: latency, {bench.plan.latency_rate:,} readings/s, lake in the bucket")
        result["latency"] = measure.alert_latency(in_bucket, alertmanager=True)
    if "small" not in skip:
        say(f"s3: small batches, {bench.plan.small_batch_rate:,} readings/s, lake in the bucket")
        result["small_batches"] = measure.small_batches(in_bucket)


def soak_main(args: argparse.Namespace) -> int:
    """``--soak``: run the soak alone; returns the exit status as :func:`main`."""
    from bench.plot import plot_soak
    from bench.soak import run_soak

    if args.soak_speedup <= 0:
        say("--soak-speedup must be positive")
        return 2
    plan = SoakPlan(
        batches=args.soak_batches,
        every=min(args.soak_every, args.soak_batches),
        rate=args.soak_rate,
        speedup=args.soak_speedup,
    )
    figures: dict[str, Any] = {
        "mode": "soak",
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "notes": [],
        "samples": [],
    }
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sensorwatch-soak-") as tmp:
        try:
            run_soak(plan, Path(tmp), args.out, figures, say)
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
    write_json(figures, args.out / "soak.json")
    plot_soak(figures, args.out / "soak.png")
    print(soak_table(figures))
    say(
        f"wrote {args.out / 'soak.json'}, {args.out / 'soak.png'} and the job's log "
        f"{args.out / 'soak-job.log'} in {figures['total_seconds']:.0f} s"
    )
    return status


def main(argv: list[str] | None = None) -> int:
    """Run; returns the exit status (0 done, 1 a measurement failed, 130 interrupted)."""
    claim_run_dir()
    args = build_parser().parse_args(argv)
    if args.soak:
        return soak_main(args)
    if args.anomaly:
        from bench.anomaly import main as anomaly_main

        return anomaly_main(args, say, machine())
    if args.learned_state:
        from bench.learned_state import main as learned_state_main

        return learned_state_main(args, say, machine())
    if args.bridge:
        from bench.bridge import main as bridge_main

        return bridge_main(args, say, machine())
    plan = quick_plan() if args.quick else full_plan()
    if args.steady_rates:
        plan = replace(plan, steady_rates=args.steady_rates)
    if args.rule_counts:
        plan = replace(plan, rule_counts=args.rule_counts)
    from bench.plot import plot

    figures: dict[str, Any] = {
        "mode": plan.mode,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "plan": plan.as_json(),
        "notes": list(plan.notes)
        + [f"skipped: {', '.join(args.skip)}"] * bool(args.skip)
        + [f"steady rates given: {plan.steady_rates}"] * bool(args.steady_rates),
        "throughput": {},
        "memory": {},
    }
    status = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sensorwatch-bench-") as tmp:
        try:
            measure_all(plan, Path(tmp), set(args.skip), figures)
        except KeyboardInterrupt:
            say("interrupted: writing what was measured")
            figures["notes"].append("interrupted before the end")
            status = 130
        except Exception as exc:
            say(f"failed: {exc}")
            figures["notes"].append(f"failed: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            status = 1
    figures["total_seconds"] = round(time.monotonic() - started, 1)
    # Other work on the machine shows here: the run's own load is about 2 on 2 cores.
    figures["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_json(figures, args.out / "figures.json")
    plot(figures, args.out / "figures.png")
    print(table(figures))
    say(
        f"wrote {args.out / 'figures.json'} and {args.out / 'figures.png'} "
        f"in {figures['total_seconds']:.0f} s"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
