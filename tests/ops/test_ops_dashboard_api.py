"""The dashboard's JSON endpoints, served by a real uvicorn, against a lake written by the
real job and incidents tables written with delta-rs; and the empty state of a lake
without tables."""

from __future__ import annotations

import json
import math
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from jobs.writer.tables import create_tables
from lake.layout import Lake
from lake.reader import LakeReader
from ops.dashboard.queries import silence_url
from tests.support.ops_lake import (
    OpsLake,
    append_rows,
    break_files,
    dashboard,
    get_json,
    incident,
    ops_lake,
    write_incidents,
)

ALERTMANAGER = "http://alertmanager.example:9093"


@pytest.fixture(scope="module")
def lake(spark, kafka, tmp_path_factory) -> OpsLake:
    return ops_lake(spark, kafka, tmp_path_factory.mktemp("ops"))


@pytest.fixture(scope="module")
def api(lake: OpsLake) -> Iterator[str]:
    # A day counts as open: the test does not depend on how long ago the lake was written.
    with dashboard("--lake", lake.root, "--registry", lake.registry, "--open-minutes", 1440) as url:
        yield url


def epoch(ts) -> float:
    return ts.timestamp()


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def test_healthz(api: str, lake: OpsLake) -> None:
    assert get_json(api + "/healthz") == (
        200,
        {"status": "ok", "lake": str(lake.root), "lake_exists": True},
    )


def test_alerts_all_newest_first(api: str, lake: OpsLake) -> None:
    status, body = get_json(api + "/api/alerts?limit=5000")

    assert status == 200 and body["exists"] is True
    assert body["total"] == len(body["alerts"]) == len(lake.alerts)  # all of the last day
    assert body["since"] is not None
    assert {a["alert_id"] for a in body["alerts"]} == {a["alert_id"] for a in lake.alerts}
    detected = [a["detected_at"] for a in body["alerts"]]
    assert detected == sorted(detected, reverse=True)


def test_alerts_filters_and_limit(api: str, lake: OpsLake) -> None:
    critical = [a for a in lake.alerts if a["severity"] == "critical"]
    sensor = Counter(a["sensor_id"] for a in lake.alerts).most_common(1)[0][0]
    middle = sorted({a["detected_at"] for a in lake.alerts})[1]
    since = urllib.parse.quote(middle.isoformat())  # an aware instant: ...+00:00

    _, by_severity = get_json(api + "/api/alerts?severity=critical&limit=5000")
    _, by_sensor = get_json(api + f"/api/alerts?sensor={sensor}&rule=sustained_high,sensor_silent")
    _, by_since = get_json(api + f"/api/alerts?since={since}&limit=5000")
    _, limited = get_json(api + "/api/alerts?limit=3")

    assert {a["alert_id"] for a in by_severity["alerts"]} == {a["alert_id"] for a in critical}
    assert {a["alert_id"] for a in by_sensor["alerts"]} == {
        a["alert_id"]
        for a in lake.alerts
        if a["sensor_id"] == sensor and a["rule"] != "overheat_reading"
    }
    assert by_since["total"] == sum(a["detected_at"] >= middle for a in lake.alerts)
    assert (len(limited["alerts"]), limited["total"]) == (3, len(lake.alerts))


@pytest.mark.parametrize(
    ("query", "name"),
    [("severity=fatal", "severity"), ("since=soon", "since"), ("limit=0", "limit")],
)
def test_bad_parameters_are_400_naming_them(api: str, query: str, name: str) -> None:
    status, body = get_json(api + "/api/alerts?" + query)

    assert status == 400
    assert body["error"].startswith(name)


def test_summary_counts_by_severity(api: str, lake: OpsLake) -> None:
    counts = Counter(a["severity"] for a in lake.alerts)
    _, body = get_json(api + "/api/alerts/summary")

    assert body["exists"] is True
    assert body["total_hours"] == 24  # the lake was written minutes ago: all of it
    assert body["total"] == {"critical": counts["critical"], "warning": counts["warning"]}
    assert body["open"] == body["total"]  # all detected within the last day


