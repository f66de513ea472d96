"""Recordings of real sensors as readings: ``python -m producer replay FILE...``
(docs/producer.md#replaying-a-recording). Pure: files in, messages out, no Kafka;
producer/replay_cli.py sends them with the simulator's Sender.

A recording is CSV (a header line, then one row a line) or JSON lines (one object a line).
Its rows become readings (docs/architecture.md#the-event) with their recorded event times:
one sensor per file (a time column and a value column), or one sensor per column. What the
recording does not hold is filled in: the other numeric fields from constants, ``seq``
counts each sensor's rows +1 in the order they are sent, and ``event_id`` is a UUID derived
from the file's name, the line and the sensor, so a replay run twice sends the same ids.

A row that cannot be read (its time or a value unparseable, the wrong number of columns,
not JSON, not UTF-8) is not dropped: its line goes to Kafka as it is, once, and the job
quarantines it with a reason; the manifest counts it as ``malformed`` with ``reason``. A
value outside the event's range is sent as a reading (the job quarantines it as
``out_of_range:<field>``) and counted ``malformed`` too. The good values of a row with a bad
one are still sent as readings.

Each file's rows are sent in the file's order; several files are interleaved by time (each
row ordered by its file's newest time so far, so a row that steps back in time is sent
where it stands in its file). Times: aware UTC everywhere; a naive recorded time is taken
in ``time_zone`` (UTC by default). ``speed`` paces by the recorded times without changing
them.
"""

from __future__ import annotations

import csv
import heapq
import json
import math
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from contract.event import FIELDS, OUT_OF_RANGE, RANGES
from producer.generator import Message
from producer.reading import IsoClock

# The namespace of replayed event ids (uuid5): fixed for good, so ids repeat across runs.
REPLAY_NAMESPACE = uuid.UUID("6b1f2a8e-3c4d-5e6f-8a9b-0c1d2e3f4a5b")

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")

# The event times a reading may carry: four-digit years (docs/architecture.md#the-event).
EARLIEST = datetime(1000, 1, 1, tzinfo=UTC).timestamp()
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()

# The numeric fields of every reading, but the one the recording gives (flags change them).
FILL = {"temperature_c": 20.0, "humidity_pct": 50.0, "battery_pct": 100.0}

# Why a row could not be read (the manifest's ``reason`` of a malformed row).
NOT_UTF8 = "not_utf8"
NOT_CSV = "not_csv"
NOT_JSON = "not_json"
NOT_AN_OBJECT = "not_an_object"
COLUMN_COUNT = "column_count"
MISSING_COLUMN = "missing_column"  # :<column>
INVALID_TIME = "invalid_time"
INVALID_VALUE = "invalid_value"  # :<column>


class ReplayError(ValueError):
    """A recording cannot be replayed at all (unreadable, no such column in its header):
    said before anything is sent."""


@dataclass(frozen=True)
class Layout:
    """How the rows of one file become readings."""

    sensors: tuple[tuple[str, str], ...]  # (value column, sensor id), one or more
    time_column: str = "timestamp"
    time_format: str = "iso"  # iso, epoch_s, epoch_ms or a strptime pattern
    zone: tzinfo = UTC  # of naive times
    format: str = "csv"  # csv or jsonl


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a recording, read."""

    file: str  # the file's name
    line: int  # 1-based line number in the file
    raw: str | bytes  # the line without its ending (bytes: not UTF-8)
    time: float | None  # recorded time, epoch seconds (None: unreadable)
    order: float  # the file's newest time so far (-inf before any): the merge key
    sensors: tuple[str, ...]  # every sensor the row is a reading of
    values: tuple[tuple[str, float], ...]  # (sensor id, value) of the values read
    problem: str | None = None  # why (part of) the row could not be read
    problem_sensor: str = ""  # the sensor the raw line is sent under


@dataclass(slots=True)
class ReplayMessage(Message):
    """A message of a replay, with the recorded time that paces it."""

    recorded: float | None = None  # epoch seconds, before any shift (None: unreadable)
    due: float = 0.0  # wall-clock seconds after the start at which it is sent


def time_zone(name: str) -> tzinfo:
    """The zone of naive times: UTC, or an IANA name (Europe/Berlin)."""
    return UTC if name == "UTC" else ZoneInfo(name)


def parse_time(text: object, time_format: str = "iso", zone: tzinfo = UTC) -> float:
    """A recorded time as epoch seconds (UTC). A naive time is taken in ``zone`` (for
    a local time that occurs twice, at a change from summer time, the first).

    Raises:
        ValueError: not a time in that format, or not in the years 1000 to 9999.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"not a time: {text!r}")
    if time_format in ("epoch_s", "epoch_ms"):
        epoch = float(text) / (1000.0 if time_format == "epoch_ms" else 1.0)
    elif not isinstance(text, str):
        raise ValueError(f"not a time: {text!r}")
    else:
        if time_format == "iso":
            when = datetime.fromisoformat(text.strip())
        else:
            when = datetime.strptime(text.strip(), time_format)
        if when.tzinfo is None:
            when = when.replace(tzinfo=zone)
        epoch = when.timestamp()
    if not EARLIEST <= epoch <= LATEST:  # also NaN
        raise ValueError(f"not a time of the years 1000 to 9999: {text!r}")
    return epoch


