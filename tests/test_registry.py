"""The device registry: checked, cached, refreshed."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from conf.settings import JobSettings, load_settings
from jobs.context import JobContext
from jobs.overheat import thresholds
from jobs.registry import RegistryCache, RegistryError, load_registry
from jobs.tables import Lake


def write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_registry_loads_the_sensors(spark, tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 10.0, "room": "lab"},
                 {"sensor_id": "b", "site": "Y", "max_temp_c": None}])  # fmt: skip

    rows = sorted(load_registry(spark, path).collect())

    assert [(r.sensor_id, r.site, r.max_temp_c) for r in rows] == [
        ("a", "X", 10.0),
        ("b", "Y", None),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"sensor_id": "a", "site": "X"}\nnot json at all\n', "malformed line"),
        ('{"site": "X"}\n', "malformed line"),
        ('{"sensor_id": "a"}\n{"sensor_id": "a"}\n', "listed more than once"),
    ],
)
def test_a_bad_registry_is_refused_with_the_reason(spark, tmp_path, content, message) -> None:
    path = tmp_path / "fleet.jsonl"
    path.write_text(content)

    with pytest.raises(RegistryError, match=message):
        load_registry(spark, path)


def test_missing_registry_is_refused(spark, tmp_path) -> None:
    with pytest.raises(RegistryError, match="does not exist"):
        load_registry(spark, tmp_path / "nope.jsonl")


def test_registry_is_reread_when_the_file_changes(spark, tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 30.0}])
    cache = RegistryCache(spark, path, check_every=2)
    assert cache.current().first().max_temp_c == 30.0

    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 12.5}])
    os.utime(path, (1, 1))  # a different mtime even within the same second

    assert cache.current().first().max_temp_c == 12.5  # second batch: checked and re-read
    assert cache.current().first().max_temp_c == 12.5


def test_without_a_registry_every_sensor_uses_defaults(spark) -> None:
    cache = RegistryCache(spark, None, check_every=1)

    assert cache.current().count() == 0 and not cache.enabled


def test_the_overheat_threshold_follows_the_registry_file(spark, tmp_path) -> None:
    """The job's sensors (and so each reading's threshold) change with the file."""
    path = tmp_path / "fleet.jsonl"
    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 30.0}])
    settings = load_settings(JobSettings, {"lake": tmp_path / "lake"}, {})
    ctx = JobContext(spark, settings, Lake(tmp_path / "lake"), RegistryCache(spark, path, 1))
    ids = pa.chunked_array([["a", "b"]])

    def threshold_of(sensor: str) -> float:
        limits = thresholds(ids, ctx.sensors(), settings.critical_temp_c).to_pylist()
        return dict(zip(ids.to_pylist(), limits, strict=True))[sensor]

    assert threshold_of("a") == 30.0
    assert threshold_of("b") == settings.critical_temp_c  # not registered: the default
    assert ctx.sensors() is ctx.sensors()  # the same registry: not rebuilt per batch

    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 12.5}])
    os.utime(path, (1, 1))
    assert threshold_of("a") == 12.5
