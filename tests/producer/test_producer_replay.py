"""python -m producer replay: recordings of real sensors as readings (producer/replay.py).

The mapping (columns, times, zones, speed, bad rows) without Kafka, then the command
against the real broker: every row of a recording once in the topic, bad ones verbatim,
and the manifest accounting for each."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from conf.settings.base import SettingsError, load_settings
from conf.settings.replay import ReplaySettings
from local_stack.server import free_port
from producer.kafka_sender import KafkaSender
from producer.replay import (
    COLUMN_COUNT,
    INVALID_TIME,
    INVALID_VALUE,
    MISSING_COLUMN,
    NOT_AN_OBJECT,
    NOT_JSON,
    NOT_UTF8,
    Layout,
    Replay,
    ReplayError,
    ReplayMessage,
    merge,
    parse_time,
    read_rows,
    recording_format,
    time_zone,
)
from producer.replay_cli import layouts
from tests.support.kafka_io import consume_all
from tests.support.producer_run import read_jsonl, run_producer
from tests.support.spec_event import violations

NAB = Path(__file__).parents[2] / "bench" / "data" / "nab"


def epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def replayed(
    paths: list[Path], layout: Layout | list[Layout], **replay: object
) -> list[ReplayMessage]:
    plans = layout if isinstance(layout, list) else [layout] * len(paths)
    rows = merge([read_rows(p, plan) for p, plan in zip(paths, plans, strict=True)])
    return list(Replay(**replay).messages(rows))  # type: ignore[arg-type]


ONE = Layout((("value", "machine-1"),))


# -- times ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "time_format", "zone", "expected"),
    [
        ("2013-12-02 21:15:00", "iso", "UTC", "2013-12-02T21:15:00+00:00"),
        ("2013-12-02T21:15:00.250", "iso", "UTC", "2013-12-02T21:15:00.250+00:00"),
        ("2013-12-02T21:15:00Z", "iso", "Europe/Berlin", "2013-12-02T21:15:00+00:00"),
        ("2013-12-02T22:15:00+01:00", "iso", "America/New_York", "2013-12-02T21:15:00+00:00"),
        # A naive time is in --time-zone: winter and summer time.
        ("2013-12-02 22:15:00", "iso", "Europe/Berlin", "2013-12-02T21:15:00+00:00"),
        ("2014-07-02 23:15:00", "iso", "Europe/Berlin", "2014-07-02T21:15:00+00:00"),
        # The hour that occurs twice (end of summer time): the first.
        ("2014-10-26 02:30:00", "iso", "Europe/Berlin", "2014-10-26T00:30:00+00:00"),
        ("1386018900", "epoch_s", "Europe/Berlin", "2013-12-02T21:15:00+00:00"),
        ("1386018900500", "epoch_ms", "UTC", "2013-12-02T21:15:00.500+00:00"),
        ("02/12/2013 22:15", "%d/%m/%Y %H:%M", "Europe/Berlin", "2013-12-02T21:15:00+00:00"),
    ],
)  # fmt: skip
def test_times_are_utc_and_a_naive_time_is_in_the_time_zone(
    text: str, time_format: str, zone: str, expected: str
) -> None:
    assert parse_time(text, time_format, time_zone(zone)) == epoch(expected)


@pytest.mark.parametrize(
    ("text", "time_format"),
    [("", "iso"), ("yesterday", "iso"), ("2013-13-01 00:00", "iso"), ("nan", "epoch_s"),
     (None, "iso"), (True, "epoch_s"), ("2013-12-02", "%d/%m/%Y"), ("1e20", "epoch_s"),
     ("0999-12-31T23:59:59Z", "iso"), ("-1e15", "epoch_ms")],
)  # fmt: skip
def test_an_unreadable_time_raises(text: object, time_format: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text, time_format)


# -- one sensor per file -------------------------------------------------------------


def test_a_recording_becomes_readings_with_its_times_and_values(tmp_path) -> None:
    path = write(
        tmp_path / "plant.csv",
        "timestamp,value\n2013-12-02 21:15:00,73.96732207\n2013-12-02 21:20:00,74.5\n",
    )

    messages = replayed([path], ONE)

    events = [json.loads(m.value) for m in messages]
    assert [violations(m.value) for m in messages] == [[], []]
    assert [(e["sensor_id"], e["event_time"], e["temperature_c"], e["seq"]) for e in events] == [
        ("machine-1", "2013-12-02T21:15:00.000Z", 73.96732207, 1),
        ("machine-1", "2013-12-02T21:20:00.000Z", 74.5, 2),
    ]
    assert [(e["humidity_pct"], e["battery_pct"]) for e in events] == [(50.0, 100.0)] * 2
    assert [m.key for m in messages] == ["machine-1"] * 2
    assert [m.kind for m in messages] == ["normal"] * 2
    assert [m.detail for m in messages] == [
        {"file": "plant.csv", "line": 2},
        {"file": "plant.csv", "line": 3},
    ]
    # Deterministic ids: the same on a second replay, one per line.
    assert [e["event_id"] for e in events] == [m.event_id for m in replayed([path], ONE)]
    assert len({e["event_id"] for e in events}) == 2


def test_bad_rows_are_sent_as_they_are_once_and_nothing_is_dropped(tmp_path) -> None:
    lines = [
        b"timestamp,value",
        b"2013-12-02 21:15:00,70.5",
        b"not a time,71.0",  # 3
        b"2013-12-02 21:25:00,",  # 4: no value
        b"2013-12-02 21:30:00,abc",  # 5
        b"2013-12-02 21:35:00,72.0,extra",  # 6: a column too many
        b"",  # 7: blank, not a row
        b"2013-12-02 21:40:00,nan",  # 8
        b"2013-12-02 21:45:00,\xff\xfe",  # 9: not UTF-8
        b"2013-12-02 21:50:00,73.25\r",  # 10: CRLF line end
        b"2013-12-02 21:55:00,200",  # 11: beyond the event's range
    ]
    path = write(tmp_path / "bad.csv", b"\n".join(lines) + b"\n")

    messages = replayed([path], ONE)

    assert [(m.detail or {})["line"] for m in messages] == [2, 3, 4, 5, 6, 8, 9, 10, 11]
    raw = [m for m in messages if m.event_id is None]
    assert [m.value for m in raw] == [
        "not a time,71.0",
        "2013-12-02 21:25:00,",
        "2013-12-02 21:30:00,abc",
        "2013-12-02 21:35:00,72.0,extra",
        "2013-12-02 21:40:00,nan",
        b"2013-12-02 21:45:00,\xff\xfe",
    ]
    assert [(m.detail or {})["reason"] for m in raw] == [
        INVALID_TIME, f"{INVALID_VALUE}:value", f"{INVALID_VALUE}:value",
        COLUMN_COUNT, f"{INVALID_VALUE}:value", NOT_UTF8,
    ]  # fmt: skip
    assert {m.kind for m in raw} == {"malformed"} and {m.key for m in raw} == {"machine-1"}
    # A row whose time was read keeps it in the manifest; the others have none.
    assert [m.event_time for m in raw[:3]] == [None, "2013-12-02T21:25:00.000Z",
                                              "2013-12-02T21:30:00.000Z"]  # fmt: skip
    good = [json.loads(m.value) for m in messages if m.event_id is not None]
    assert [(e["temperature_c"], e["seq"]) for e in good] == [(70.5, 1), (73.25, 8), (200.0, 9)]
    # Out of range: a reading still (the job quarantines it as out_of_range), counted malformed.
    assert messages[-1].kind == "malformed"
    reason = "out_of_range:temperature_c"
    assert messages[-1].detail == {"file": "bad.csv", "line": 11, "reason": reason}


def test_the_values_may_be_humidity_and_the_other_fields_are_the_constants(tmp_path) -> None:
    path = write(tmp_path / "room.csv", "time,rh\n2026-01-01T00:00:00Z,41.5\n")
    layout = Layout((("rh", "room-7"),), time_column="time")

    (message,) = replayed(
        [path], layout, value_field="humidity_pct",
        fill={"temperature_c": 21.0, "humidity_pct": 50.0, "battery_pct": 80.0},
    )  # fmt: skip

    event = json.loads(message.value)
    numbers = (event["temperature_c"], event["humidity_pct"], event["battery_pct"])
    assert numbers == (21.0, 41.5, 80.0)
    assert (message.temperature_c, message.humidity_pct) == (21.0, 41.5)


def test_a_header_without_the_columns_is_refused_before_anything_is_sent(tmp_path) -> None:
    path = write(tmp_path / "x.csv", "when,temp\n2026-01-01 00:00:00,1\n")

    header = r"no column 'timestamp', 'value' in its header \(when, temp\)"
    with pytest.raises(ReplayError, match=header):
        list(read_rows(path, ONE))


# -- one sensor per column, JSON lines, several files -------------------------------


def test_one_sensor_per_column_and_a_bad_cell_sends_the_line_once(tmp_path) -> None:
    path = write(
        tmp_path / "hall.csv",
        "timestamp,north,south\n"
        "2026-01-01 00:00:00,20.5,21.5\n"
        "2026-01-01 00:01:00,oops,21.75\n"
        "2026-01-01 00:02:00,x,y\n"
        "never,1,2\n"
        "2026-01-01 00:04:00,22.0,23.0\n",
    )
    layout = Layout((("north", "n-1"), ("south", "s-1")))

    messages = replayed([path], layout)

    assert [(m.key, m.event_id is None, (m.detail or {})["line"]) for m in messages] == [
        ("n-1", False, 2), ("s-1", False, 2),
        ("s-1", False, 3), ("n-1", True, 3),  # the good cell, then the line under north's id
        ("n-1", True, 4),  # both bad: the line once, under the first bad column's sensor
        ("n-1", True, 5),  # no time: the line once
        ("n-1", False, 6), ("s-1", False, 6),
    ]  # fmt: skip
    assert [m.value for m in messages if m.event_id is None] == [
        "2026-01-01 00:01:00,oops,21.75", "2026-01-01 00:02:00,x,y", "never,1,2",
    ]  # fmt: skip
    # seq counts each sensor's rows: the rows it has no reading in leave gaps.
    seqs = [(json.loads(m.value)["sensor_id"], json.loads(m.value)["seq"])
            for m in messages if m.event_id is not None]  # fmt: skip
    assert seqs == [("n-1", 1), ("s-1", 1), ("s-1", 2), ("n-1", 5), ("s-1", 5)]
    assert len({m.event_id for m in messages if m.event_id}) == 5


def test_json_lines_rows_and_their_bad_lines(tmp_path) -> None:
    path = write(
        tmp_path / "dev.jsonl",
        '{"ts": 1767225600000, "t": 19.5}\n'
        "{not json\n"
        "[1, 2]\n"
        '{"t": 20.0}\n'
        '{"ts": 1767225660000, "t": null}\n'
        '{"ts": "1767225720000", "t": "20.25"}\n',
    )
    layout = Layout((("t", "dev-1"),), time_column="ts", time_format="epoch_ms", format="jsonl")

    messages = replayed([path], layout)

    assert recording_format(path) == "jsonl"
    assert [(m.detail or {}).get("reason") for m in messages] == [
        None, NOT_JSON, NOT_AN_OBJECT, f"{MISSING_COLUMN}:ts", f"{INVALID_VALUE}:t", None,
    ]  # fmt: skip
    good = [json.loads(m.value) for m in messages if m.event_id is not None]
    assert [(e["event_time"], e["temperature_c"]) for e in good] == [
        ("2026-01-01T00:00:00.000Z", 19.5), ("2026-01-01T00:02:00.000Z", 20.25),
    ]  # fmt: skip
    assert [m.value for m in messages][1:5] == [
        "{not json", "[1, 2]", '{"t": 20.0}', '{"ts": 1767225660000, "t": null}',
    ]  # fmt: skip


def test_several_files_interleave_by_time_each_in_its_own_order(tmp_path) -> None:
    a = write(tmp_path / "a.csv", "timestamp,value\n00:00,1\n00:10,2\n00:05,3\n00:20,4\n")
    b = write(tmp_path / "b.csv", "timestamp,value\n00:01,5\n00:12,6\n00:15,7\n")
    for path in (a, b):  # times of one day
        path.write_text(path.read_text().replace("\n00:", "\n2026-01-01 00:"))

    messages = replayed([a, b], [Layout((("value", "a"),)), Layout((("value", "b"),))])

    assert [json.loads(m.value)["temperature_c"] for m in messages] == [1, 5, 2, 3, 6, 7, 4]


def test_sensor_ids_default_to_the_file_names_and_must_fit_the_files(tmp_path) -> None:
    files = [tmp_path / "boiler-1.csv", tmp_path / "boiler-2.csv"]

    def ids(**flags: str) -> list[tuple[str, ...]]:
        plans = layouts(load_settings(ReplaySettings, flags), files)
        return [tuple(sensor for _, sensor in plan.sensors) for plan in plans]

    assert ids() == [("boiler-1",), ("boiler-2",)]
    assert ids(sensor_id="b") == [("b",), ("b",)]
    assert ids(sensor_id="x,y") == [("x",), ("y",)]
    assert ids(sensor_columns="left,right=r") == [("left", "r")] * 2
    with pytest.raises(ReplayError, match="3 ids for 2 files"):
        ids(sensor_id="x,y,z")
    with pytest.raises(SettingsError, match="exclude each other"):
        ids(sensor_id="x", sensor_columns="left")


# -- clock: shift and speed ----------------------------------------------------------


def test_start_time_shifts_every_time_and_keeps_the_ids(tmp_path) -> None:
    text = "timestamp,value\n2013-12-02 21:15:00,1\n2013-12-02 21:20:30.5,2\n"
    path = write(tmp_path / "p.csv", text)
    start = epoch("2026-06-01T12:00:00+00:00")

    shifted = replayed([path], ONE, start_time=start)

    times = [m.event_time for m in shifted]
    assert times == ["2026-06-01T12:00:00.000Z", "2026-06-01T12:05:30.500Z"]
    assert [m.event_id for m in shifted] == [m.event_id for m in replayed([path], ONE)]


def test_speed_compresses_the_recorded_times_into_when_each_is_due(tmp_path) -> None:
    path = write(
        tmp_path / "p.csv",
        "timestamp,value\n"
        "2026-01-01 00:00:00,1\n"
        "2026-01-01 00:10:00,2\n"
        "bad,3\n"
        "2026-01-01 00:05:00,4\n"  # steps back: sent where it stands, at once
        "2026-01-01 01:00:00,5\n",
    )

    assert [m.due for m in replayed([path], ONE, speed=600)] == [0.0, 1.0, 1.0, 1.0, 6.0]
    assert [m.due for m in replayed([path], ONE, speed=1)] == [0.0, 600.0, 600.0, 600.0, 3600.0]
    assert {m.due for m in replayed([path], ONE, speed=0)} == {0.0}


def test_the_sender_waits_for_each_message_s_due_time_within_the_duration() -> None:
    # Nothing listens: the messages stay queued, what counts is which were produced.
    sender = KafkaSender(
        f"127.0.0.1:{free_port()}", "t", log=io.StringIO(),
        client_config={"delivery.timeout.ms": 1000, "log_level": 0},
    )  # fmt: skip
    due = [0.0, 0.3, 3600.0, 3600.0]
    messages = [ReplayMessage(f"s-{i}", "{}", "normal", None, None, None, due=d)
                for i, d in enumerate(due)]  # fmt: skip

    summary = sender.run(messages, duration=0.6, due=lambda m: m.due)  # type: ignore[attr-defined]

    assert summary.sent == 2  # the third was due after the run's end: never produced
    assert summary.failed == 2


def test_the_nab_recording_replays_whole() -> None:
    path = NAB / "machine_temperature_system_failure.csv"
    labels = json.loads((NAB / "machine_temperature_system_failure.labels.json").read_text())

    messages = replayed([path], ONE)

    assert len(messages) == 22_695 and Counter(m.kind for m in messages) == {"normal": 22_695}
    assert messages[0].event_time == "2013-12-02T21:15:00.000Z"
    assert messages[-1].event_time == "2014-02-19T15:25:00.000Z"
    assert len({m.event_id for m in messages}) == 22_695
    assert len(labels["windows"]) == 4 and len(labels["anomalies"]) == 4


# -- the command against the broker --------------------------------------------------

CSV_LINES = [
    "timestamp,value",
    *(f"2026-01-01 00:{m:02d}:00,{20 + m / 4}" for m in range(10)),
    "2026-01-01 00:10:00,",  # no value
    "yesterday,30.0",
    "2026-01-01 00:12:00,31.0,oops",
    *(f"2026-01-01 00:{m:02d}:00,{20 + m / 4}" for m in range(13, 20)),
]
JSONL_LINES = [
    *(json.dumps({"timestamp": f"2026-01-01T01:{m:02d}:30+01:00", "value": m}) for m in range(8)),
    "{broken",
    '{"timestamp": "2026-01-01T01:09:30+01:00", "value": "hot"}',
]


def test_replay_sends_every_row_once_and_the_manifest_accounts_for_each(
    kafka, new_topic, tmp_path
) -> None:
    csv_file = write(tmp_path / "line-a.csv", "\n".join(CSV_LINES) + "\n")
    jsonl_file = write(tmp_path / "line-b.jsonl", "\n".join(JSONL_LINES) + "\n")
    topic, manifest, registry = new_topic("replay"), tmp_path / "m.jsonl", tmp_path / "r.jsonl"

    done = run_producer(
        "replay", csv_file, jsonl_file, "--bootstrap-servers", kafka.bootstrap,
        "--topic", topic, "--sensor-id", "a,b", "--speed", 600, "--manifest", manifest,
        "--registry-out", registry, "--site", "plant-1", "--metrics-port", 0,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "30 delivered, 0 failed" in done.stderr, done.stderr
    messages = consume_all(kafka.bootstrap, topic)
    lines = read_jsonl(manifest)
    # Every data line of both files exactly once, in the topic and in the manifest.
    expected = {("line-a.csv", n) for n in range(2, len(CSV_LINES) + 1)} | {
        ("line-b.jsonl", n) for n in range(1, len(JSONL_LINES) + 1)
    }
    assert len(lines) == len(messages) == len(expected) == 30
    assert {(line["file"], line["line"]) for line in lines} == expected
    by_position = {(line["partition"], line["offset"]): line for line in lines}
    assert set(by_position) == {(m.partition(), m.offset()) for m in messages}
    raw_lines = {"line-a.csv": CSV_LINES, "line-b.jsonl": JSONL_LINES}
    for m in messages:
        line = by_position[(m.partition(), m.offset())]
        recorded = raw_lines[line["file"]][line["line"] - 1]
        sensor = {"line-a.csv": "a", "line-b.jsonl": "b"}[line["file"]]
        assert m.key().decode() == line["sensor_id"] == sensor
        if line["kind"] == "malformed":  # the line itself, verbatim
            assert m.value().decode() == recorded, line
            assert line["reason"] and line["event_id"] is None
            continue
        assert line["kind"] == "normal" and violations(m.value()) == []
        event = json.loads(m.value())
        if line["file"] == "line-a.csv":
            time, value = recorded.split(",")
            expected_time = datetime.fromisoformat(time).replace(tzinfo=UTC)
        else:
            row = json.loads(recorded)
            time, value = row["timestamp"], row["value"]
            expected_time = datetime.fromisoformat(time).astimezone(UTC)
        assert event["event_time"] == expected_time.strftime("%Y-%m-%dT%H:%M:%S.000Z")
        assert event["temperature_c"] == float(value) == line["temperature_c"]
        assert (event["event_id"], event["event_time"]) == (line["event_id"], line["event_time"])
    assert Counter(line["kind"] for line in lines) == {"normal": 25, "malformed": 5}
    assert sorted(line["reason"] for line in lines if line["kind"] == "malformed") == [
        "column_count", "invalid_time", "invalid_value:value", "invalid_value:value", "not_json",
    ]  # fmt: skip
    assert [json.loads(line) for line in registry.read_text().splitlines()] == [
        {"sensor_id": "a", "site": "plant-1", "max_temp_c": None},
        {"sensor_id": "b", "site": "plant-1", "max_temp_c": None},
    ]
    # --speed 600: the recording's 19 minutes took about 1.9 s (never less).
    stamps = sorted(m.timestamp()[1] for m in messages if m.timestamp()[0] == TIMESTAMP_CREATE_TIME)
    assert len(stamps) == 30 and (stamps[-1] - stamps[0]) / 1000 >= 19 * 60 / 600 * 0.95


def test_replay_refuses_a_recording_without_its_columns_before_connecting(tmp_path) -> None:
    path = write(tmp_path / "x.csv", "when,temp\n2026-01-01 00:00:00,1\n")

    done = run_producer(
        "replay", path, "--bootstrap-servers", f"127.0.0.1:{free_port()}", "--metrics", "false"
    )

    assert done.returncode == 2
    assert "x.csv: no column 'timestamp', 'value'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--time-zone", "Mars/Olympus"], "--time-zone (SENSORWATCH_TIME_ZONE): not a time zone"),
        (["--speed", "-1"], "--speed (SENSORWATCH_SPEED)"),
        (["--start-time", "2026-01-01T00:00:00"], "(SENSORWATCH_START_TIME): needs a time zone"),
        (["--field", "battery_pct"], "--field (SENSORWATCH_FIELD)"),
        (["--time-format", "dd.mm.yyyy"], "--time-format (SENSORWATCH_TIME_FORMAT)"),
    ],
)  # fmt: skip
def test_replay_bad_settings_fail_before_reading(flags: list[str], expected: str) -> None:
    done = run_producer("replay", "no-such-file.csv", *flags)

    assert done.returncode == 2
    assert "invalid settings" in done.stderr and expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_file_is_said_in_one_line(tmp_path) -> None:
    done = run_producer("replay", tmp_path / "gone.csv", "--metrics", "false")

    assert done.returncode == 2
    assert "gone.csv: No such file or directory" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_replayed_recording_with_bad_rows_is_in_the_lake_row_for_row(
    spark, kafka, new_topic, tmp_path
) -> None:
    """Issue 69's check: every row of a recording with bad rows is accounted for in the
    lake: each good row in ``readings`` once, each bad one in ``quarantine`` with a reason,
    at the Kafka position the manifest gives it."""
    from jobs.stream import run
    from lake.reader import LakeReader
    from tests.support.job_settings import available_now

    csv_file = write(tmp_path / "line-a.csv", "\n".join(CSV_LINES) + "\n")
    jsonl_file = write(tmp_path / "line-b.jsonl", "\n".join(JSONL_LINES) + "\n")
    topic, manifest = new_topic("replay-lake", 2), tmp_path / "m.jsonl"
    done = run_producer(
        "replay", csv_file, jsonl_file, "--bootstrap-servers", kafka.bootstrap,
        "--topic", topic, "--sensor-id", "a,b", "--speed", 0, "--manifest", manifest,
        "--metrics-port", 0,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = read_jsonl(manifest)
    lake = tmp_path / "lake"
    run(available_now(kafka, topic, lake, readers=False), spark)

    reader = LakeReader(lake)
    readings = reader.read("readings", ["event_id", "kafka_partition", "kafka_offset"])
    quarantine = reader.read("quarantine", ["error", "kafka_partition", "kafka_offset"])
    assert readings is not None and quarantine is not None
    good = {(n["partition"], n["offset"]): n["event_id"] for n in lines if n["kind"] == "normal"}
    bad = {(n["partition"], n["offset"]) for n in lines if n["kind"] == "malformed"}
    stored = Counter(
        (r["kafka_partition"], r["kafka_offset"], r["event_id"]) for r in readings.to_pylist()
    )
    assert stored == Counter((p, o, e) for (p, o), e in good.items())  # each once
    held = {(r["kafka_partition"], r["kafka_offset"]): r["error"] for r in quarantine.to_pylist()}
    assert set(held) == bad and len(bad) == 5 and all(held.values())