def parse_value(text: object) -> float:
    """A recorded value as a finite number.

    Raises:
        ValueError: empty, not a number, NaN or infinite.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"not a number: {text!r}")
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {text!r}")
    return number


def recording_format(path: Path, given: str = "auto") -> str:
    """``csv`` or ``jsonl``: ``given``, else by the extension, else by the first byte that
    is not white space (``{``: JSON lines)."""
    if given != "auto":
        return given
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    with path.open("rb") as lines:
        for line in lines:
            if line.strip():
                return "jsonl" if line.lstrip().startswith(b"{") else "csv"
    return "csv"


def lines_of(path: Path) -> Iterator[tuple[int, str | bytes]]:
    """The lines of a file that are not blank, numbered from 1, without their endings:
    text, or the bytes of a line that is not UTF-8 (a byte-order mark is dropped)."""
    with path.open("rb") as lines:
        for number, data in enumerate(lines, start=1):
            data = data.rstrip(b"\r\n")
            if number == 1:
                data = data.removeprefix(b"\xef\xbb\xbf")
            if not data.strip():
                continue
            try:
                yield number, data.decode("utf-8")
            except UnicodeDecodeError:
                yield number, data


def csv_header(path: Path, layout: Layout) -> list[str]:
    """The header of a CSV recording, checked against the layout's columns.

    Raises:
        ReplayError: the file cannot be read, is empty, or lacks a column.
    """
    try:
        first = next(lines_of(path), None)
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror}") from None
    if first is None:
        raise ReplayError(f"{path}: empty (a CSV recording starts with its header)")
    if isinstance(first[1], bytes):
        raise ReplayError(f"{path}: the header line is not UTF-8")
    try:
        header = [name.strip() for name in next(csv.reader([first[1]]))]
    except csv.Error as exc:
        raise ReplayError(f"{path}: the header line is not CSV: {exc}") from None
    wanted = [layout.time_column, *(column for column, _ in layout.sensors)]
    missing = [column for column in wanted if column not in header]
    if missing:
        raise ReplayError(
            f"{path}: no column {', '.join(map(repr, missing))} in its header "
            f"({', '.join(header)}); say which with --time-column, --value-column or "
            "--sensor-columns"
        )
    return header


def check_recording(path: Path, layout: Layout) -> None:
    """Raises ReplayError when ``path`` cannot be replayed with ``layout`` at all."""
    if layout.format == "csv":
        csv_header(path, layout)
        return
    try:
        path.open("rb").close()
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror}") from None


def _cells(
    text: str, layout: Layout, header: list[str] | None
) -> tuple[Mapping[str, object] | None, str | None]:
    """A line's cells by column, or None and why they cannot be had."""
    if header is not None:
        try:
            cells = next(csv.reader([text]), [])
        except csv.Error:
            return None, NOT_CSV
        if len(cells) != len(header):
            return None, COLUMN_COUNT
        return dict(zip(header, cells, strict=True)), None
    try:
        value = json.loads(text)
    except ValueError:
        return None, NOT_JSON
    if not isinstance(value, dict):
        return None, NOT_AN_OBJECT
    return value, None


def read_rows(path: Path, layout: Layout) -> Iterator[Row]:
    """The rows of one recording, in the file's order (CSV: after its header).

    Raises:
        ReplayError: as :func:`check_recording`.
    """
    header = csv_header(path, layout) if layout.format == "csv" else None
    name, sensors = path.name, tuple(sensor for _, sensor in layout.sensors)
    order = -math.inf
    lines = lines_of(path)
    if header is not None:
        next(lines)
    for number, raw in lines:
        if isinstance(raw, bytes):
            yield Row(name, number, raw, None, order, sensors, (), NOT_UTF8, sensors[0])
            continue
        cells, problem = _cells(raw, layout, header)
        if cells is not None and layout.time_column not in cells:
            problem = f"{MISSING_COLUMN}:{layout.time_column}"
        if problem is not None or cells is None:
            yield Row(name, number, raw, None, order, sensors, (), problem, sensors[0])
            continue
        try:
            when = parse_time(cells[layout.time_column], layout.time_format, layout.zone)
        except (ValueError, OverflowError, OSError):
            yield Row(name, number, raw, None, order, sensors, (), INVALID_TIME, sensors[0])
            continue
        order = max(order, when)
        values: list[tuple[str, float]] = []
        problem_sensor = sensors[0]
        for column, sensor in layout.sensors:
            if column not in cells:
                reason = f"{MISSING_COLUMN}:{column}"
            else:
                try:
                    values.append((sensor, parse_value(cells[column])))
                    continue
                except (ValueError, OverflowError):
                    reason = f"{INVALID_VALUE}:{column}"
            if problem is None:  # the first problem names the row's
                problem, problem_sensor = reason, sensor
        yield Row(name, number, raw, when, order, sensors, tuple(values), problem, problem_sensor)


def merge(files: Sequence[Iterable[Row]]) -> Iterator[Row]:
    """The rows of several files in one stream: each file's in its order, the files
    interleaved by each row's ``order`` (its file's newest time so far)."""
    if len(files) == 1:
        return iter(files[0])
    return heapq.merge(*files, key=lambda row: row.order)


def event_id(file: str, line: int, sensor_id: str) -> str:
    """The event id of a replayed reading: the same for the same file, line and sensor."""
    return str(uuid.uuid5(REPLAY_NAMESPACE, f"{file}\n{line}\n{sensor_id}"))


@dataclass
class Replay:
    """Rows in the order they are sent -> messages: readings, raw lines, their pace."""

    value_field: str = "temperature_c"  # the event field the recorded values are
    fill: Mapping[str, float] = field(default_factory=lambda: dict(FILL))  # the other fields
    start_time: float | None = None  # epoch seconds the first recorded time moves to
    speed: float = 0.0  # recorded seconds per wall-clock second; 0 = as fast as possible

    def __post_init__(self) -> None:
        self._seq: dict[str, int] = {}  # each sensor's rows so far
        self._first: float | None = None  # the first recorded time sent
        self._newest = -math.inf  # the newest recorded time sent
        self._iso = IsoClock()

    def _shift(self, recorded: float) -> float:
        assert self._first is not None
        return recorded if self.start_time is None else recorded - self._first + self.start_time

    def _due(self, recorded: float | None) -> float:
        """Wall-clock seconds after the start: the newest recorded time so far, compressed."""
        if recorded is not None:
            if self._first is None:
                self._first = recorded
            self._newest = max(self._newest, recorded)
        if self._first is None or self.speed <= 0:
            return 0.0
        return (self._newest - self._first) / self.speed

    def _reading(self, row: Row, sensor_id: str, value: float, due: float) -> ReplayMessage:
        assert row.time is not None
        event_time = self._iso.format(self._shift(row.time))
        numbers = {**self.fill, self.value_field: value}
        event = {
            "event_id": event_id(row.file, row.line, sensor_id),
            "sensor_id": sensor_id,
            "event_time": event_time,
            **{name: numbers[name] for name in RANGES},
            "seq": self._seq[sensor_id],
        }
        assert list(event) == list(FIELDS)  # the contract's fields, in its order
        detail: dict[str, object] = {"file": row.file, "line": row.line}
        kind = "normal"
        low, high = RANGES[self.value_field]
        if not low <= value <= high:
            kind, detail["reason"] = "malformed", f"{OUT_OF_RANGE}:{self.value_field}"
        return ReplayMessage(
            key=sensor_id,
            value=json.dumps(event, separators=(",", ":"), ensure_ascii=False),
            kind=kind,
            event_id=str(event["event_id"]),
            event_time=event_time,
            temperature_c=numbers["temperature_c"],
            detail=detail,
            humidity_pct=numbers["humidity_pct"],
            battery_pct=numbers["battery_pct"],
            recorded=row.time,
            due=due,
        )

    def _raw(self, row: Row, due: float) -> ReplayMessage:
        """The row's line as it is, under the sensor its problem concerns."""
        return ReplayMessage(
            key=row.problem_sensor,
            value=row.raw,
            kind="malformed",
            event_id=None,
            event_time=None if row.time is None else self._iso.format(self._shift(row.time)),
            temperature_c=None,
            detail={"file": row.file, "line": row.line, "reason": row.problem},
            recorded=row.time,
            due=due,
        )

    def messages(self, rows: Iterable[Row]) -> Iterator[ReplayMessage]:
        """Each row's readings (in its columns' order), then its raw line if any part of
        it could not be read."""
        for row in rows:
            due = self._due(row.time)
            for sensor_id in row.sensors:  # +1 per row: a row that is no reading leaves a gap
                self._seq[sensor_id] = self._seq.get(sensor_id, 0) + 1
            for sensor_id, value in row.values:
                yield self._reading(row, sensor_id, value, due)
            if row.problem is not None:
                yield self._raw(row, due)


def registry_lines(sensor_ids: Iterable[str], site: str) -> Iterator[str]:
    """The replayed sensors as device registry lines (contract/registry.py)."""
    for sensor_id in dict.fromkeys(sensor_ids):
        yield json.dumps({"sensor_id": sensor_id, "site": site, "max_temp_c": None}) + "\n"
