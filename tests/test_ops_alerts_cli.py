"""scripts/alerts against a lake written by the real job: filters, formats, follow, errors."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from tests.ops_lake import OpsLake, ops_lake
from tests.processes import Running

ALERTS_CLI = str(PROJECT_ROOT / "scripts" / "alerts")


@pytest.fixture(scope="module")
def lake(spark, kafka, tmp_path_factory) -> OpsLake:
    return ops_lake(spark, kafka, tmp_path_factory.mktemp("ops"))


def alerts_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ALERTS_CLI, *map(str, args)], capture_output=True, text=True, timeout=60, env=env
    )


def json_lines(lake: OpsLake, *args: str | Path) -> list[dict]:
    done = alerts_cli("--lake", lake.root, "--json", "--limit", "0", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def iso(ts: datetime) -> str:
    return ts.replace(tzinfo=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_json_lists_every_alert_newest_first_with_every_column(lake: OpsLake) -> None:
    shown = json_lines(lake)
    expected = {a["alert_id"]: a for a in lake.alerts}

    assert len(shown) == len(expected) > 20
    assert {a["alert_id"] for a in shown} == set(expected)
    detected = [a["detected_at"] for a in shown]
    assert detected == sorted(detected, reverse=True)
    for alert in shown:
        spark_row = expected[alert["alert_id"]]
        assert alert["window_start"] == iso(spark_row["window_start"])
        assert alert["detected_at"] == iso(spark_row["detected_at"])
        assert alert["observed_value"] == spark_row["observed_value"]
        assert (alert["sensor_id"], alert["site"], alert["rule"], alert["severity"]) == (
            spark_row["sensor_id"], spark_row["site"], spark_row["rule"], spark_row["severity"],
        )  # fmt: skip


def test_every_rule_and_severity_is_in_the_lake(lake: OpsLake) -> None:
    rules = Counter(a["rule"] for a in lake.alerts)

    assert set(rules) == {"overheat_reading", "sustained_high", "sensor_silent"}, rules


@pytest.mark.parametrize(
    ("args", "keep"),
    [
        (["--severity", "critical"], lambda a: a["severity"] == "critical"),
        (["--rule", "sensor_silent,sustained_high"], lambda a: a["rule"] != "overheat_reading"),
        (["--rule", "overheat_reading", "--rule", "sensor_silent"],
         lambda a: a["rule"] in ("overheat_reading", "sensor_silent")),
        (["--sensor", "sensor-0003", "--sensor", "sensor-0005"],
         lambda a: a["sensor_id"] in ("sensor-0003", "sensor-0005")),
        (["--severity", "warning", "--sensor", "sensor-0005"],
         lambda a: a["severity"] == "warning" and a["sensor_id"] == "sensor-0005"),
    ],
)  # fmt: skip
def test_filters_select_exactly_the_matching_alerts(lake: OpsLake, args, keep) -> None:
    expected = {a["alert_id"] for a in lake.alerts if keep(a)}

    assert expected, "the filter must match something in this lake"
    assert {a["alert_id"] for a in json_lines(lake, *args)} == expected


def test_site_filter(lake: OpsLake) -> None:
    site = Counter(a["site"] for a in lake.alerts).most_common(1)[0][0]
    shown = json_lines(lake, "--site", site)

    assert {a["alert_id"] for a in shown} == {
        a["alert_id"] for a in lake.alerts if a["site"] == site
    }


def test_since_filters_on_detected_at(lake: OpsLake) -> None:
    times = sorted({a["detected_at"] for a in lake.alerts})
    assert len(times) > 1, "alerts from several micro-batches"
    middle = times[len(times) // 2]

    later = json_lines(lake, "--since", iso(middle))
    naive = json_lines(lake, "--since", middle.isoformat())  # no zone: UTC

    expected = {a["alert_id"] for a in lake.alerts if a["detected_at"] >= middle}
    assert {a["alert_id"] for a in later} == expected == {a["alert_id"] for a in naive}
    assert len(expected) < len(lake.alerts)
    # The lake was written minutes ago: a day back shows all, a future time none.
    assert len(json_lines(lake, "--since", "1d")) == len(lake.alerts)
    assert len(json_lines(lake, "--since", "24h")) == len(lake.alerts)
    future = iso(max(times) + timedelta(seconds=1))
    assert json_lines(lake, "--since", future) == []


def test_table_is_aligned_newest_first_and_limited(lake: OpsLake) -> None:
    done = alerts_cli("--lake", lake.root, "--limit", "7")
    lines = done.stdout.splitlines()

    assert done.returncode == 0, done.stderr
    assert lines[0].split()[:3] == ["DETECTED", "(UTC)", "SEVERITY"]
    assert len(lines) == 1 + 7
    assert f"7 of {len(lake.alerts)} alerts" in done.stderr
    # Columns line up: SEVERITY starts at the same offset in every row.
    column = lines[0].index("SEVERITY")
    assert all(line[column:].split()[0] in ("CRITICAL", "WARNING") for line in lines[1:])
    newest = max(a["detected_at"] for a in lake.alerts)
    assert lines[1].startswith(newest.strftime("%Y-%m-%d %H:%M:%S"))
    silent = alerts_cli("--lake", lake.root, "--rule", "sensor_silent", "--limit", "1")
    assert " s silent" in silent.stdout
    overheat = alerts_cli("--lake", lake.root, "--rule", "overheat_reading", "--limit", "1")
    assert "°C ≥" in overheat.stdout


def test_lake_from_the_environment(lake: OpsLake) -> None:
    import os

    done = alerts_cli(
        "--json", "--limit", "0", env={**os.environ, "SENSORWATCH_LAKE": str(lake.root)}
    )

    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == len(lake.alerts)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--since", "yesterday"], "--since"),
        (["--since", "5 minutes"], "--since"),
        (["--severity", "fatal"], "--severity"),
        (["--rule", "overheat"], "--rule"),
        (["--limit", "-3"], "--limit"),
        (["--interval", "0"], "--interval"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    done = alerts_cli("--lake", tmp_path, *args)

    assert done.returncode == 2
    assert flag in done.stderr
    assert done.stdout == ""


def test_missing_lake_fails_and_missing_table_is_empty(tmp_path: Path) -> None:
    missing = alerts_cli("--lake", tmp_path / "nowhere")
    empty = alerts_cli("--lake", tmp_path)
    empty_json = alerts_cli("--lake", tmp_path, "--json")

    assert missing.returncode == 1
    assert "no lake at" in missing.stderr and str(tmp_path / "nowhere") in missing.stderr
    assert (empty.returncode, empty.stdout) == (0, "")
    assert "no alerts table" in empty.stderr
    assert (empty_json.returncode, empty_json.stdout) == (0, "")


def copy_alerts_up_to(source: Path, target: Path, version: int) -> list[Path]:
    """Copy the alerts table as it was at ``version``; returns the later commit files."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("_delta_log"))
    log = target / "_delta_log"
    log.mkdir()
    later = []
    for entry in sorted((source / "_delta_log").iterdir()):
        if not entry.is_file() or not entry.name[:20].isdigit():
            continue  # _last_checkpoint, Hadoop's hidden .crc files
        if int(entry.name.split(".")[0]) <= version:
            shutil.copy2(entry, log / entry.name)
        elif entry.suffix == ".json":
            later.append(entry)
    return later


