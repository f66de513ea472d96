"""scripts/alerts against a lake written by the real job: filters, formats, follow, errors;
and its incidents against incidents tables written with delta-rs (every status, rule and
age a test needs), including the empty tables of issue 14."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from conf.paths import PROJECT_ROOT, RULES_FILE
from contract.times import iso
from jobs.spark.arrow_schema import arrow_schema
from jobs.writer.tables import ALERTS_SCHEMA, create_tables
from lake.layout import Lake
from lake.reader import LakeReader
from ops.alert_reader import AlertFilter, read_alerts, read_incidents
from tests.support.ops_lake import OpsLake, incident, ops_lake, write_incidents
from tests.support.processes import Running

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
    done = alerts_cli("--lake", lake.root, "--alerts", "--limit", "7")
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
    assert "°C vs" in overheat.stdout


def test_default_view_is_incidents_then_alerts(lake: OpsLake) -> None:
    done = alerts_cli("--lake", lake.root, "--limit", "7")
    lines = done.stdout.splitlines()
    alerts_at = lines.index(f"Alerts, newest first: 7 of {len(lake.alerts)} alerts (--limit)")

    assert done.returncode == 0, done.stderr
    assert lines[0].startswith("Incidents: ")
    assert lines[alerts_at - 1] == ""
    assert lines[alerts_at + 1].split()[:3] == ["DETECTED", "(UTC)", "SEVERITY"]
    assert len(lines) == alerts_at + 2 + 7
    # The same alert rows as the alerts-only view.
    only = alerts_cli("--lake", lake.root, "--alerts", "--limit", "7").stdout.splitlines()
    assert lines[alerts_at + 1 :] == only


def test_incidents_of_the_jobs_lake_are_those_spark_reads(lake: OpsLake) -> None:
    # The job's lake has an incidents table from its first start on; its content is
    # whatever the job wrote (checked row by row here, ordering and filters below).
    shown = json_lines(lake, "--incidents", "--since", "1d")
    expected = {i["incident_id"]: i for i in lake.incidents}  # all changed minutes ago
    statuses = Counter(i["status"] for i in lake.incidents)

    assert statuses["firing"] + statuses["resolved"] == len(lake.incidents) > 0
    assert [i["status"] for i in shown] == ["firing"] * statuses["firing"] + ["resolved"] * (
        statuses["resolved"]
    )
    assert {i["incident_id"] for i in shown} == set(expected)
    for record in shown:
        spark_row = expected[record["incident_id"]]
        assert record["started_at"] == iso(spark_row["started_at"])
        assert (record["status"], record["alert_count"]) == (
            spark_row["status"],
            spark_row["alert_count"],
        )


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


def first_write(table: Path) -> int:
    """The version of a table's first commit that adds data (the job's first commits may
    only create the table and set its properties)."""
    for entry in sorted((table / "_delta_log").glob("*.json")):
        if any("add" in json.loads(line) for line in entry.read_text().splitlines()):
            return int(entry.name.split(".")[0])
    raise AssertionError(f"no data in {table}")


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
        later = copy_alerts_up_to(source, copy / "alerts", first_write(source))
        printed: list[dict] = []

        def collect(until: int) -> None:
            while len(printed) < until:
                line = follow.wait_for_line(lambda line: line.startswith("{"), timeout=30)
                printed.append(json.loads(line))

        # What the commits up to the first write hold, then what each later commit adds.
        at_first = spark.read.format("delta").load(str(copy / "alerts")).count()
        collect(at_first)
        assert at_first > 0 and later
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
    # of the heavy Python imports, checked by what the interpreter actually loaded. Run
    # as `python -m` runs it: the module is sys.modules["__main__"] (alter_sys).
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['alerts', '--lake', {str(lake.root)!r}, '--since', '1h', '--site', 'x']\n"
        "try:\n"
        "    runpy.run_module('ops.alerts_cli', run_name='__main__', alter_sys=True)\n"
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


# --- incidents written with delta-rs -------------------------------------------------

# Firing: a critical and two warnings; resolved: one an hour ago, one three days ago.
INCIDENTS = [
    incident("hot", "sensor-0001", minutes=3),
    incident("warm", "sensor-0002", rule="sustained_high", started_minute=5, minutes=70),
    incident("quiet", "sensor-0003", rule="sensor_silent", started_minute=8, minutes=12),
    incident(
        "cooled", "sensor-0001", status="resolved", started_minute=30, minutes=4,
        updated_ago=timedelta(hours=1),
    ),
    incident(
        "old", "sensor-0004", status="resolved", minutes=1, updated_ago=timedelta(days=3)
    ),
]  # fmt: skip


@pytest.fixture
def incidents_lake(tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    for row in INCIDENTS:  # one commit, one data file each
        write_incidents(lake, [row])
    return lake


def incident_lines(lake: Path, *args: str | Path) -> list[dict]:
    done = alerts_cli("--lake", lake, "--incidents", "--json", "--limit", "0", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_incidents_firing_first_then_recently_resolved(incidents_lake: Path) -> None:
    shown = incident_lines(incidents_lake)

    # Firing: critical first, then the newest; then resolved ones of the last 24 hours.
    assert [i["incident_id"] for i in shown] == ["hot", "quiet", "warm", "cooled"]
    assert [i["status"] for i in shown] == ["firing"] * 3 + ["resolved"]
    assert {i: row for i, row in shown[0].items() if i not in {"created_at", "updated_at"}} == {
        "incident_id": "hot", "sensor_id": "sensor-0001", "site": "site of sensor-0001",
        "rule": "overheat_reading", "severity": "critical", "status": "firing",
        "started_at": "2026-01-01T00:00:00.000Z", "last_seen_at": "2026-01-01T00:03:00.000Z",
        "resolved_at": None, "peak_value": 52.5, "threshold": 45.0, "alert_count": 3,
        "duration_seconds": 180.0,
    }  # fmt: skip
    # Firing: up to the newest alert; resolved: up to the resolution.
    assert shown[2]["duration_seconds"] == 70 * 60
    assert shown[3]["duration_seconds"] == (4 + 1) * 60
    # An older resolved incident shows with a --since that reaches back to it.
    assert [i["incident_id"] for i in incident_lines(incidents_lake, "--since", "4d")][-1] == "old"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--sensor", "sensor-0001"], ["hot", "cooled"]),
        (["--rule", "sustained_high,sensor_silent"], ["quiet", "warm"]),
        (["--severity", "critical", "--since", "4d"], ["hot", "cooled", "old"]),
        (["--site", "site of sensor-0002"], ["warm"]),
        # Firing incidents always show: --since reaches only the resolved ones.
        (["--since", "10m"], ["hot", "quiet", "warm"]),
        (["--limit", "2"], ["hot", "quiet"]),
    ],
)
def test_incident_filters(incidents_lake: Path, args: list[str], expected: list[str]) -> None:
    done = alerts_cli("--lake", incidents_lake, "--incidents", "--json", *args)

    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["incident_id"] for line in done.stdout.splitlines()] == expected


def test_incidents_table_in_the_terminal(incidents_lake: Path) -> None:
    done = alerts_cli("--lake", incidents_lake)
    lines = done.stdout.splitlines()

    assert done.returncode == 0, done.stderr
    assert lines[0] == "Incidents: 3 firing, 1 resolved in the last 24h"
    assert lines[1].split() == [
        "STATUS", "SEVERITY", "RULE", "SENSOR", "SITE", "STARTED", "(UTC)", "DURATION", "PEAK",
        "THRESHOLD", "ALERTS",
    ]  # fmt: skip
    hot, quiet, warm, cooled = lines[2:6]
    assert hot.split()[:3] == ["FIRING", "CRITICAL", "overheat_reading"]
    assert "2026-01-01 00:00:00  3m " in hot and "52.5 °C    45.0 °C    3" in hot
    assert "1h10m" in warm and "38.2 °C" in warm
    assert "12m" in quiet and "420 s      300 s" in quiet
    assert cooled.split()[:2] == ["resolved", "CRITICAL"] and " 5m " in cooled
    # Columns line up: RULE starts at the same offset in every row.
    column = lines[1].index("RULE")
    assert all(
        line[column:].startswith(("overheat", "sustained", "sensor_")) for line in lines[2:6]
    )
    assert lines[6:] == ["", "Alerts: none"]  # the job created the alerts table, empty

    limited = alerts_cli("--lake", incidents_lake, "--incidents", "--limit", "1")
    assert len(limited.stdout.splitlines()) == 2
    assert "incidents: 3 firing, 1 resolved in the last 24h, 1 shown (--limit)" in limited.stderr


def test_incidents_outside_the_shown_range_are_not_read(incidents_lake: Path) -> None:
    """The file holding only the old resolved incident is skipped by its statistics:
    the command works with that file made unreadable."""
    table = DeltaTable(str(incidents_lake / "incidents"))
    for uri in table.file_uris():
        if pq.read_table(uri, columns=["incident_id"]).column(0).to_pylist() == ["old"]:
            Path(uri).write_bytes(b"not parquet")

    shown = incident_lines(incidents_lake)
    with_old = alerts_cli("--lake", incidents_lake, "--incidents", "--since", "4d")

    assert [i["incident_id"] for i in shown] == ["hot", "quiet", "warm", "cooled"]
    assert with_old.returncode != 0  # it reads the file now, which proves the skip above


def test_old_alerts_outside_since_are_not_read(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    create_tables(Lake(lake))
    now = datetime.now(UTC)

    def alert(alert_id: str, detected_at: datetime) -> dict:
        return {
            "alert_id": alert_id, "sensor_id": "sensor-0001", "site": "a", "severity": "critical",
            "rule": "overheat_reading", "window_start": datetime(2026, 1, 1, tzinfo=UTC),
            "window_end": datetime(2026, 1, 1, 0, 1, tzinfo=UTC), "observed_value": 50.0,
            "threshold": 45.0, "readings": 1, "detected_at": detected_at,
        }  # fmt: skip

    for row in (alert("old", now - timedelta(days=2)), alert("new", now)):
        write_deltalake(
            str(lake / "alerts"),
            pa.Table.from_pylist([row], arrow_schema(ALERTS_SCHEMA)),
            mode="append",
        )
    for uri in DeltaTable(str(lake / "alerts")).file_uris():
        if pq.read_table(uri, columns=["alert_id"]).column(0).to_pylist() == ["old"]:
            Path(uri).write_bytes(b"not parquet")

    recent = alerts_cli("--lake", lake, "--alerts", "--json", "--since", "1h")

    assert recent.returncode == 0, recent.stderr
    assert [json.loads(line)["alert_id"] for line in recent.stdout.splitlines()] == ["new"]


@pytest.mark.parametrize(
    "args",
    [[], ["--since", "1h"], ["--alerts", "--since", "1h", "--severity", "critical"],
     ["--json", "--since", "1h"], ["--incidents", "--since", "1h", "--rule", "sensor_silent"],
     ["--incidents", "--json", "--sensor", "x"]],
)  # fmt: skip
def test_empty_tables_are_a_plain_message_issue_14(tmp_path: Path, args: list[str]) -> None:
    """Issue 14: `scripts/alerts --since 1h` on an existing, empty alerts table crashed
    (ArrowNotImplementedError: Function 'and' has no kernel matching (null, bool))."""
    create_tables(Lake(tmp_path))

    done = alerts_cli("--lake", tmp_path, *args)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    if "--json" in args:
        assert done.stdout == ""
    elif not {"--alerts", "--incidents"} & set(args):
        assert done.stdout.splitlines()[0].startswith("Incidents: 0 firing, 0 resolved")
        assert done.stdout.splitlines()[-1] in ("Alerts: none", "Alerts: none match")


def test_an_empty_table_reads_as_no_rows_of_its_types(tmp_path: Path) -> None:
    create_tables(Lake(tmp_path))
    reader = LakeReader(tmp_path)
    where = AlertFilter(since=datetime.now(UTC), rules=("sensor_silent",), sites=("it's",))

    for chosen in (where, AlertFilter()):
        assert read_alerts(reader, chosen) == arrow_schema(ALERTS_SCHEMA).empty_table()
        assert read_incidents(reader, chosen, datetime.now(UTC)).num_rows == 0


def test_a_lake_without_incidents_table_shows_its_alerts(tmp_path: Path) -> None:
    """A lake written before incidents existed: a plain line, the alerts, status 0."""
    create_tables(Lake(tmp_path))
    shutil.rmtree(tmp_path / "incidents")

    both = alerts_cli("--lake", tmp_path)
    only = alerts_cli("--lake", tmp_path, "--incidents")

    assert both.returncode == 0 and only.returncode == 0
    assert both.stdout == "Alerts: none\n"
    assert both.stderr == f"alerts: no incidents table in {tmp_path} yet\n"
    assert (only.stdout, only.stderr.strip()) == (
        "",
        f"alerts: no incidents table in {tmp_path} yet",
    )


def test_follow_incidents_prints_each_opening_and_resolution(incidents_lake: Path) -> None:
    follow = Running(
        [ALERTS_CLI, "--lake", incidents_lake, "--follow", "--incidents", "--json",
         "--interval", "0.2"]
    )  # fmt: skip
    try:

        def next_incident() -> dict:
            return json.loads(follow.wait_for_line(lambda line: line.startswith("{"), 120))

        first = [next_incident()["incident_id"] for _ in range(4)]
        write_incidents(incidents_lake, [incident("new", "sensor-0009", rule="sensor_silent")])
        opened = next_incident()
        write_incidents(
            incidents_lake, [incident("warm", "sensor-0002", status="resolved", minutes=75)]
        )
        resolved = next_incident()
        follow.terminate()
        assert follow.finish(timeout=30) == 0
    finally:
        follow.kill()

    assert first == ["hot", "quiet", "warm", "cooled"]
    assert (opened["incident_id"], opened["status"]) == ("new", "firing")
    assert (resolved["incident_id"], resolved["status"]) == ("warm", "resolved")
    assert not [line for line in follow.lines if line.startswith("{")][6:]  # nothing twice


def test_values_show_in_their_rule_s_unit_from_the_rules_file() -> None:
    from contract.rules.parsing import read_rules
    from ops.alerts_cli import alert_table, incident_table

    units = read_rules(RULES_FILE).units()
    alert = {"rule": "battery_low", "observed_value": 9.5, "threshold": 15.0}
    incident = {"rule": "humidity_high", "peak_value": 88.25, "threshold": 80.0}
    observed = dict((h, cell) for h, _, cell in alert_table(units))["OBSERVED"]
    peak = dict((h, cell) for h, _, cell in incident_table(units))["PEAK"]

    assert observed(alert) == "9.5 % vs 15.0"
    assert peak(incident) == "88.2 %"
    # A rate's change per minute to the hundredth: its limit of 0.15 is not shown as 0.1.
    rising = {"rule": "temperature_rising", "observed_value": 0.3125, "threshold": 0.15,
              "peak_value": 0.3125}  # fmt: skip
    assert observed(rising) == "0.31 °C/min vs 0.15"
    assert peak(rising) == "0.31 °C/min"
    assert dict((h, c) for h, _, c in alert_table())["OBSERVED"](alert) == "9.5 °C vs 15.0"
