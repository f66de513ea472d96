"""``scripts/alerts`` (``python -m ops.alerts_cli``): the alerts table in the terminal.

Reads the Delta table with the ``deltalake`` package, so it starts without a JVM.
Exit status: 0 on success (also when the alerts table does not exist yet: nothing to
show, said on stderr), 1 when the lake folder does not exist (a mistyped ``--lake`` should
not pass for "no alerts"), 2 for a bad flag or setting.
"""

from __future__ import annotations

import argparse
import importlib.abc
import json
import signal
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from types import FrameType
from typing import Any, TextIO

import pyarrow as pa

from conf.settings import (
    AlertsCliSettings,
    SettingsError,
    env_name,
    load_settings,
    shared_file_values,
)
from ops.alerts import (
    RULES,
    SEVERITIES,
    AlertFilter,
    alert_record,
    describe_value,
    new_alerts,
    parse_since,
    query_alerts,
    read_alerts,
    values,
)
from ops.lake import ALERTS, LakeReader

DEFAULT_LIMIT = 50
# (header, width, value): widths fit the usual values; a longer value pushes its row.
TABLE: list[tuple[str, int, Callable[[dict[str, Any]], str]]] = [
    ("DETECTED (UTC)", 19, lambda r: _when(r["detected_at"])),
    ("SEVERITY", 8, lambda r: r["severity"].upper()),
    ("RULE", 16, lambda r: r["rule"]),
    ("SENSOR", 11, lambda r: r["sensor_id"]),
    ("SITE", 22, lambda r: r["site"] or "-"),
    ("WINDOW START (UTC)", 19, lambda r: _when(r["window_start"])),
    ("OBSERVED", 16, describe_value),
    ("READINGS", 8, lambda r: str(r["readings"])),
]


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _choices(allowed: Sequence[str]) -> Callable[[str], str]:
    """An argparse type: a comma-separated list of allowed values."""

    def check(text: str) -> str:
        bad = [v for v in values([text]) if v not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown value(s) {', '.join(map(repr, bad))}; choose from {', '.join(allowed)}"
            )
        return text

    return check