def test_follow_prints_new_alerts_as_commits_land_and_exits_0_on_sigterm(
    spark, lake: OpsLake, tmp_path: Path
) -> None:
    """The job's commits are replayed into a copy of the table, one at a time."""
    source = lake.root / "alerts"
    copy = tmp_path / "lake"
    follow = Running(
        [ALERTS_CLI, "--lake", copy, "--follow", "--json", "--interval", "0.2", "--limit", "0"]
    )
    try:
        # The lake does not exist yet: follow waits for it.
        follow.wait_for_line(lambda line: "waiting for" in line, timeout=30)
        copy.mkdir()
        later = copy_alerts_up_to(source, copy / "alerts", version=1)
        printed: list[dict] = []

        def collect(until: int) -> None:
            while len(printed) < until:
                line = follow.wait_for_line(lambda line: line.startswith("{"), timeout=30)
                printed.append(json.loads(line))

        # What the commits up to version 1 hold, then what each later commit adds.
        at_v1 = spark.read.format("delta").load(str(copy / "alerts")).count()
        collect(at_v1)
        assert at_v1 > 0 and later
        for commit in later:
            shutil.copy2(commit, copy / "alerts" / "_delta_log" / commit.name)
        collect(len(lake.alerts))

        assert sorted(a["alert_id"] for a in printed) == sorted(a["alert_id"] for a in lake.alerts)
        follow.terminate()
        assert follow.finish(timeout=30) == 0
        assert not any("Traceback" in line for line in follow.lines)
    finally:
        follow.kill()


def test_the_command_imports_neither_spark_nor_pandas(lake: OpsLake) -> None:
    # What keeps it fast (the ops view starts in well under a second): no JVM, and none
    # of the heavy Python imports, checked by what the interpreter actually loaded.
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['alerts', '--lake', {str(lake.root)!r}, '--since', '1h', '--site', 'x']\n"
        "try:\n"
        "    runpy.run_module('ops.alerts_cli', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [str(PROJECT_ROOT / ".venv" / "bin" / "python"), "-c", probe],
        capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
    )  # fmt: skip
    loaded = set(done.stdout.split())

    assert done.returncode == 0, done.stderr[-2000:]
    assert "pyarrow" in loaded  # the measurement works
    assert not {name for name in loaded if name.split(".")[0] in ("pandas", "pyspark", "py4j")}
