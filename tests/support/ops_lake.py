"""One lake written by the real job for the ops-view tests (CLI, endpoints, browser),
and small incidents tables written with delta-rs for the cases a job run cannot pin down.

The producer sends a small fleet with many incidents into the session broker and the
job runs once (availableNow). The lake is built once per test session, whichever ops
test module asks first; the expected values are read back with Spark, independently of
the ``deltalake`` reader under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from conf.paths import PROJECT_ROOT
from jobs.spark.arrow_schema import arrow_schema
from jobs.stream import run
from jobs.writer.delta_io import collect_rows
from jobs.writer.tables import ALL_TABLES, INCIDENTS_SCHEMA, create_tables
from lake.layout import Lake
from local_stack.server import free_port
from tests.support.brokers import Broker
from tests.support.job_settings import available_now
from tests.support.kafka_io import make_topic
from tests.support.producer_run import run_producer

START = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class OpsLake:
    """The lake, its registry and what Spark reads from its tables."""

    root: Path
    registry: Path
    alerts: list[dict[str, Any]]
    stats_1m: list[dict[str, Any]]
    metrics: list[dict[str, Any]]
    max_temp_c: dict[str, float | None]
    incidents: list[dict[str, Any]] = field(default_factory=list)


_built: list[OpsLake] = []


def ops_lake(spark: SparkSession, kafka: Broker, tmp: Path) -> OpsLake:
    """The session's ops lake, built on first use (about a minute: one job run)."""
    if not _built:
        _built.append(_build(spark, kafka, tmp))
    return _built[0]


def _build(spark: SparkSession, kafka: Broker, tmp: Path) -> OpsLake:
    topic, lake, registry = make_topic(kafka, "ops"), tmp / "lake", tmp / "fleet.jsonl"
    # 20 sensors, 3,000 readings (12.5 minutes of event time): spikes, sustained
    # overheating and silences give every rule and both severities.
    done = run_producer(
        "--bootstrap-servers", kafka.bootstrap, "--topic", topic, "--count", 3000,
        "--sensors", 20, "--seed", 11, "--start-time", START, "--registry-out", registry,
        "--spike-rate", 10, "--sustained-rate", 3, "--silence-rate", 2,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run(available_now(kafka, topic, lake, registry=registry), spark)

    def rows(table: str) -> list[dict[str, Any]]:
        if not (lake / table / "_delta_log").is_dir():
            return []
        frame = spark.read.format("delta").load(str(lake / table))
        return [row.asDict() for row in collect_rows(frame)]  # timestamps aware UTC

    fleet = [json.loads(line) for line in registry.read_text().splitlines()]
    return OpsLake(
        root=lake,
        registry=registry,
        alerts=rows("alerts"),
        stats_1m=rows("sensor_stats_1m"),
        metrics=rows("pipeline_metrics"),
        max_temp_c={s["sensor_id"]: s.get("max_temp_c") for s in fleet},
        incidents=rows("incidents"),
    )


# --- incidents written directly (delta-rs, the same writer the job commits with) ------

EVENT_START = datetime(2026, 1, 1, tzinfo=UTC)


def incident(
    incident_id: str,
    sensor_id: str,
    rule: str = "overheat_reading",
    status: str = "firing",
    started_minute: float = 0.0,
    minutes: float = 3.0,
    updated_ago: timedelta = timedelta(seconds=0),
    **columns: Any,
) -> dict[str, Any]:
    """One incidents row: event times from EVENT_START, updated_at back from now (and
    created_at ``minutes`` before that).

    ``minutes`` runs from started_at to last_seen_at, and to resolved_at (a minute after
    the last alert) when resolved.
    """
    started = EVENT_START + timedelta(minutes=started_minute)
    last_seen = started + timedelta(minutes=minutes)
    critical = rule == "overheat_reading"
    row = {
        "incident_id": incident_id,
        "sensor_id": sensor_id,
        "site": f"site of {sensor_id}",
        "rule": rule,
        "severity": "critical" if critical else "warning",
        "status": status,
        "started_at": started,
        "last_seen_at": last_seen,
        "resolved_at": last_seen + timedelta(minutes=1) if status == "resolved" else None,
        "peak_value": {"overheat_reading": 52.5, "sustained_high": 38.25}.get(rule, 420.0),
        "threshold": {"overheat_reading": 45.0, "sustained_high": 35.0}.get(rule, 300.0),
        "alert_count": 3,
        "created_at": datetime.now(UTC) - updated_ago - timedelta(minutes=minutes),
        "updated_at": datetime.now(UTC) - updated_ago,
    }
    row.update(columns)
    return row


def write_incidents(lake: Path, rows: list[dict[str, Any]]) -> None:
    """Commit ``rows`` to the lake's incidents table (created with every table the job
    creates, if need be), upserted by incident_id as the job does: one data file per
    commit, a changed row moves to the new file."""
    create_tables(Lake(lake))
    data = pa.Table.from_pylist(rows, schema=arrow_schema(INCIDENTS_SCHEMA))
    (
        DeltaTable(str(lake / "incidents"))
        .merge(data, "t.incident_id = s.incident_id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


def append_rows(lake: Path, name: str, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to one of the lake's tables (created with every table the job
    creates, if need be), one commit and data file per row: what a reader's file
    skipping needs to show."""
    create_tables(Lake(lake))
    for row in rows:
        data = pa.Table.from_pylist([row], schema=arrow_schema(ALL_TABLES[name]))
        write_deltalake(str(lake / name), data, mode="append")


def break_files(table: Path, column: str, values: set[Any]) -> int:
    """Make unreadable the data files of a table whose rows all have ``column`` in
    ``values``; returns how many. A reader that opens one of them fails."""
    broken = 0
    for uri in DeltaTable(str(table)).file_uris():
        if set(pq.read_table(uri, columns=[column]).column(0).to_pylist()) <= values:
            Path(uri).write_bytes(b"not parquet")
            broken += 1
    return broken


def get_json(url: str) -> tuple[int, Any]:
    """GET a JSON endpoint: (status, body); an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post_json(url: str, body: Any, content_type: str = "application/json") -> tuple[int, Any]:
    """POST ``body`` (JSON unless it is bytes already): (status, JSON answer)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": content_type}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@contextmanager
def dashboard(*args: str | Path, timeout: float = 30, live: bool = False) -> Iterator[str]:
    """Run ``python -m ops.dashboard`` on a free port; yields its base URL once /healthz
    answers, stops it (SIGTERM) afterwards and checks it exited cleanly. Without ``live``
    it follows no Kafka topic (the tests that want its live alerts give the broker)."""
    port = free_port()
    env = {**os.environ, "SENSORWATCH_REALTIME_ALERTS": "true" if live else "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ops.dashboard", "--port", str(port), *map(str, args)],
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                if get_json(base + "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "dashboard did not answer /healthz in time"
            time.sleep(0.1)  # poll interval while the server starts
        yield base
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, output
