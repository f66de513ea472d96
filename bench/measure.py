"""One function per figure. Each returns plain JSON values for figures.json."""

from __future__ import annotations

import json
import shutil
import statistics
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.env import (
    AlertmanagerWatch,
    AlertsTopicListener,
    DashboardWatch,
    MemorySampler,
    Producer,
    ProgressRecorder,
    new_topic,
    produce,
    topic_size,
)
from bench.plan import SEED, START_TIME, Plan
from bench.stats import rate, summarize, tail_by_phase
from common.waiting import poll_until
from conf.lake_location import is_object_store, join
from conf.settings.base import SettingsFile, load_settings
from conf.settings.job import JobSettings
from contract.alerts import OVERHEAT
from contract.times import from_epoch_ms, parse_instant
from jobs.alerting.alert_sink import AlertWriter
from jobs.stream import DEFAULT_CONFIG, run
from jobs.writer.delta_io import BatchWriter, collect_rows
from jobs.writer.tables import ALERTS_SCHEMA, EVENT_JSON, TABLES
from lake import storage
from lake.layout import ALERTS, INCIDENTS, QUARANTINE, READINGS, Lake
from producer.fleet import build_fleet, write_registry

# The parts of a query's durationMs worth summing (triggerExecution is the whole batch).
DURATIONS = (
    "addBatch",
    "getBatch",
    "latestOffset",
    "queryPlanning",
    "walCommit",
    "commitOffsets",
    "triggerExecution",
)


@dataclass
class Bench:
    """What every measurement shares."""

    spark: SparkSession
    bootstrap: str
    workdir: Path
    plan: Plan
    memory: MemorySampler
    progress: ProgressRecorder
    say: Any = print
    # Where the measured lakes go: the work folder, or a bucket (s3a://bucket/prefix).
    lakes: str | None = None

    def lake(self, name: str) -> str:
        """A fresh lake's location for one measurement."""
        return join(self.lakes or str(self.workdir), name)


@dataclass(frozen=True)
class Topic:
    """A topic filled for a measurement."""

    name: str
    partitions: int
    messages: int
    sensors: int


def fill_topic(bench: Bench, prefix: str, count: int, sensors: int, partitions: int) -> Topic:
    """A fresh topic holding ``count`` producer readings (simulated clock, fixed seed)."""
    name = new_topic(bench.bootstrap, prefix, partitions)
    produce(
        bench.bootstrap,
        name,
        "--count",
        count,
        "--rate",
        0,
        "--sensors",
        sensors,
        "--interval",
        bench.plan.interval_s,
        "--seed",
        SEED,
        "--start-time",
        START_TIME,
    )
    return Topic(name, partitions, topic_size(bench.bootstrap, name, partitions), sensors)


def producer_rate(bench: Bench, prefix: str = "main") -> tuple[Topic, dict[str, Any]]:
    """Producer messages/s into a fresh topic (``--rate 0``); the topic is then the
    backlog of the consumer and job figures."""
    plan = bench.plan
    name = new_topic(bench.bootstrap, prefix, plan.partitions)
    done = produce(
        bench.bootstrap,
        name,
        "--count",
        plan.backlog,
        "--rate",
        0,
        "--sensors",
        plan.sensors,
        "--interval",
        plan.interval_s,
        "--seed",
        SEED,
        "--start-time",
        START_TIME,
    )
    topic = Topic(
        name, plan.partitions, topic_size(bench.bootstrap, name, plan.partitions), plan.sensors
    )
    return topic, {
        "messages": done.delivered,
        "failed": done.failed,
        "seconds": done.seconds,
        "msgs_per_s": round(done.rate),
        "process_seconds": round(done.wall_seconds, 2),
        "how": "python -m producer --rate 0, its own summary (sending only; "
        "process_seconds adds interpreter start and fleet building)",
    }


