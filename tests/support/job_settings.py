"""The job's settings for a test run."""

from __future__ import annotations

from pathlib import Path

from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from tests.support.brokers import Broker


def available_now(kafka: Broker, topic: str, lake: Path, **overrides: object) -> JobSettings:
    """Job settings for a test run that processes the topic and exits (availableNow)."""
    given = {"bootstrap_servers": kafka.bootstrap, "topic": topic, "lake": lake}
    return load_settings(JobSettings, {**given, "trigger": "availableNow", **overrides})
