"""scripts/run-local: broker, producer and job under one command; Ctrl-C stops all three."""

from __future__ import annotations

import json

import psutil

from conf.paths import PROJECT_ROOT
from scripts.kafka_local import free_port
from tests.processes import Running


def test_run_local_runs_the_pipeline_and_stops_cleanly_on_ctrl_c(spark, tmp_path) -> None:
    running = Running(
        [str(PROJECT_ROOT / "scripts" / "run-local")],
        env={
            "SENSORWATCH_LOCAL_DIR": str(tmp_path),
            "SENSORWATCH_LOCAL_PORT": str(free_port()),
            "SENSORWATCH_SENSORS": "20",
            "SENSORWATCH_INTERVAL": "1",
            "SENSORWATCH_TRIGGER": "2 seconds",
        },
    )
    try:
        running.wait_for_line(lambda line: "ingest #" in line and "rows written" in line, 240)
        broker_pid = json.loads((tmp_path / "kafka" / "broker.json").read_text())["pid"]
        children = psutil.Process(running.proc.pid).children(recursive=True)

        running.interrupt_group()  # Ctrl-C

        assert running.finish(timeout=180) == 0, "\n".join(running.lines[-40:])
    finally:
        running.kill()
    output = "\n".join(running.lines)
    assert "jobs.stream: stopped" in output
    assert "producer: done:" in output and " 0 failed" in output
    assert "run-local: broker stopped" in output
    assert not psutil.pid_exists(broker_pid)
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    readings = spark.read.format("delta").load(str(tmp_path / "lake" / "readings"))
    assert readings.count() > 0
