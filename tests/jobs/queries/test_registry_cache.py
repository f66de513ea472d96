"""The device registry: checked, cached, refreshed."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from contract.registry import Entry, RegistryError, RegistryFile, read_registry
from jobs.alerting.reading_rules import rule_thresholds
from jobs.queries.context import JobContext
from jobs.queries.registry_cache import RegistryCache
from lake.layout import Lake


def write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_registry_reads_the_sensors(tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 10, "room": "lab",
                  "device_model": "TX-9"},
                 {"sensor_id": "b", "site": None, "max_temp_c": None},
                 {"sensor_id": "c"}])  # fmt: skip

    assert read_registry(path) == {
        "a": Entry("a", "X", 10.0, "TX-9"),
        "b": Entry("b", None, None),
        "c": Entry("c", None, None),
    }


BAD_LINES = [
    ("not json at all", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"site": "X"}', "sensor_id: expected a non-empty string"),
    ('{"sensor_id": null}', "sensor_id: expected a non-empty string"),
    ('{"sensor_id": 7}', "sensor_id: expected a non-empty string"),
    ('{"sensor_id": "b", "site": 3}', "site of b: expected a string or null"),
    ('{"sensor_id": "b", "max_temp_c": "hot"}', "max_temp_c of b: expected a finite number"),
    ('{"sensor_id": "b", "max_temp_c": true}', "max_temp_c of b: expected a finite number"),
    ('{"sensor_id": "b", "max_temp_c": NaN}', "max_temp_c of b: expected a finite number"),
    ('{"sensor_id": "b", "device_model": 9}', "device_model of b: expected a string or null"),
    ('{"sensor_id": "a"}', "sensor_id a listed more than once"),
]


@pytest.mark.parametrize(("line", "reason"), BAD_LINES)
def test_strict_refuses_a_bad_line_naming_it(tmp_path, line: str, reason: str) -> None:
    path = tmp_path / "fleet.jsonl"
    path.write_text('{"sensor_id": "a", "site": "X"}\n' + line + "\n")

    with pytest.raises(RegistryError, match=rf"line 2: {reason}"):
        read_registry(path)


def test_lenient_skips_each_bad_line_and_says_why(tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    lines = ['{"sensor_id": "a", "site": "X"}'] + [line for line, _ in BAD_LINES]
    path.write_text("\n".join([*lines, '{"sensor_id": "z", "max_temp_c": 12}']) + "\n")
    said: list[str] = []

    entries = read_registry(path, lenient=True, log=said.append)

    assert entries == {"a": Entry("a", "X", None), "z": Entry("z", None, 12.0)}
    assert len(said) == len(BAD_LINES)
    for (_, reason), line in zip(BAD_LINES, said, strict=True):
        assert reason in line and line.endswith("line skipped")


def test_a_file_edited_badly_while_running_keeps_the_program_going(tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    write(path, [{"sensor_id": "a", "max_temp_c": 30.0}])
    said: list[str] = []
    followed = RegistryFile(path, log=said.append)
    assert followed.current() == {"a": Entry("a", None, 30.0)}

    path.write_text('{"sensor_id": "a", "max_temp_c": 25}\nbroken\n')
    os.utime(path, (1, 1))
    assert followed.current() == {"a": Entry("a", None, 25.0)}  # the good line is used
    path.write_bytes(b"\xff\xfe not text")
    os.utime(path, (2, 2))
    assert followed.current() == {"a": Entry("a", None, 25.0)}  # kept
    assert followed.current() == {"a": Entry("a", None, 25.0)}
    assert [("line 2: not JSON" in s, "not UTF-8" in s) for s in said] == [
        (True, False),
        (False, True),
    ]


def test_a_bad_registry_is_refused_at_start(spark, tmp_path) -> None:
    path = tmp_path / "fleet.jsonl"
    path.write_text('{"sensor_id": "a"}\n{"sensor_id": "a"}\n')

    with pytest.raises(RegistryError, match="listed more than once"):
        RegistryCache(spark, path, check_every=1)
    with pytest.raises(RegistryError, match="does not exist"):
        RegistryCache(spark, tmp_path / "nope.jsonl", check_every=1)


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
    settings = load_settings(JobSettings, {"lake": tmp_path / "lake"})
    ctx = JobContext(spark, settings, Lake(tmp_path / "lake"), RegistryCache(spark, path, 1))
    ids = pa.chunked_array([["a", "b"]])

    def threshold_of(sensor: str) -> float:
        [overheat] = [r for r in ctx.reading_rules(ctx.sensors()) if r.name == "overheat_reading"]
        limits = rule_thresholds(ids, overheat).to_pylist()
        return dict(zip(ids.to_pylist(), limits, strict=True))[sensor]

    assert threshold_of("a") == 30.0
    assert threshold_of("b") == 45.0  # not registered: the rule's own
    assert ctx.sensors() is ctx.sensors()  # the same registry: not rebuilt per batch

    write(path, [{"sensor_id": "a", "site": "X", "max_temp_c": 12.5}])
    os.utime(path, (1, 1))
    assert threshold_of("a") == 12.5