def consumer_rate(bench: Bench, topic: Topic) -> dict[str, Any]:
    """A plain confluent-kafka consumer reading the whole topic, values untouched."""
    consumer = Consumer(
        {
            "bootstrap.servers": bench.bootstrap,
            "group.id": "bench-ceiling",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign(
        [TopicPartition(topic.name, p, OFFSET_BEGINNING) for p in range(topic.partitions)]
    )
    done_partitions: set[int] = set()
    count = size = 0
    start = time.monotonic()
    deadline = start + 600
    try:
        while len(done_partitions) < topic.partitions and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done_partitions.add(msg.partition())
                        continue
                    raise RuntimeError(f"consume error: {error}")
                count += 1
                size += len(msg.value() or b"")
        seconds = time.monotonic() - start
    finally:
        consumer.close()
    return {
        "messages": count,
        "seconds": round(seconds, 3),
        "msgs_per_s": round(rate(count, seconds)),
        "mb_per_s": round(rate(size, seconds) / 1e6, 1),
        "complete": count == topic.messages,
    }


def job_settings(bench: Bench, topic: str, lake: str | Path, **overrides: object) -> JobSettings:
    """The shipped conf/pipeline.toml, pointed at the bench broker, topic and lake."""
    given = {"bootstrap_servers": bench.bootstrap, "topic": topic, "lake": lake, **overrides}
    return load_settings(JobSettings, given, SettingsFile(DEFAULT_CONFIG))


def profile(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Per query: batches, input rows and the summed durationMs parts, in seconds."""
    queries: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"batches": 0, "input_rows": 0, **{k: 0.0 for k in DURATIONS}}
    )
    for event in events:
        entry = queries[event.get("name") or "?"]
        entry["batches"] += 1
        entry["input_rows"] += int(event.get("numInputRows") or 0)
        for key, ms in (event.get("durationMs") or {}).items():
            if key in entry:
                entry[key] += ms / 1000
    return {
        name: {k: round(v, 2) if isinstance(v, float) else v for k, v in entry.items()}
        for name, entry in queries.items()
    }


def table_counts(spark: SparkSession, lake: str) -> dict[str, int]:
    """Rows per table of a lake."""
    return {name: spark.read.format("delta").load(join(lake, name)).count() for name in TABLES}


def remove_lake(lake: str) -> None:
    """Delete a measured lake's folder. A lake in the bench's bucket stays: it goes with
    S3Proxy's data folder, inside the work folder."""
    if not is_object_store(lake):
        shutil.rmtree(lake, ignore_errors=True)


def minimal_query_rate(bench: Bench, topic: Topic) -> dict[str, Any]:
    """The floor cost of Spark on this machine: Kafka -> from_json with a fixed schema ->
    one Delta table with the built-in sink, availableNow, nothing else; same session and
    topic as the job."""
    lake = bench.workdir / "lake-minimal"
    records = (
        bench.spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bench.bootstrap)
        .option("subscribe", topic.name)
        .option("startingOffsets", "earliest")
        .load()
    )
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), EVENT_JSON).alias("e")
    ).select("e.*")
    bench.memory.phase()
    start = time.monotonic()
    query = (
        parsed.writeStream.format("delta")
        .option("checkpointLocation", str(lake / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(lake / "table"))
    )
    query.awaitTermination()
    seconds = time.monotonic() - start
    rows = bench.spark.read.format("delta").load(str(lake / "table")).count()
    shutil.rmtree(lake, ignore_errors=True)
    return {
        "messages": topic.messages,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rate(topic.messages, seconds)),
        "complete": rows == topic.messages,
        "peak_rss_mb": bench.memory.phase_peak_mb(),
    }


def job_rate(
    bench: Bench,
    topic: Topic,
    label: str,
    readers: bool = True,
    metrics: bool = True,
    rules: Path | None = None,
) -> dict[str, Any]:
    """The job with availableNow on the topic's backlog: Kafka records per second until
    every table is written (``readers`` off: ingest alone; ``metrics`` off: no Prometheus
    metrics collected; ``rules``: another rules file)."""
    lake = bench.lake(f"lake-{label}")
    # The lake path: the real-time path's query would run as one more micro-batch query
    # here, which is not how it runs (the steady runs measure it, on and off).
    more = {} if rules is None else {"rules": rules}
    settings = job_settings(
        bench, topic.name, lake, trigger="availableNow", readers=readers, realtime=False,
        metrics=metrics, **more,
    )  # fmt: skip
    bench.progress.take()
    bench.memory.phase()
    start, cpu_start = time.monotonic(), bench.memory.cpu_seconds()
    run(settings, bench.spark)
    seconds = time.monotonic() - start
    cpu_s = bench.memory.cpu_seconds() - cpu_start
    peak, parts = bench.memory.phase_peak_mb(), bench.memory.phase_peak_parts_mb()
    counts = table_counts(bench.spark, lake)
    remove_lake(lake)
    return {
        "messages": topic.messages,
        "partitions": topic.partitions,
        "sensors": topic.sensors,
        "readers": readers,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rate(topic.messages, seconds)),
        # CPU of this process and its JVM: less moved by the neighbours than the wall clock.
        "cpu_ms_per_1k_rows": round(1e6 * cpu_s / topic.messages, 1),
        "complete": counts[READINGS] + counts[QUARANTINE] == topic.messages,
        "tables": counts,
        "peak_rss_mb": peak,
        "peak_rss_parts_mb": parts,
        "profile": profile(bench.progress.take()),
    }


