"""The job gives the same rows whatever the machine's time zone
(docs/architecture.md#time-zones).

One topic, through the job twice, as a user on a laptop in each zone would run it: the
process's ``TZ`` is America/New_York (behind UTC, with daylight saving) and Asia/Kolkata
(ahead, by a half hour). Each zone is a ``python -m jobs.stream`` of its own, except the
test session's zone (conftest.py), whose Spark, started in it, runs that one. The event
clock crosses New York's fall-back hour (2026-11-01 06:00Z), where a naive local time is
ambiguous. Every table, read back as UTC instants, must be equal in both runs: a naive
datetime anywhere is read 4 or 5 hours behind in one and 5.5 ahead in the other. (A run
in UTC, where naive and aware agree, would add a cold JVM and catch nothing more.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from jobs.stream import run
from lake.reader import LakeReader
from tests.support.job_settings import available_now
from tests.support.kafka_io import make_topic
from tests.support.lake_rows import TABLES, comparable, produce_comparable

pytestmark = pytest.mark.slow  # runs both zones itself

ZONES = ("America/New_York", "Asia/Kolkata")
START = "2026-11-01T05:35:00Z"  # 01:35 EDT; at 06:00Z New York's clocks go back to 01:00
COUNT = 6_000


@pytest.fixture(scope="module")
def lakes(spark, kafka, tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("zones")
    topic, registry = make_topic(kafka, "zones"), tmp / "fleet.jsonl"
    produce_comparable(
        kafka.bootstrap, topic, registry, count=COUNT, sensors=15, seed=11, start=START
    )
    lakes = {}
    for zone in ZONES:
        lake = tmp / f"lake-{zone.replace('/', '-')}"
        lakes[zone] = lake
        if zone == os.environ.get("TZ"):  # a cold JVM fewer: the session's is in this zone
            run(available_now(kafka, topic, lake, registry=registry), spark)
            continue
        job = subprocess.run(
            [sys.executable, "-m", "jobs.stream", "--bootstrap-servers", kafka.bootstrap,
             "--topic", topic, "--lake", str(lake), "--registry", str(registry),
             "--trigger", "availableNow"],
            capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT,
            env={**os.environ, "TZ": zone},
        )  # fmt: skip
        assert job.returncode == 0, f"TZ={zone}:\n{job.stdout[-2000:]}\n{job.stderr[-3000:]}"
    return lakes


def rows(lake: Path, name: str) -> list[tuple]:
    data = LakeReader(lake).read(name)
    assert data is not None, f"{lake.name}: no {name} table"
    return comparable(data.to_pylist())


@pytest.mark.parametrize("name", TABLES)
def test_every_table_is_the_same_in_both_zones(lakes, name: str) -> None:
    behind, ahead = (rows(lakes[zone], name) for zone in ZONES)

    assert behind, f"{name}: the {ZONES[0]} run wrote nothing to compare"
    assert ahead == behind


def test_the_input_exercises_every_rule_and_the_ambiguous_hour(lakes) -> None:
    alerts = LakeReader(lakes[ZONES[0]]).read("alerts").to_pylist()
    stats = LakeReader(lakes[ZONES[0]]).read("sensor_stats_5m", ["window_start"]).to_pylist()

    # Every rule of the default file the input scripts incidents for (no failing batteries
    # or humid stretches), but temperature_off_normal: its 30-minute warm-up and 10 minutes
    # out leave it at most the last minutes of the run's 45 (none, with this seed).
    fired = Counter(a["rule"] for a in alerts).keys() - {"temperature_off_normal"}
    assert fired == {"overheat_reading", "sustained_high", "sensor_silent", "temperature_rising"}
    hours = {s["window_start"].strftime("%H") for s in stats}
    assert {"05", "06"} <= hours  # windows on both sides of 06:00Z, New York's fall-back
