"""``python -m producer replay FILE...``: recordings of real sensors sent as readings
(docs/producer.md#replaying-a-recording), through the simulator's sender, manifest and
/metrics. The reading of the files is producer/replay.py's."""

from __future__ import annotations

import sys
from itertools import islice
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.cli import read_command_line, whole_lines
from conf.settings.base import SettingsError, load_settings
from conf.settings.replay import ReplaySettings
from producer.delivery import SetupError, deliver, kafka_sender
from producer.generator import Message
from producer.replay import (
    Layout,
    Replay,
    ReplayError,
    ReplayMessage,
    check_recording,
    merge,
    read_rows,
    recording_format,
    registry_lines,
    time_zone,
)
from producer.sender import Sender, Summary

PROG = "python -m producer replay"

DESCRIPTION = """\
Send recordings of real sensors (CSV with a header line, or JSON lines) to Kafka as
readings (the simulator's JSON, key = sensor_id) with their recorded event times.

One sensor per file (--time-column, --value-column, --sensor-id) or one per column
(--sensor-columns). The values are the --field (temperature_c by default); the event's
other numbers are constants (--humidity-pct, --battery-pct, --temperature-c), seq counts
each sensor's rows, and event_id is derived from the file's name, the line and the
sensor, so a replay run twice sends the same ids.

Times: a time written without a zone or offset is taken as UTC unless --time-zone says
otherwise; event times are sent in UTC. --start-time shifts all times so the recording
starts then; --speed paces sending by the recorded times (600: ten recorded minutes per
second; 0, the default: as fast as possible) without changing them. Each file's rows go
in the file's order; several files are interleaved by time.

A row that cannot be read (time or value unparseable, wrong number of columns, not JSON)
is sent as it is, its line as the message value, so the job quarantines it; the manifest
counts it as malformed with a reason. Nothing is dropped.

Every setting can also come from the environment variable named in its help.
Exit status: 0 all delivered, 1 some messages failed, 2 bad settings, an unreadable
recording, or no broker/topic.
"""


class ReplayFiles(BaseModel):
    """The recordings."""

    files: CliPositionalArg[list[Path]] = Field(
        description="recordings, CSV or JSON lines (see --format)"
    )


def read_command_line_of_replay(argv: list[str] | None) -> tuple[dict[str, object], list[Path]]:
    """The settings given as flags, and the files."""
    flags, files = read_command_line(
        ReplaySettings, argv, prog=PROG, description=DESCRIPTION, options=ReplayFiles
    )
    assert files is not None
    return flags, files.files


def layouts(settings: ReplaySettings, files: list[Path]) -> list[Layout]:
    """How each file's rows become readings.

    Raises:
        ReplayError: --sensor-id names neither one sensor nor one per file.
    """
    common = {
        "time_column": settings.time_column,
        "time_format": settings.time_format,
        "zone": time_zone(settings.time_zone),
    }
    if settings.sensor_columns:
        columns = tuple(settings.sensor_columns.items())
        return [
            Layout(columns, format=recording_format(f, settings.format), **common) for f in files
        ]
    ids = settings.sensor_id
    if len(ids) not in (0, 1, len(files)):
        raise ReplayError(
            f"--sensor-id: {len(ids)} ids for {len(files)} files; give one per file, or one for all"
        )
    ids = ids * len(files) if len(ids) == 1 else ids or tuple(f.stem for f in files)
    return [
        Layout(
            ((settings.value_column, sensor),),
            format=recording_format(path, settings.format),
            **common,
        )
        for path, sensor in zip(files, ids, strict=True)
    ]


def _due(message: Message) -> float:
    assert isinstance(message, ReplayMessage)
    return message.due


def main(argv: list[str] | None = None) -> int:
    """Replay the recordings; returns the exit status."""
    whole_lines()
    try:
        flags, files = read_command_line_of_replay(argv)
        settings = load_settings(ReplaySettings, flags)
    except SettingsError as exc:
        print(f"{PROG}: invalid settings:\n  " + str(exc).replace("\n", "\n  "), file=sys.stderr)
        return 2
    try:
        plans = layouts(settings, files)
        for path, layout in zip(files, plans, strict=True):
            check_recording(path, layout)
    except ReplayError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    if settings.registry_out:
        sensors = [sensor for layout in plans for _, sensor in layout.sensors]
        settings.registry_out.parent.mkdir(parents=True, exist_ok=True)
        settings.registry_out.write_text("".join(registry_lines(sensors, settings.site)))
    try:
        sender = kafka_sender(settings)
    except SetupError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2

    replay = Replay(
        value_field=settings.field,
        fill={
            "temperature_c": settings.temperature_c,
            "humidity_pct": settings.humidity_pct,
            "battery_pct": settings.battery_pct,
        },
        start_time=None if settings.start_time is None else settings.start_time.timestamp(),
        speed=settings.speed,
    )
    rows = merge([read_rows(path, layout) for path, layout in zip(files, plans, strict=True)])
    messages = replay.messages(rows)
    shift = "" if settings.start_time is None else f", from {settings.start_time.isoformat()}"
    pace = f"speed {settings.speed:g}" if settings.speed else "unpaced"
    names = ", ".join(path.name for path in files)
    limited = messages if settings.count is None else islice(messages, settings.count)

    def send(sender: Sender) -> Summary:
        return sender.run(
            limited, duration=settings.duration, due=_due if settings.speed > 0 else None
        )

    return deliver(
        PROG, settings, sender,
        f"replaying {names} -> {sender.target} (recorded times{shift}, {pace})", send,
    )  # fmt: skip