def metrics_cost(bench: Bench, topic: Topic, repeats: int = 6) -> dict[str, Any]:
    """The job's rows/s over the backlog with its Prometheus metrics off and on, ``repeats``
    runs each, in off-on-on-off order (a shared machine drifts: side by side, and neither
    always first). On: everything the job collects for /metrics, per batch and per commit
    (the per-reason quarantine counts in ingest's pass, the listener's updates); the
    endpoint itself only works when scraped, every 15 s by default."""
    runs: dict[str, list[int]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(repeats):
        for state in ("off", "on") if i % 2 == 0 else ("on", "off"):
            done = job_rate(bench, topic, f"metrics-{state}-{i}", metrics=state == "on")
            assert done["complete"], done
            runs[state].append(done["rows_per_s"])
            cpu[state].append(done["cpu_ms_per_1k_rows"])
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    cpu_off, cpu_on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    return {
        "rows_per_s_off": runs["off"],
        "rows_per_s_on": runs["on"],
        "median_off": round(off),
        "median_on": round(on),
        "on_vs_off_pct": round(100.0 * (on - off) / off, 1),
        # How far apart two runs of the same kind were: the noise the difference sits in.
        "spread_pct": round(
            100.0 * max((max(v) - min(v)) / statistics.median(v) for v in runs.values()), 1
        ),
        "cpu_ms_per_1k_rows_off": cpu["off"],
        "cpu_ms_per_1k_rows_on": cpu["on"],
        "cpu_on_vs_off_pct": round(100.0 * (cpu_on - cpu_off) / cpu_off, 1),
    }


def commit_costs(bench: Bench, repeats: int = 5) -> dict[str, Any]:
    """Seconds of one tiny Delta append: Spark's plain append, Spark's with txnAppId
    (Delta's idempotent write), as the job writes a table (BatchWriter: a Spark job whose
    tasks write the data files, a delta-rs commit of them with the batch's transaction,
    checked only on a run's first batch), and one alerts write (AlertWriter: ids known in
    memory, rows committed by delta-rs without a Spark job): the fixed cost a micro-batch
    pays per table it writes."""
    lake = Lake(bench.workdir / "lake-commits")
    spark = bench.spark
    metadata = Path(lake.checkpoint("bench")) / "metadata"
    metadata.parent.mkdir(parents=True, exist_ok=True)
    metadata.write_text(json.dumps({"id": "commits"}) + "\n", encoding="utf-8")
    writer = BatchWriter(spark, lake, "bench")
    row = spark.createDataFrame([(1,)], "x INT")
    DeltaTable.create(lake.table("marked"), schema=pa.schema([("x", pa.int32())]))
    plain, txn, marked, alerts = [], [], [], []
    for version in range(repeats + 1):
        start = time.monotonic()
        row.write.format("delta").mode("append").save(lake.table("plain"))
        plain.append(time.monotonic() - start)
        start = time.monotonic()
        (
            row.write.format("delta")
            .mode("append")
            .option("txnAppId", "bench")
            .option("txnVersion", version)
            .save(lake.table("txn"))
        )
        txn.append(time.monotonic() - start)
        start = time.monotonic()
        writer.append(row, lake.table("marked"), version)
        marked.append(time.monotonic() - start)
    alerts_path = lake.table(ALERTS)
    spark.createDataFrame([], ALERTS_SCHEMA).write.format("delta").save(alerts_path)
    alert_writer = AlertWriter(writer, (OVERHEAT,))
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(repeats + 1):
        alert = spark.createDataFrame(
            [(f"id-{n}", "s", "site", OVERHEAT, "critical", stamp, stamp, 50.0, 45.0, 1, stamp)],
            ALERTS_SCHEMA,
        )
        rows = collect_rows(alert)
        start = time.monotonic()
        alert_writer.write(rows, n)
        alerts.append(time.monotonic() - start)
    shutil.rmtree(lake.root, ignore_errors=True)
    # The first of each creates the table (and is a run's first, checked, batch); the
    # median of the rest is the steady cost.
    return {
        "plain_append_s_median": round(statistics.median(plain[1:]), 3),
        "txn_append_s_median": round(statistics.median(txn[1:]), 3),
        "append_s_median": round(statistics.median(marked[1:]), 3),
        "alert_write_s_median": round(statistics.median(alerts[1:]), 3),
        "repeats": repeats,
    }


def _ingested(progress: dict[str, Any] | None) -> int:
    """Offsets ingest has processed up to (its last batch's end offsets, summed)."""
    if not progress:
        return 0
    total = 0
    for source in progress.get("sources") or []:
        offsets = source.get("endOffset") or {}
        for partitions in offsets.values() if isinstance(offsets, dict) else []:
            total += sum(int(v) for v in partitions.values())
    return total


def _first_visible(table: str, key: str) -> dict[str, datetime]:
    """``key`` value -> when the Delta commit that first added a row with it became
    visible (aware UTC): the commit's own timestamp in the log.

    Only commits that change data count, and rows are found by reading the files they
    added: table maintenance rewrites small files into new ones (OPTIMIZE, with
    ``dataChange`` false), which must not move a row's time to the compaction's."""
    seen: dict[str, datetime] = {}
    filesystem, root = storage.filesystem(table)
    log = join(table, "_delta_log")
    for name in sorted(n for n in storage.list_names(log) if n.endswith(".json")):
        text = storage.read_text(join(log, name))
        actions = [json.loads(line) for line in text.splitlines() if line]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        when = from_epoch_ms(info.get("timestamp", 0))
        for action in actions:
            add = action.get("add")
            if add is None or not add.get("dataChange", True):
                continue
            data = pq.read_table(f"{root}/{add['path']}", columns=[key], filesystem=filesystem)
            for value in data[key].to_pylist():
                seen.setdefault(value, when)
    return seen


def _alert_latencies(spark: SparkSession, lake: str) -> list[float]:
    """Per overheat alert: when its row became visible in the alerts table (the commit
    that first added it) minus the Kafka timestamp of the first reading at or above the
    threshold in the sensor's 1-minute bucket, in seconds."""
    commits = _first_visible(join(lake, ALERTS), "alert_id")
    visible = spark.createDataFrame(list(commits.items()), "alert_id string, visible_at timestamp")
    readings = spark.read.format("delta").load(join(lake, READINGS)).alias("r")
    alerts = (
        spark.read.format("delta").load(join(lake, ALERTS)).join(visible, "alert_id").alias("a")
    )
    alerts = alerts.filter(F.col("a.rule") == OVERHEAT)
    joined = alerts.join(
        readings,
        (F.col("r.sensor_id") == F.col("a.sensor_id"))
        & (F.date_trunc("minute", F.col("r.event_time")) == F.col("a.window_start"))
        & (F.col("r.temperature_c") >= F.col("a.threshold")),
    )
    per_alert = joined.groupBy("a.alert_id", "a.visible_at").agg(
        F.min("r.kafka_timestamp").alias("first")
    )
    micros = F.unix_micros("visible_at") - F.unix_micros("first")
    return [row.us / 1e6 for row in per_alert.select(micros.alias("us")).collect()]


# A steady run whose producer sent less than this share of its target rate is limited by
# the producer (one Python process), not by the job.
PRODUCER_SHORTFALL = 0.95

# A steady run keeps up when, after its first fifth (start-up), the backlog never holds
# more than this many seconds of sending, and ingest catches up soon after sending ends.
KEPT_UP_BACKLOG_S = 10.0
KEPT_UP_DRAIN_S = 15.0


def kept_up(samples: list[dict[str, float]], per_s: int, seconds: float) -> bool:
    """Whether the backlog stayed bounded during a steady run (see KEPT_UP_BACKLOG_S)."""
    settled = [s for s in samples if seconds / 5 <= s["t"] <= seconds]
    bound = per_s * KEPT_UP_BACKLOG_S
    return bool(settled) and all(s["produced"] - s["ingested"] <= bound for s in settled)


def _incident_latencies(
    spark: SparkSession, lake: str, first_seen: dict[str, datetime]
) -> list[float]:
    """Per overheat incident that reached Alertmanager: when it first showed as active
    there minus the Kafka timestamp of the first reading at or above the threshold in the
    incident's first minute, in seconds."""
    if not first_seen:
        return []
    seen = spark.createDataFrame(
        [(k, round(v.timestamp() * 1e6)) for k, v in first_seen.items()],
        "incident_id string, seen_us long",
    )
    incidents = (
        spark.read.format("delta").load(join(lake, INCIDENTS))
        .filter(F.col("rule") == OVERHEAT)
        .join(seen, "incident_id")
        .alias("i")
    )  # fmt: skip
    readings = spark.read.format("delta").load(join(lake, READINGS)).alias("r")
    joined = incidents.join(
        readings,
        (F.col("r.sensor_id") == F.col("i.sensor_id"))
        & (F.date_trunc("minute", F.col("r.event_time")) == F.col("i.started_at"))
        & (F.col("r.temperature_c") >= F.col("i.threshold")),
    )
    per_incident = joined.groupBy("i.incident_id", "i.seen_us").agg(
        F.min("r.kafka_timestamp").alias("first")
    )
    micros = F.col("seen_us") - F.unix_micros("first")
    return [row.us / 1e6 for row in per_incident.select(micros.alias("us")).collect()]


def alert_latency(
    bench: Bench,
    per_s: int | None = None,
    seconds: float | None = None,
    alertmanager: bool = False,
    realtime: bool = True,
    dashboard: bool = False,
    lake_limit: int | None = None,
    rules: Path | None = None,
    idle_s: float = 0.0,
) -> dict[str, Any]:
    """A steady run: event-to-alert latency of overheat_reading and whether the job keeps
    up, at ``per_s`` readings/s for ``seconds`` (default: the plan's latency run), 2-second
    trigger, every query on (``realtime`` off: the lake path alone). With the real-time
    path, also each hot reading's latency to its message on the alerts topic (the
    message's Kafka time minus the reading's) and, with ``dashboard``, to its arrival on a
    page of the dashboard (the moment the bench's reader of its live stream has it).
    ``lake_limit``: at most this many readings per ingest micro-batch (the lake path held
    behind on purpose; the real-time path reads without a limit). ``rules``: another
    rules file. ``idle_s``: a burst, the job idle that long before the load starts at
    full rate; the real-time path's tail is then also told by phase (the first 10 s of
    load, around its batch boundaries, the rest: ``realtime_tail_by_phase_ms``).

    The job (all queries, shipped settings) runs in a thread with an interval trigger; the
    producer sends in real time at ``per_s`` msg/s (5,000 sensors, or one per reading per
    second below that) with frequent spikes. The backlog (offsets in Kafka not yet
    ingested) is sampled every second.
    """
    plan = bench.plan
    per_s = per_s or plan.latency_rate
    seconds = seconds or plan.latency_seconds
    sensors = min(per_s, plan.latency_rate)
    interval = sensors / per_s  # event seconds between two readings of one sensor
    name = new_topic(bench.bootstrap, f"steady{per_s}", plan.partitions)
    registry = bench.workdir / f"steady{per_s}-fleet.jsonl"
    write_registry(build_fleet(sensors, SEED), registry)
    # One lake per run: the runs of one rate (with and without the real-time path, the
    # latency run) share the Spark session, whose Delta log cache would warn of a
    # recreated table at one path.
    kind = ("" if realtime else "-lake-only") + (f"-limit{lake_limit}" if lake_limit else "")
    kind += f"-{rules.stem}" if rules is not None else ""
    lake = bench.lake(f"lake-steady{per_s}-{seconds:g}s{kind}")
    alerts_topic = f"{name}-alerts"
    settings = job_settings(
        bench, name, lake, trigger="2 seconds", registry=registry, realtime=realtime,
        alerts_topic=alerts_topic, max_offsets_per_trigger=lake_limit,
        **({} if rules is None else {"rules": rules}),
    )  # fmt: skip
    stop = threading.Event()
    listen = AlertsTopicListener(bench.bootstrap, alerts_topic) if realtime else None
    failures: list[BaseException] = []

    def job() -> None:
        try:
            run(settings, bench.spark, should_stop=stop.is_set)
        except BaseException as exc:  # reported below, with the figures
            failures.append(exc)

    lane = (bench.bootstrap, alerts_topic) if realtime else None
    watch = AlertmanagerWatch(bench.workdir, lake, lane) if alertmanager else None
    page = DashboardWatch(lake, bench.bootstrap, alerts_topic) if dashboard and realtime else None
    bench.progress.take()
    bench.memory.phase()
    thread = threading.Thread(target=job, name="bench-latency-job", daemon=True)
    if watch is not None:
        watch.__enter__()
        bench.memory.exclude(watch.notifier_pid)
    if page is not None:
        page.__enter__()
        bench.memory.exclude(page.proc.pid)
    if listen is not None:
        listen.start()
    thread.start()
    samples: list[dict[str, float]] = []
    producer: Producer | None = None
    try:
        poll_until(lambda: bench.progress.latest("ingest") is not None or bool(failures), 180, 0.2)
        if bench.progress.latest("ingest") is None:
            raise RuntimeError(f"the job did not start: {failures or 'timeout'}")
        if idle_s:
            bench.say(f"burst: the job idle for {idle_s:.0f} s, then {per_s:,} readings/s")
            time.sleep(idle_s)  # the load's shape: nothing comes meanwhile
        producer = Producer(
            bench.bootstrap,
            name,
            "--rate",
            per_s,
            "--sensors",
            sensors,
            "--interval",
            interval,
            "--duration",
            seconds,
            "--seed",
            SEED,
            "--spike-rate",
            plan.latency_spike_rate,
        )
        bench.memory.exclude(producer.pid)
        start, cpu_start = time.monotonic(), bench.memory.cpu_seconds()
        start_wall = time.time()
        sent_at = caught_up_at = None
        while not failures:
            produced = topic_size(bench.bootstrap, name, plan.partitions)
            ingested = _ingested(bench.progress.latest("ingest"))
            now = time.monotonic() - start
            samples.append({"t": round(now, 1), "produced": produced, "ingested": ingested})
            if producer.proc.poll() is not None:
                sent_at = sent_at or now
                if ingested >= produced:
                    caught_up_at = now
                    break
                if now - sent_at > plan.latency_drain_seconds:
                    break
            time.sleep(1.0)  # sampling period of the backlog; the loop ends at a deadline
        cpu_s, cpu_wall_s = bench.memory.cpu_seconds() - cpu_start, time.monotonic() - start
        sent = producer.finish()
    finally:
        stop.set()
        if producer is not None:
            producer.stop()
        thread.join(timeout=300)
        if watch is not None:
            watch.__exit__(None, None, None)
        if page is not None:
            page.__exit__(None, None, None)
        if listen is not None:
            listen.stop()
    if failures:
        raise RuntimeError(f"the job failed during the latency run: {failures[0]}")
    latencies = _alert_latencies(bench.spark, lake)
    alerts = bench.spark.read.format("delta").load(join(lake, ALERTS))
    lake_ids = {r.alert_id for r in alerts.filter(F.col("rule") == OVERHEAT).collect()}
    to_alertmanager = _incident_latencies(bench.spark, lake, watch.first_seen) if watch else []
    events = bench.progress.take()
    ingest_events = [e for e in events if e.get("name") == "ingest" and e.get("numInputRows")]
    backlog = [s["produced"] - s["ingested"] for s in samples]
    elapsed = caught_up_at if caught_up_at is not None else samples[-1]["t"]
    result = {
        "target_rate": per_s,
        "lake_limit": lake_limit,
        "sensors": sensors,
        "seconds": seconds,
        "kept_up": kept_up(samples, per_s, seconds)
        and caught_up_at is not None
        and sent_at is not None
        and caught_up_at - sent_at <= KEPT_UP_DRAIN_S,
        "trigger": settings.trigger,
        "readers_trigger": settings.readers_trigger,
        "produced": sent.delivered,
        "producer_msgs_per_s": round(sent.rate),
        # Offsets ingested from the start of sending until caught up (or the deadline).
        "ingest_rows_per_s": round(rate(samples[-1]["ingested"], elapsed)),
        "ingest_batches": len(ingest_events),
        "ingest_batch_s_median": round(
            statistics.median(e["durationMs"]["triggerExecution"] for e in ingest_events) / 1000, 2
        )
        if ingest_events
        else None,
        "ingest_batch_s": summarize(
            [e["durationMs"]["triggerExecution"] / 1000 for e in ingest_events]
        ),
        "ingest_batch_rows_median": statistics.median(e["numInputRows"] for e in ingest_events)
        if ingest_events
        else None,
        "backlog_max": max(backlog, default=0),
        "backlog_when_sending_ended": next(
            (b for s, b in zip(samples, backlog, strict=True) if sent_at and s["t"] >= sent_at),
            None,
        ),
        "caught_up": caught_up_at is not None,
        "caught_up_after_s": caught_up_at,
        "drain_s_after_sending": round(caught_up_at - sent_at, 1)
        if caught_up_at is not None and sent_at is not None
        else None,
        "latency_s": {
            k: round(v, 2) if isinstance(v, float) else v for k, v in summarize(latencies).items()
        },
        "latencies_s": [round(v, 3) for v in sorted(latencies)],
        "realtime": realtime,
        # Kafka time of each hot reading -> Kafka time of its message on the alerts topic.
        "realtime_latency_ms": {
            k: round(v * 1000, 1) if isinstance(v, float) else v
            for k, v in summarize(listen.latencies).items()
        }
        if listen is not None
        else None,
        "realtime_messages": len(listen.latencies) if listen is not None else None,
        # Where the tail comes from: the slowest messages, and the real-time query's
        # batch starts, in seconds since the first send.
        "realtime_slowest": slowest(listen, start_wall) if listen is not None else None,
        "realtime_batches_at_s": [
            round(parse_instant(e["timestamp"]).timestamp() - start_wall, 1)
            for e in events
            if e.get("name") == "realtime"
        ]
        if listen is not None
        else None,
        "idle_s": idle_s,
        "realtime_tail_by_phase_ms": _tail_by_phase_ms(listen, start_wall, events)
        if listen is not None
        else None,
        "realtime_alert_ids": len(listen.alert_ids) if listen is not None else None,
        # Two paths, one truth: overheat alert ids in the table and not on the topic, and
        # the other way round (both should be 0).
        "realtime_missing": len(lake_ids - listen.alert_ids) if listen is not None else None,
        "realtime_unknown": len(listen.alert_ids - lake_ids) if listen is not None else None,
        # Kafka append of the first hot reading -> its incident active in Alertmanager.
        "incident_latency_s": {
            k: round(v, 2) if isinstance(v, float) else v
            for k, v in summarize(to_alertmanager).items()
        }
        if watch is not None
        else None,
        "incident_latencies_s": [round(v, 3) for v in sorted(to_alertmanager)],
        # Kafka time of each hot reading -> its alert on a dashboard page (new alert_ids).
        "dashboard_latency_ms": {
            k: round(v * 1000, 1) if isinstance(v, float) else v
            for k, v in summarize(page.latencies).items()
        }
        if page is not None
        else None,
        # CPU of the job's processes (driver, JVM, Python workers) from the first send
        # until caught up: what the real-time path costs is the difference of two runs.
        "job_cpu_s": round(cpu_s, 1),
        "job_cpu_cores": round(cpu_s / cpu_wall_s, 2) if cpu_wall_s else None,
        "job_cpu_ms_per_1k_readings": round(1e6 * cpu_s / sent.delivered, 1)
        if sent.delivered
        else None,
        "peak_rss_mb": bench.memory.phase_peak_mb(),
        "peak_rss_parts_mb": bench.memory.phase_peak_parts_mb(),
        "backlog_samples": samples,
        "profile": profile(events),
    }
    remove_lake(lake)
    return result


def batch_boundaries(events: list[dict[str, Any]], query: str, after: float) -> list[float]:
    """The moments (epoch seconds, later than ``after``) at which ``query`` went from one
    batch to the next, from its progress events: each batch's start, and its end (start
    plus ``triggerExecution``), which is the next batch's start. A batch reports only once
    it ended, so the last boundary of a run is known only from the end of the batch before
    it (the next batch's own report comes after the run). Within a second: one moment."""
    moments = []
    for event in events:
        if event.get("name") != query:
            continue
        start = parse_instant(event["timestamp"]).timestamp()
        took = (event.get("durationMs") or {}).get("triggerExecution")
        moments += [start] + ([start + took / 1000] if took is not None else [])
    found: list[float] = []
    for moment in sorted(m for m in moments if m > after):
        if not found or moment - found[-1] >= 1.0:
            found.append(moment)
    return found


def _tail_by_phase_ms(
    listen: AlertsTopicListener, start_wall: float, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The real-time path's latencies by phase (bench/stats.py tail_by_phase), in ms; the
    boundaries: :func:`batch_boundaries` of the path after the load began."""
    boundaries = batch_boundaries(events, "realtime", start_wall)
    read_at = [sent - lat for lat, sent in zip(listen.latencies, listen.sent_at, strict=True)]
    phases = tail_by_phase(listen.latencies, read_at, start_wall, boundaries)
    return {
        "boundaries_at_s": [round(b - start_wall, 1) for b in boundaries],
        **{
            name: {k: round(v * 1000, 1) if isinstance(v, float) else v for k, v in s.items()}
            for name, s in phases.items()
        },
    }


def slowest(listen: AlertsTopicListener, start_wall: float, count: int = 5) -> list[dict]:
    """The ``count`` slowest messages of a run: when (seconds since the first send) and
    how slow (ms)."""
    pairs = sorted(zip(listen.latencies, listen.sent_at, strict=True), reverse=True)[:count]
    return [{"at_s": round(sent - start_wall, 1), "ms": round(lat * 1000)} for lat, sent in pairs]


def rule_counts(bench: Bench, topic: Topic, counts: tuple[int, ...]) -> dict[str, Any]:
    """The job's throughput (availableNow, all queries) and latency (the steady run, with
    the real-time path) with rules files of ``counts`` rules (bench/rule_sets.py),
    in that order, on one topic and in one session."""
    from bench.rule_sets import write_rules

    found: dict[str, Any] = {}
    for count in counts:
        path = write_rules(count, bench.workdir / f"rules{count}.toml")
        bench.say(f"rules: {count} rules, availableNow then {bench.plan.latency_rate:,}/s")
        throughput = job_rate(bench, topic, f"rules{count}", rules=path)
        latency = alert_latency(bench, rules=path)
        found[str(count)] = {
            "rows_per_s": throughput["rows_per_s"],
            "cpu_ms_per_1k_rows": throughput["cpu_ms_per_1k_rows"],
            "complete": throughput["complete"],
            "alerts": throughput["tables"].get(ALERTS),
            "profile": throughput["profile"],
            "latency_s": latency["latency_s"],
            "realtime_latency_ms": latency.get("realtime_latency_ms"),
            "caught_up": latency["caught_up"],
            "job_cpu_cores": latency.get("job_cpu_cores"),
        }
    return found


def small_batches(bench: Bench) -> dict[str, Any]:
    """Ingest micro-batches of a few hundred rows: a steady run at ``small_batch_rate``
    readings/s with the 2-second trigger (every query on); the batch durations are
    Spark's triggerExecution, Kafka offsets to checkpoint commit."""
    plan = bench.plan
    result = alert_latency(bench, plan.small_batch_rate, plan.small_batch_seconds)
    return {
        key: result.get(key)
        for key in (
            "target_rate",
            "seconds",
            "ingest_batches",
            "ingest_batch_rows_median",
            "ingest_batch_s",
            "latency_s",
        )
    }


def steady_rates(bench: Bench, measured: dict[str, Any], realtime: bool = True) -> dict[str, Any]:
    """The highest steady rate the job keeps up with, every query on (``realtime`` off:
    the lake path alone): a steady run (see alert_latency) per rate of the plan, lowest
    first, until one falls behind. ``measured`` is the latency run, reused for its rate."""
    plan = bench.plan
    runs: list[dict[str, Any]] = []
    for per_s in plan.steady_rates:
        if (
            per_s == measured.get("target_rate")
            and measured.get("seconds") == plan.steady_seconds
            and measured.get("realtime") == realtime
        ):
            result = measured
        else:
            without = "" if realtime else ", without the real-time path"
            bench.say(f"steady rate: {per_s:,} readings/s for {plan.steady_seconds:.0f} s{without}")
            # The notifier and a real Alertmanager too: the incident's latency at each rate.
            result = alert_latency(
                bench, per_s, plan.steady_seconds, alertmanager=True, realtime=realtime
            )
        runs.append(
            {
                key: result.get(key)
                for key in (
                    "target_rate",
                    "producer_msgs_per_s",
                    "ingest_rows_per_s",
                    "backlog_max",
                    "drain_s_after_sending",
                    "kept_up",
                    "latency_s",
                    "ingest_batch_s_median",
                    "peak_rss_mb",
                    "realtime_latency_ms",
                    "realtime_slowest",
                    "realtime_batches_at_s",
                    "incident_latency_s",
                    "realtime_missing",
                    "realtime_unknown",
                    "job_cpu_cores",
                    "job_cpu_ms_per_1k_readings",
                )
            }
        )
        sent = result.get("producer_msgs_per_s") or 0
        # A producer that could not send at the target shows the job at the rate it
        # sent, not the target's; a higher target would show no more.
        runs[-1]["producer_limited"] = sent < PRODUCER_SHORTFALL * per_s
        if not result["kept_up"] or runs[-1]["producer_limited"]:
            break
    kept = [
        min(r["target_rate"], r["producer_msgs_per_s"] or 0) if r["producer_limited"]
        else r["target_rate"]
        for r in runs
        if r["kept_up"]
    ]  # fmt: skip
    return {
        "realtime": realtime,
        "seconds": plan.steady_seconds,
        "backlog_bound_s": KEPT_UP_BACKLOG_S,
        "drain_bound_s": KEPT_UP_DRAIN_S,
        "highest_kept_up": max(kept, default=None),
        "runs": runs,
    }


def scaling(bench: Bench, reuse: dict[tuple[int, int], dict[str, Any]]) -> dict[str, Any]:
    """rows/s (all tables, availableNow) against partitions and against sensors, each
    point on its own fresh topic of ``scaling_backlog`` readings. ``reuse`` maps
    (partitions, sensors) to a result already measured at that size."""
    plan = bench.plan
    measured: dict[tuple[int, int], dict[str, Any]] = dict(reuse)

    def point(partitions: int, sensors: int) -> dict[str, Any]:
        key = (partitions, sensors)
        if key not in measured:
            bench.say(f"scaling: {partitions} partitions, {sensors:,} sensors ...")
            topic = fill_topic(
                bench, f"p{partitions}-s{sensors}", plan.scaling_backlog, sensors, partitions
            )
            result = job_rate(bench, topic, f"p{partitions}-s{sensors}")
            result.pop("profile")
            measured[key] = result
        return measured[key]

    by_partitions = [point(p, plan.sensors) for p in plan.scaling_partitions]
    by_sensors = [point(plan.partitions, s) for s in plan.scaling_sensors]
    return {
        "backlog": plan.scaling_backlog,
        "partitions": [
            {"partitions": r["partitions"], "rows_per_s": r["rows_per_s"], "seconds": r["seconds"]}
            for r in by_partitions
        ],
        "sensors": [
            {
                "sensors": r["sensors"],
                "rows_per_s": r["rows_per_s"],
                "seconds": r["seconds"],
                "peak_rss_mb": r["peak_rss_mb"],
            }
            for r in by_sensors
        ],
    }
