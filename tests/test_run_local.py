"""scripts/run-local: broker, producer, job, dashboard, Alertmanager and notifier under one
command; Ctrl-C stops them all."""

from __future__ import annotations

import json
import shutil
import urllib.request

import psutil

from conf.paths import PROJECT_ROOT
from scripts.kafka_local import free_port
from tests.processes import Running


def test_run_local_runs_the_pipeline_and_stops_cleanly_on_ctrl_c(spark, tmp_path) -> None:
    dashboard_port, alertmanager_port = free_port(), free_port()
    with_alertmanager = bool(
        shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    )
    running = Running(
        [str(PROJECT_ROOT / "scripts" / "run-local")],
        env={
            "SENSORWATCH_LOCAL_DIR": str(tmp_path),
            "SENSORWATCH_LOCAL_PORT": str(free_port()),
            "SENSORWATCH_DASHBOARD_PORT": str(dashboard_port),
            "SENSORWATCH_ALERTMANAGER_PORT": str(alertmanager_port),
            "SENSORWATCH_SENSORS": "20",
            "SENSORWATCH_INTERVAL": "1",
            "SENSORWATCH_TRIGGER": "2 seconds",
        },
    )
    try:
        dashboard_url = f"http://127.0.0.1:{dashboard_port}"
        running.wait_for_line(lambda line: line == f"run-local: dashboard {dashboard_url}", 120)
        with urllib.request.urlopen(dashboard_url + "/api/incidents", timeout=10) as reply:
            assert reply.status == 200
        running.wait_for_line(lambda line: "ingest #" in line and "rows written" in line, 240)
        broker_pid = json.loads((tmp_path / "kafka" / "broker.json").read_text())["pid"]
        alertmanager_pid = None
        if with_alertmanager:
            alertmanager_url = f"http://127.0.0.1:{alertmanager_port}"
            assert any(
                line.startswith(f"run-local: Alertmanager {alertmanager_url} ")
                for line in running.lines
            ), "\n".join(running.lines[-40:])
            state = json.loads((tmp_path / "alertmanager" / "alertmanager.json").read_text())
            alertmanager_pid = state["pid"]
            with urllib.request.urlopen(alertmanager_url + "/-/ready", timeout=10) as reply:
                assert reply.status == 200
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
    if with_alertmanager:
        assert "notify: keeping Alertmanager" in output
        assert "run-local: Alertmanager stopped" in output
        assert not psutil.pid_exists(alertmanager_pid)
    else:
        assert "run-local: no Alertmanager installed" in output
    assert "Traceback" not in output
    assert not [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    readings = spark.read.format("delta").load(str(tmp_path / "lake" / "readings"))
    assert readings.count() > 0
