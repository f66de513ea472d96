"""``scripts/bench [--quick] [--out DIR]``: run the benchmarks, write figures.json and
figures.png, print a short table. ``scripts/bench --soak``: the soak benchmark alone
(docs/architecture.md#running-for-weeks), soak.json and soak.png. ``scripts/bench
--anomaly``: rule sets scored on a labelled recording (bench/anomaly.py), anomaly.json."""

from __future__ import annotations

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
from typing import Annotated, Any, Literal

import psutil
from pydantic import BeforeValidator, Field, PositiveInt, field_validator

from bench.anomaly import AnomalyOptions
from bench.bridge import BridgeOptions
from bench.learned_state import LearnedStateOptions
from bench.plan import Plan, full_plan, quick_plan
from bench.report import measured_run, soak_table, table, write_json
from bench.run_dir import claim_run_dir
from bench.soak import SoakOptions, SoakPlan
from conf import cli
from conf.settings.base import SettingsError

PARTS = (
    "minimal", "job", "readers-only", "metrics", "commits", "latency", "behind", "small",
    "steady", "scaling", "driver", "cores", "s3", "first-alert", "rules", "burst",
)  # fmt: skip

# The s3 part's lakes: a bucket on S3Proxy (scripts/s3-local), started for the run.
S3_BUCKET = "bench"
S3_LAKES = f"s3a://{S3_BUCKET}/lakes"


def _numbers(value: Any) -> Any:
    """``"5000,10000"`` (a flag) as a tuple of whole numbers; a sequence as it is."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class BenchOptions(SoakOptions, AnomalyOptions, LearnedStateOptions, BridgeOptions):
    """The flags of ``scripts/bench``: the full run's, and each mode's (bench/soak.py,
    bench/anomaly.py, bench/learned_state.py, bench/bridge.py)."""

    quick: bool = Field(False, description="smaller sizes: about 9 minutes on 2 cores")
    skip: list[Literal[PARTS]] = Field(  # type: ignore[valid-type]
        default_factory=list,
        description="leave out a part (repeatable); for trying things out, not for recorded "
        f"figures: {', '.join(PARTS)}",
    )
    steady_rates: Annotated[tuple[PositiveInt, ...], BeforeValidator(_numbers)] | None = Field(
        None,
        description="the steady runs' rates, readings/s, comma-separated, lowest first "
        f"(default: the plan's: {','.join(map(str, full_plan().steady_rates))}; quick: "
        f"{','.join(map(str, quick_plan().steady_rates))})",
    )
    rule_counts: Annotated[tuple[PositiveInt, ...], BeforeValidator(_numbers)] | None = Field(
        None,
        description="the rules part's rules files, comma-separated, in the order run "
        f"(default: {','.join(map(str, full_plan().rule_counts))}; the reverse order shows "
        "what the order costs)",
    )

    @field_validator("steady_rates")
    @classmethod
    def _rising(cls, rates: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if rates is not None and list(rates) != sorted(set(rates)):
            raise ValueError("expected rising rates, lowest first")
        return rates


def description() -> str:
    """The help's text; the temporary folder is the run's own (bench/run_dir.py), so it is
    read once the run has claimed it."""
    return (
        "Benchmarks against a local Kafka broker started for the run (free port, a folder "
        f"in {tempfile.gettempdir()}, stopped at the end): producer msg/s, a plain consumer's "
        "read rate, the job's rows/s with and without the reader queries, overheat alert "
        "latency at a steady rate, peak memory, scaling with partitions and sensors. Writes "
        "figures.json and figures.png to --out. --soak, --anomaly, --learned-state and "
        "--bridge run one benchmark alone instead (docs/benchmarks.md)."
    )


def read_options(argv: list[str] | None) -> BenchOptions:
    """The command line, made by conf/cli.py like every program's.

    Raises:
        SettingsError: a bad flag value, one line per flag.
    """
    return cli.read_options(BenchOptions, argv, prog="scripts/bench", description=description())


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
    from local_stack.server import free_port

    s3a_jars()  # the job's session needs the connector: set up here, as scripts/setup --s3
    data_dir = workdir / "s3"
    server = local_s3.start(data_dir, free_port(), buckets=(S3_BUCKET,))
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


def soak_main(args: BenchOptions) -> int:
    """``--soak``: run the soak alone; returns the exit status as :func:`main`."""
    from bench.plot import plot_soak
    from bench.soak import run_soak

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
    status = measured_run(
        figures, "soak", lambda tmp: run_soak(plan, tmp, args.out, figures, say), say
    )
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
    try:
        args = read_options(argv)
    except SettingsError as exc:
        say(str(exc))
        return 2
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
    status = measured_run(
        figures, "bench", lambda tmp: measure_all(plan, tmp, set(args.skip), figures), say
    )
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
