"""scripts/kafka-local: a real broker per data dir, on loopback, started and stopped cleanly."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
from pathlib import Path

import psutil
import pytest
from confluent_kafka.admin import AdminClient

from conf.paths import PROJECT_ROOT
from local_stack.kafka import _format_storage, _server_properties
from local_stack.server import free_port
from tests.support.kafka_io import consume, produce
from topics.admin import create_topic

CLI = str(PROJECT_ROOT / "scripts" / "kafka-local")


def kafka_local(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *map(str, args)], capture_output=True, text=True, timeout=180, cwd=PROJECT_ROOT
    )


@pytest.fixture
def broker_dir(tmp_path: Path):
    data_dir = tmp_path / "k2"
    yield data_dir
    kafka_local("stop", "--data-dir", data_dir)  # whatever the test did, leave nothing behind


@pytest.mark.slow  # a drill: a second broker started, stopped and started again
def test_start_use_stop_restart_side_by_side(kafka, broker_dir: Path) -> None:
    port = free_port()

    started = kafka_local("start", "--data-dir", broker_dir, "--port", port)

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip().splitlines()[-1] == f"bootstrap=127.0.0.1:{port}"
    bootstrap = f"127.0.0.1:{port}"
    pid = json.loads((broker_dir / "broker.json").read_text())["pid"]
    listening = {
        c.laddr.ip for c in psutil.Process(pid).net_connections("tcp") if c.status == "LISTEN"
    }
    assert listening and all(ip.endswith("127.0.0.1") for ip in listening), listening
    # The JVM takes KAFKA_OPTS, as Kafka's scripts do (the tests set it: tests/conftest.py).
    options, cmdline = shlex.split(os.environ["KAFKA_OPTS"]), psutil.Process(pid).cmdline()
    assert options and all(option in cmdline for option in options), cmdline

    # Used from this (another) process: a 6-partition topic, messages in and out.
    assert create_topic(bootstrap, "readings", partitions=6)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert len(admin.list_topics("readings", timeout=10).topics["readings"].partitions) == 6
    produce(bootstrap, "readings", [(f"k{i}", f"v{i}") for i in range(200)])
    assert len(consume(bootstrap, "readings", expected=200)) == 200
    # The session broker runs side by side and still answers (its metadata names its
    # broker; its topics depend on which tests ran before).
    assert AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).brokers

    status = kafka_local("status", "--data-dir", broker_dir)
    assert status.returncode == 0 and f"bootstrap={bootstrap}" in status.stdout
    again = kafka_local("start", "--data-dir", broker_dir, "--port", port)
    assert again.returncode == 0
    assert json.loads((broker_dir / "broker.json").read_text())["pid"] == pid, "start is idempotent"

    stopped = kafka_local("stop", "--data-dir", broker_dir)

    assert stopped.returncode == 0
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "port still open after stop"
    assert kafka_local("status", "--data-dir", broker_dir).returncode == 1
    assert "started" in (broker_dir / "broker.log").read_text().lower()

    # A restart on the same data dir keeps the topic and its messages.
    restarted = kafka_local("start", "--data-dir", broker_dir, "--port", port)
    assert restarted.returncode == 0, restarted.stderr
    assert len(consume(bootstrap, "readings", expected=200)) == 200


@pytest.mark.jvm  # starts a broker
def test_start_on_a_taken_port_fails_clearly(broker_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        result = kafka_local("start", "--data-dir", broker_dir, "--port", port)

    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
    assert not (broker_dir / "broker.json").exists()


@pytest.mark.jvm  # Kafka's storage tool
def test_storage_formats_with_a_cluster_id_that_starts_with_a_dash(tmp_path: Path) -> None:
    # One random KRaft cluster id in 64 starts with "-"; it once failed CI this way.
    cluster_id = "-" + "A" * 21  # 22 characters, like every base64 UUID without padding
    config = tmp_path / "server.properties"
    config.write_text(_server_properties(tmp_path, free_port(), free_port()), encoding="utf-8")

    _format_storage(tmp_path, config, "256m", cluster_id=cluster_id)

    meta = (tmp_path / "data" / "meta.properties").read_text(encoding="utf-8")
    assert f"cluster.id={cluster_id}" in meta