def test_timeline_counts_every_alert_in_its_window_bucket(api: str, lake: OpsLake) -> None:
    _, body = get_json(api + "/api/alerts/timeline")
    step = body["bucket_seconds"]
    expected = Counter(
        (int(epoch(a["window_start"]) // step) * step, a["severity"]) for a in lake.alerts
    )

    assert body["exists"] is True
    newest = max(epoch(a["window_start"]) for a in lake.alerts)
    assert (body["hours"], body["since"]) == (24, iso(newest - 86_400))
    assert body["t"] == list(range(body["t"][0], body["t"][-1] + step, step))
    for i, t in enumerate(body["t"]):
        assert body["critical"][i] == expected[(t, "critical")]
        assert body["warning"][i] == expected[(t, "warning")]
    assert sum(body["critical"]) + sum(body["warning"]) == len(lake.alerts)


def test_sensors_are_those_with_statistics(api: str, lake: OpsLake) -> None:
    _, body = get_json(api + "/api/sensors")
    alerts = Counter(a["sensor_id"] for a in lake.alerts)

    assert {s["sensor_id"] for s in body["sensors"]} == {r["sensor_id"] for r in lake.stats_1m}
    assert all(s["alerts"] == alerts[s["sensor_id"]] for s in body["sensors"])
    counts = [s["alerts"] for s in body["sensors"]]
    assert counts == sorted(counts, reverse=True)


def test_sensor_stats_and_thresholds(api: str, lake: OpsLake) -> None:
    with_stats = {r["sensor_id"] for r in lake.stats_1m}
    own = next(s for s in sorted(with_stats) if lake.max_temp_c.get(s) is not None)
    default = next(s for s in sorted(with_stats) if lake.max_temp_c.get(s) is None)

    _, mine = get_json(api + f"/api/sensors/{own}/stats")
    _, other = get_json(api + f"/api/sensors/{default}/stats")

    rows = sorted(
        (r for r in lake.stats_1m if r["sensor_id"] == own), key=lambda r: r["window_start"]
    )
    assert mine["t"] == [epoch(r["window_start"]) for r in rows]
    assert mine["avg"] == [r["avg_temperature_c"] for r in rows]
    assert mine["max"] == [r["max_temperature_c"] for r in rows]
    assert mine["thresholds"] == {
        "critical": lake.max_temp_c[own],
        "warning": 35.0,
        "critical_source": "overheat_reading: registry max_temp_c",
    }
    assert other["thresholds"]["critical"] == 45.0
    assert other["thresholds"]["critical_source"] == "overheat_reading: rule"


def test_pipeline_health_per_query(api: str, lake: OpsLake) -> None:
    _, body = get_json(api + "/api/pipeline")
    batches = Counter(m["query"] for m in lake.metrics)

    assert {q["query"]: q["batches"] for q in body["queries"]} == dict(batches)
    for q in body["queries"]:
        rows = [m for m in lake.metrics if m["query"] == q["query"]]
        last = max(rows, key=lambda m: m["timestamp"])
        assert q["batch_duration_ms"] == last["batch_duration_ms"]
        assert q["rows_dropped_by_watermark"] == sum(m["rows_dropped_by_watermark"] for m in rows)
        assert len(body["series"][q["query"]]["t"]) == len(rows)
    ingest = next(q for q in body["queries"] if q["query"] == "ingest")
    assert ingest["watermark"] is None and ingest["watermark_lag_seconds"] is None
    windowed = next(q for q in body["queries"] if q["query"] == "windows")
    assert windowed["watermark"].startswith("2026-01-01T")


def test_page_and_vendored_library_are_served(api: str) -> None:
    import urllib.request

    with urllib.request.urlopen(api + "/") as page:
        html = page.read().decode()
    with urllib.request.urlopen(api + "/static/vendor/uplot/uPlot.iife.min.js") as lib:
        script = lib.read()

    assert "/static/vendor/uplot/uPlot.iife.min.js" in html
    assert script.startswith(b"/*! https://github.com/leeoniya/uPlot")


@pytest.mark.parametrize("create_folder", [True, False])
def test_a_lake_without_tables_is_an_empty_state(tmp_path: Path, create_folder: bool) -> None:
    lake = tmp_path / "lake"
    if create_folder:
        lake.mkdir()
    with dashboard("--lake", lake) as url:
        health = get_json(url + "/healthz")
        bodies = {
            path: get_json(url + path)
            for path in [
                "/api/incidents",
                "/api/alerts",
                "/api/alerts/summary",
                "/api/alerts/timeline",
                "/api/sensors",
                "/api/sensors/sensor-0001/stats",
                "/api/pipeline",
            ]
        }

    assert health == (200, {"status": "ok", "lake": str(lake), "lake_exists": create_folder})
    assert all(status == 200 and body["exists"] is False for status, body in bodies.values())
    assert bodies["/api/incidents"][1]["open"]["total"] == 0
    assert bodies["/api/incidents"][1]["incidents"] == []
    assert bodies["/api/alerts"][1]["alerts"] == []
    assert bodies["/api/alerts/summary"][1]["total"] == {"critical": 0, "warning": 0}
    assert bodies["/api/alerts/timeline"][1]["t"] == []
    assert bodies["/api/sensors"][1]["sensors"] == []
    assert bodies["/api/sensors/sensor-0001/stats"][1]["t"] == []
    assert bodies["/api/pipeline"][1]["queries"] == []


def test_bad_settings_exit_2_naming_the_flag(tmp_path: Path) -> None:
    import subprocess
    import sys

    from conf.paths import PROJECT_ROOT

    def start(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ops.dashboard", "--lake", str(tmp_path), *args],
            capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT,
        )  # fmt: skip

    bad_registry = tmp_path / "fleet.jsonl"
    bad_registry.write_text('{"sensor_id": "s-1", "max_temp_c": 30}\nnot json\n')
    port = start("--port", "70000")
    registry = start("--registry", str(bad_registry))

    assert port.returncode == 2 and "--port (SENSORWATCH_DASHBOARD_PORT)" in port.stderr
    assert registry.returncode == 2 and f"registry {bad_registry} line 2" in registry.stderr


def test_registry_appearing_later_is_picked_up(tmp_path: Path) -> None:
    registry = tmp_path / "fleet.jsonl"
    with dashboard("--lake", tmp_path, "--registry", registry) as url:
        before = get_json(url + "/api/sensors/s-1/stats")[1]["thresholds"]
        registry.write_text('{"sensor_id": "s-1", "max_temp_c": 30.5}\n')
        after = get_json(url + "/api/sensors/s-1/stats")[1]["thresholds"]

    assert (before["critical"], before["critical_source"]) == (45.0, "overheat_reading: rule")
    assert (after["critical"], after["critical_source"]) == (
        30.5, "overheat_reading: registry max_temp_c",
    )  # fmt: skip


def test_incidents_of_the_jobs_lake(api: str, lake: OpsLake) -> None:
    # Whatever the job wrote (all of it changed minutes ago): counted and listed.
    _, body = get_json(api + "/api/incidents?limit=5000")
    firing = [i for i in lake.incidents if i["status"] == "firing"]

    assert body["exists"] is True
    assert body["open"]["total"] == len(firing)
    assert body["total"] == len(body["incidents"]) == len(lake.incidents)
    assert {i["incident_id"] for i in body["incidents"]} == {
        i["incident_id"] for i in lake.incidents
    }


@pytest.fixture(scope="module")
def incidents_api(tmp_path_factory) -> Iterator[str]:
    lake = tmp_path_factory.mktemp("incidents") / "lake"
    write_incidents(
        lake,
        [
            incident("hot", "sensor-0001", minutes=3),
            incident("hot2", "sensor-0002", started_minute=9, minutes=0),
            incident("warm", "sensor-0003", rule="sustained_high", started_minute=5, minutes=70),
            incident("quiet", "sensor-0004", rule="sensor_silent", started_minute=1, minutes=12),
            incident(
                "cooled", "sensor-0001", status="resolved", minutes=4,
                updated_ago=timedelta(hours=2),
            ),
            incident(
                "old", "sensor-0005", status="resolved", minutes=1,
                updated_ago=timedelta(days=2),
            ),
        ],
    )  # fmt: skip
    with dashboard("--lake", lake, "--alertmanager-url", ALERTMANAGER + "/") as url:
        yield url


def test_incidents_open_first_with_counts_and_silence_links(incidents_api: str) -> None:
    status, body = get_json(incidents_api + "/api/incidents")

    assert status == 200 and body["exists"] is True
    assert body["alertmanager_url"] == ALERTMANAGER  # without the trailing slash
    assert body["open"] == {
        "total": 4,
        "by_severity": {"critical": 2, "warning": 2},
        "by_rule": {"overheat_reading": 2, "sustained_high": 1, "sensor_silent": 1},
    }
    assert (body["resolved"], body["total"]) == (1, 5)  # "old" is older than a day
    ids = [i["incident_id"] for i in body["incidents"]]
    assert ids == ["hot2", "hot", "warm", "quiet", "cooled"]
    hot = body["incidents"][1]
    assert (hot["status"], hot["duration_seconds"], hot["peak_value"]) == ("firing", 180.0, 52.5)
    assert hot["started_at"] == "2026-01-01T00:00:00.000Z" and hot["resolved_at"] is None
    assert body["incidents"][-1]["duration_seconds"] == 5 * 60  # to resolved_at
    assert hot["silence_url"] == (
        ALERTMANAGER + "/#/silences/new?filter="
        "%7Balertname%3D%22overheat_reading%22%2Csensor_id%3D%22sensor-0001%22%7D"
    )
    assert body["incidents"][2]["silence_url"].endswith(
        urllib.parse.quote('{alertname="sustained_high",sensor_id="sensor-0003"}', safe="")
    )


def test_incidents_filters_and_limit(incidents_api: str) -> None:
    def ids(query: str) -> list[str]:
        status, body = get_json(incidents_api + "/api/incidents?" + query)
        assert status == 200, body
        return [i["incident_id"] for i in body["incidents"]]

    assert ids("sensor=sensor-0001") == ["hot", "cooled"]
    assert ids("severity=warning") == ["warm", "quiet"]
    assert ids("rule=overheat_reading&since=3d") == ["hot2", "hot", "cooled", "old"]
    assert ids("since=1h") == ["hot2", "hot", "warm", "quiet"]  # firing ones always show
    assert ids("limit=2") == ["hot2", "hot"]
    assert get_json(incidents_api + "/api/incidents?rule=hot")[0] == 400
    assert get_json(incidents_api + "/api/incidents?since=soon")[0] == 400


def test_config_names_alertmanager(incidents_api: str) -> None:
    assert get_json(incidents_api + "/api/config")[1]["alertmanager_url"] == ALERTMANAGER


def test_an_empty_incidents_table_is_no_open_incident(tmp_path: Path) -> None:
    create_tables(Lake(tmp_path))
    with dashboard("--lake", tmp_path) as url:
        status, body = get_json(url + "/api/incidents")

    assert status == 200
    assert (body["exists"], body["open"]["total"], body["incidents"]) == (True, 0, [])
    assert body["alertmanager_url"] == "http://127.0.0.1:9093"  # the default


@pytest.mark.parametrize(
    ("rule", "sensor", "matchers"),
    [
        ("sensor_silent", "sensor-0001", '{alertname="sensor_silent",sensor_id="sensor-0001"}'),
        (
            "overheat_reading",
            'odd "id" \\',
            '{alertname="overheat_reading",sensor_id="odd \\"id\\" \\\\"}',
        ),
    ],
)
def test_silence_links_quote_their_matchers(rule: str, sensor: str, matchers: str) -> None:
    url = silence_url("http://am:9093/", rule, sensor)

    assert url.startswith("http://am:9093/#/silences/new?filter=")
    assert urllib.parse.unquote(url.partition("filter=")[2]) == matchers


def test_the_page_reads_only_the_range_it_shows(tmp_path: Path) -> None:
    """docs/architecture.md#running-for-weeks: the endpoints read the range they show,
    whatever the table's age. The files of older rows are made unreadable: every endpoint
    still answers, from the recent rows only, so it never opened them."""
    lake, now = tmp_path / "lake", datetime.now(UTC)
    # Event time of a replayed topic, far from the clock: ranges end at the newest data.
    newest = datetime(2026, 1, 1, 12, tzinfo=UTC)
    old = newest - timedelta(days=3)

    def alert(alert_id: str, sensor_id: str, window_start: datetime, detected_at: datetime):
        return {
            "alert_id": alert_id, "sensor_id": sensor_id, "site": "it's", "severity": "critical",
            "rule": "overheat_reading", "window_start": window_start,
            "window_end": window_start + timedelta(minutes=1), "observed_value": 50.0,
            "threshold": 45.0, "readings": 3, "detected_at": detected_at,
        }  # fmt: skip

    def window(sensor_id: str, start: datetime) -> dict:
        return {
            "sensor_id": sensor_id, "window_start": start,
            "window_end": start + timedelta(minutes=1), "readings": 10,
            "avg_temperature_c": 20.0, "min_temperature_c": 19.0, "max_temperature_c": 21.0,
            "avg_humidity_pct": 40.0,
        }  # fmt: skip

    def batch(batch_id: int, at: datetime) -> dict:
        return {
            "query": "ingest", "query_id": "q", "batch_id": batch_id, "timestamp": at,
            "input_rows": 10, "input_rows_per_second": 5.0, "processed_rows_per_second": 9.0,
            "batch_duration_ms": 700, "watermark": None, "rows_dropped_by_watermark": batch_id,
            "state_rows": 0, "output_rows": 10, "quarantined_rows": 0,
        }  # fmt: skip

    append_rows(
        lake,
        "alerts",
        [
            alert("old", "gone", old, now - timedelta(days=3)),
            alert("new", "s-1", newest - timedelta(hours=2), now - timedelta(minutes=1)),
        ],
    )
    append_rows(
        lake,
        "sensor_stats_1m",
        [window("gone", old)] + [window("s-1", newest - timedelta(hours=h)) for h in (7, 1, 0)],
    )
    append_rows(
        lake,
        "pipeline_metrics",
        [batch(1, now - timedelta(hours=3)), batch(2, now - timedelta(minutes=30)),
         batch(3, now - timedelta(minutes=1))],
    )  # fmt: skip
    assert break_files(lake / "alerts", "alert_id", {"old"}) == 1
    assert break_files(lake / "sensor_stats_1m", "sensor_id", {"gone"}) == 1
    assert break_files(lake / "pipeline_metrics", "batch_id", {1}) == 1

    with dashboard("--lake", lake) as url:
        bodies = {
            path: get_json(url + path)
            for path in [
                "/api/alerts",
                "/api/alerts/summary",
                "/api/alerts/timeline",
                "/api/sensors",
                "/api/sensors/s-1/stats",
                "/api/sensors/gone/stats",
                "/api/pipeline",
            ]
        }
    assert all(status == 200 for status, _ in bodies.values()), bodies
    body = {path: b for path, (_, b) in bodies.items()}

    assert [a["alert_id"] for a in body["/api/alerts"]["alerts"]] == ["new"]
    summary = body["/api/alerts/summary"]
    assert (summary["total"], summary["total_hours"]) == ({"critical": 1, "warning": 0}, 24)
    timeline = body["/api/alerts/timeline"]
    assert timeline["since"] == "2025-12-31T10:00:00.000Z"  # a day before the newest window
    assert sum(timeline["critical"]) == 1
    assert body["/api/sensors"]["sensors"] == [{"sensor_id": "s-1", "alerts": 1}]
    assert body["/api/sensors"]["since"] == "2025-12-31T12:00:00.000Z"
    stats = body["/api/sensors/s-1/stats"]
    assert stats["t"] == [(newest - timedelta(hours=h)).timestamp() for h in (1, 0)]  # 6 h
    assert stats["since"] == "2026-01-01T06:00:00.000Z"
    assert body["/api/sensors/gone/stats"]["t"] == []  # none in the sensor list's range
    (ingest,) = body["/api/pipeline"]["queries"]
    assert (ingest["batches"], ingest["batch_id"], ingest["rows_dropped_by_watermark"]) == (2, 3, 5)
    assert body["/api/pipeline"]["minutes"] == 60
    with pytest.raises(pa.ArrowInvalid):  # the broken files really are unreadable
        LakeReader(lake).read("alerts")


def baseline(sensor_id: str, writer: str, batch_id: int, mean: float, var: float,
             **columns: Any) -> dict[str, Any]:  # fmt: skip
    """A ``_baselines`` row of temperature_off_normal (conf/rules.toml: a 1-hour horizon),
    learned with the rule's present field and horizon unless ``params`` says otherwise."""
    return {
        "sensor_id": sensor_id, "rule": "temperature_off_normal",
        "params": json.dumps(["temperature_c", 3600.0, 900.0]), "writer": writer,
        "batch_id": batch_id, "mean": mean, "var": var, "learned_s": 2400.0, "taught": 40,
        "last_pane": datetime(2026, 1, 1, 1, batch_id, tzinfo=UTC), "breach_since": None,
        **columns,
    }  # fmt: skip


BREACH = datetime(2026, 1, 1, 1, 4, tzinfo=UTC)


def test_a_sensor_s_band_is_its_newest_baseline_of_the_current_writer(tmp_path: Path) -> None:
    """The band the temperature chart draws: of temperature_off_normal (3 deviations, at
    least 0.8 °C), the newest batch's baseline of the windows query's current checkpoint
    (its writer id: windows-<the checkpoint's id>) among those learned with the rule's
    present horizon; without that checkpoint, the baseline of the newest pane."""
    lake = tmp_path / "lake"
    append_rows(lake, "_baselines", [
        baseline("s-1", "windows-old", 9, 99.0, 1.0),  # an earlier checkpoint's
        baseline("s-1", "windows-now", 3, 20.0, 0.25),  # an earlier batch's
        baseline("s-1", "windows-now", 5, 21.0, 0.09, breach_since=BREACH),
        baseline("s-1", "windows-now", 4, 50.0, 1.0,  # an older one, over another horizon
                 params=json.dumps(["temperature_c", 86400.0, 900.0])),
        baseline("s-2", "windows-now", 2, -19.5, 4.0, learned_s=600.0, taught=5),
        # The newest learned over another horizon (the rule edited since): as for the job,
        # the rule has learned nothing yet, whatever older rows hold.
        baseline("s-4", "windows-now", 3, 20.0, 0.25),
        baseline("s-4", "windows-now", 6, 50.0, 1.0,
                 params=json.dumps(["temperature_c", 86400.0, 900.0])),
    ])  # fmt: skip
    checkpoint = lake / "_checkpoints" / "windows"
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id":"now"}\n', encoding="utf-8")

    with dashboard("--lake", lake) as url:
        _, one = get_json(url + "/api/sensors/s-1/stats")
        _, two = get_json(url + "/api/sensors/s-2/stats")
        _, none = get_json(url + "/api/sensors/s-3/stats")
        _, edited = get_json(url + "/api/sensors/s-4/stats")
        (checkpoint / "metadata").unlink()
        _, no_checkpoint = get_json(url + "/api/sensors/s-1/stats")

    rule = {"rule": "temperature_off_normal", "direction": "above", "deviations": 3.0,
            "min_sd": 0.8}  # fmt: skip
    # sd 0.3 is under min_sd: the band is 3 x 0.8 either side; warm after 30 minutes.
    assert one["baselines"] == [{
        **rule, "mean": 21.0, "sd": pytest.approx(0.3), "low": pytest.approx(18.6),
        "high": pytest.approx(23.4), "warm": True, "taught": 40,
        "last_pane": "2026-01-01T01:05:00.000Z", "breach_since": "2026-01-01T01:04:00.000Z",
    }]  # fmt: skip
    assert two["baselines"] == [{
        **rule, "mean": -19.5, "sd": 2.0, "low": -25.5, "high": -13.5, "warm": False,
        "taught": 5, "last_pane": "2026-01-01T01:02:00.000Z", "breach_since": None,
    }]  # fmt: skip
    assert none["baselines"] == [{
        **rule, "mean": None, "sd": None, "low": None, "high": None, "warm": False,
        "taught": 0, "last_pane": None, "breach_since": None,
    }]  # fmt: skip
    assert edited["baselines"] == none["baselines"]
    assert no_checkpoint["baselines"][0]["mean"] == 99.0  # the newest pane: 01:09


def test_a_sensor_s_band_in_the_job_s_lake_is_its_newest_baseline(
    spark, api: str, lake: OpsLake
) -> None:
    """In the lake the job wrote: each sensor's band is its newest row of _baselines by
    the job's windows writer (read with Spark), mean -/+ 3 x max(sd, 0.8)."""
    writer = f"windows-{Lake(str(lake.root)).checkpoint_id('windows')}"
    rows = spark.read.format("delta").load(str(lake.root / "_baselines")).collect()
    newest: dict[str, Any] = {}
    for row in sorted(rows, key=lambda r: r.batch_id):
        if row.writer == writer:
            newest[row.sensor_id] = row
    assert {r.writer for r in rows} == {writer} and len(newest) == len(lake.max_temp_c)

    for sensor_id in sorted(newest)[:3]:
        _, stats = get_json(api + f"/api/sensors/{sensor_id}/stats")
        row = newest[sensor_id]
        width = 3.0 * max(math.sqrt(row.var), 0.8)
        (band,) = stats["baselines"]
        assert (band["mean"], band["low"], band["high"]) == pytest.approx(
            (row.mean, row.mean - width, row.mean + width)
        )
        assert band["taught"] == row.taught and band["warm"] is False  # 12 minutes learned
