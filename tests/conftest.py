"""Shared fixtures: one SparkSession and one Kafka broker per test session."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from conf.settings import JobSettings, load_settings
from jobs.spark_session import build_spark_session
from producer.topics import create_topic
from tests.brokers import Broker, docker_unavailable_reason, session_broker

_broker_source: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``docker`` with the reason when no Docker engine answers."""
    docker_items = [item for item in items if "docker" in item.keywords]
    if not docker_items:
        return
    reason = docker_unavailable_reason()
    if reason is None:
        return
    for item in docker_items:
        item.add_marker(
            pytest.mark.skip(
                reason=f"needs a Docker engine: {reason}; `scripts/docker-lane up` and "
                '`eval "$(scripts/docker-lane env)"` provide one (docs/docker.md)'
            )
        )


def pytest_report_header(config: pytest.Config) -> str:
    """Say up front whether Docker tests will run."""
    reason = docker_unavailable_reason()
    return "docker: engine answers" if reason is None else f"docker: {reason}"


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say which broker the integration tests ran against."""
    if _broker_source:
        terminalreporter.write_line(f"kafka broker: {_broker_source[0]}")


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The session's real Kafka broker (see tests/brokers.py for how it is chosen)."""
    with session_broker(tmp_path_factory.mktemp("broker")) as broker:
        _broker_source.append(f"{broker.source} at {broker.bootstrap}")
        yield broker


@pytest.fixture(scope="session")
def kafka_admin(kafka: Broker) -> AdminClient:
    """An Admin API client on the session broker."""
    return AdminClient({"bootstrap.servers": kafka.bootstrap})


def available_now(kafka: Broker, topic: str, lake: Path, **overrides: object) -> JobSettings:
    """Job settings for a test run that processes the topic and exits (availableNow)."""
    given = {"bootstrap_servers": kafka.bootstrap, "topic": topic, "lake": lake}
    return load_settings(JobSettings, {**given, "trigger": "availableNow", **overrides})


def make_topic(kafka: Broker, prefix: str = "test", partitions: int = 6) -> str:
    """Create a fresh, uniquely named topic, ready to use, and return its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    assert create_topic(kafka.bootstrap, name, partitions)
    return name


@pytest.fixture
def new_topic(kafka: Broker) -> Callable[..., str]:
    """Create fresh topics: ``new_topic(prefix, partitions=6)`` returns the name."""
    return lambda prefix="test", partitions=6: make_topic(kafka, prefix, partitions)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The one SparkSession of the test session (local mode, Delta and Kafka on board)."""
    warehouse: Path = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark_session("sensorwatch-tests", warehouse_dir=warehouse)
    yield session
    session.stop()