def _since(text: str) -> datetime:
    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limit(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The flags of ``scripts/alerts``."""
    parser = argparse.ArgumentParser(
        prog="scripts/alerts",
        description="The SensorWatch alerts table, newest first (by detected_at). Reads the "
        "Delta table directly (no Spark). Repeat a filter or separate values by commas to "
        "match any of them. Exit status: 0, also when no alerts table exists yet; 1 when "
        "the lake folder does not exist; 2 for a bad flag.",
    )
    parser.add_argument(
        "--lake",
        metavar="DIR",
        help=f"lake folder (default: the job's lake, var/lake; env {env_name('lake')}; "
        "or lake in conf/pipeline.toml)",
    )
    parser.add_argument(
        "--since",
        type=_since,
        metavar="WHEN",
        help="only alerts detected (detected_at) at or after WHEN: a duration back from now "
        "(90s, 30m, 1h, 2d) or an ISO-8601 timestamp (2026-01-01T10:00:00Z; no zone = UTC)",
    )
    parser.add_argument("--sensor", action="append", default=[], metavar="ID", help="sensor_id")
    parser.add_argument("--site", action="append", default=[], metavar="SITE", help="site")
    parser.add_argument(
        "--severity",
        action="append",
        default=[],
        type=_choices(SEVERITIES),
        metavar="S",
        help=f"severity: {', '.join(SEVERITIES)}",
    )
    parser.add_argument(
        "--rule",
        action="append",
        default=[],
        type=_choices(RULES),
        metavar="R",
        help=f"rule: {', '.join(RULES)}",
    )
    parser.add_argument(
        "--limit",
        type=_limit,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"show the newest N matching alerts (default {DEFAULT_LIMIT}; 0 = all)",
    )
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="after the newest alerts (oldest of them first), print new alerts as they land; "
        "waits for the lake and the table if they do not exist yet; Ctrl-C ends it",
    )
    parser.add_argument(
        "--interval",
        dest="follow_interval",
        metavar="S",
        help="seconds between two looks at the table with --follow (default 1; "
        f"env {env_name('follow_interval')})",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines, one alert per line")
    return parser


class Printer:
    """Writes alerts as an aligned table or as JSON lines."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out, self.as_json = out, as_json
        self._header_done = False

    def rows(self, rows: list[dict[str, Any]]) -> None:
        """Print rows (the table header once, before the first row)."""
        for row in rows:
            if self.as_json:
                self.out.write(json.dumps(alert_record(row), ensure_ascii=False) + "\n")
                continue
            if not self._header_done:
                self.out.write(_line([(h, w) for h, w, _ in TABLE]) + "\n")
                self._header_done = True
            self.out.write(_line([(cell(row), w) for _, w, cell in TABLE]) + "\n")
        self.out.flush()


def _line(cells: list[tuple[str, int]]) -> str:
    return "  ".join(text.ljust(width) for text, width in cells).rstrip()


def _filter(args: argparse.Namespace) -> AlertFilter:
    return AlertFilter(
        since=args.since,
        sensors=values(args.sensor),
        sites=values(args.site),
        severities=values(args.severity),
        rules=values(args.rule),
    )


def show(reader: LakeReader, where: AlertFilter, limit: int, printer: Printer) -> int:
    """Print the newest matching alerts once; returns the exit status."""
    if not reader.exists():
        print(f"alerts: no lake at {reader.root} (the streaming job creates it)", file=sys.stderr)
        return 1
    result = query_alerts(reader, where, limit or None)
    if not result.exists:
        print(f"alerts: no alerts table in {reader.root} yet", file=sys.stderr)
        return 0
    printer.rows(result.rows)
    if not printer.as_json:
        shown = len(result.rows)
        note = f"{shown} of {result.total} alerts" if shown < result.total else f"{shown} alerts"
        print(note + (" (--limit)" if shown < result.total else ""), file=sys.stderr)
    return 0


class _Stop(Exception):
    """SIGTERM: leave the follow loop like Ctrl-C does."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def follow(
    reader: LakeReader, where: AlertFilter, limit: int, printer: Printer, interval: float
) -> int:
    """Print the newest matching alerts (oldest first), then new ones as they land.

    Polls the table's Delta version every ``interval`` seconds and reads the table only
    when the version moved; an alert is printed once, by its alert_id.
    """
    seen: set[str] = set()
    version: int | None = None
    waiting_said = False
    first = True
    while True:
        table = reader.open(ALERTS)
        if table is None:
            if not waiting_said:
                print(f"alerts: waiting for {reader.table_path(ALERTS)} ...", file=sys.stderr)
                waiting_said = True
        else:
            table.update_incremental()
            if table.version() != version:
                version = table.version()
                rows = _fresh(reader, where, seen, limit if first else 0)
                printer.rows(rows)
                seen.update(r["alert_id"] for r in rows)
                first = False
        time.sleep(interval)  # the poll interval (not synchronisation)


def _fresh(reader: LakeReader, where: AlertFilter, seen: set[str], limit: int) -> list[dict]:
    """Matching alerts not printed yet, oldest first; the newest ``limit`` (0 = all)."""
    table = read_alerts(reader, where)
    if table is None:
        return []
    fresh: pa.Table = new_alerts(table, seen)
    # Not shown because of --limit at start still counts as seen: never printed later.
    seen.update(fresh.column("alert_id").to_pylist())
    if limit:
        fresh = fresh.slice(max(0, fresh.num_rows - limit))
    return fresh.to_pylist()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_settings(
            AlertsCliSettings,
            {"lake": args.lake, "follow_interval": args.follow_interval},
            shared_file_values(AlertsCliSettings),
            flags={"follow_interval": "--interval"},
        )
    except SettingsError as exc:
        print(f"scripts/alerts: {exc}", file=sys.stderr)
        return 2
    reader = LakeReader(settings.lake)
    printer = Printer(sys.stdout, args.json)
    if not args.follow:
        return show(reader, _filter(args), args.limit, printer)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        return follow(reader, _filter(args), args.limit, printer, settings.follow_interval)
    except (KeyboardInterrupt, _Stop):
        return 0


def run() -> None:
    """Entry point: exit quietly when the reader of our output goes away (``| head``)."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain when it flushes stdout at exit: point it at /dev/null.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


class _WithoutPandas(importlib.abc.MetaPathFinder):
    """Makes ``import pandas`` fail, as if it were not installed.

    Arrow imports pandas the first time it converts a Python value (a filter's
    timestamp), only to check for pandas types: a third of this command's start-up, for
    a library it never uses. Installed by the command line only, never on import.
    """

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by scripts/alerts")


if __name__ == "__main__":
    sys.meta_path.insert(0, _WithoutPandas())
    run()
