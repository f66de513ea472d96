"""``scripts/alerts`` (``python -m ops.alerts_cli``): incidents and alerts in the terminal.

By default an "Incidents" section (firing first, then the recently resolved) followed by
the raw alerts, newest first; ``--incidents`` or ``--alerts`` shows only one of them.
Reads the Delta tables with the ``deltalake`` package, so it starts without a JVM.
Exit status: 0 on success (also when a table does not exist yet or is empty: nothing to
show, said plainly), 1 when the lake folder does not exist (a mistyped ``--lake`` should
not pass for "no alerts"), 2 for a bad flag or setting.
"""

from __future__ import annotations

import importlib.abc
import json
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from types import FrameType
from typing import Annotated, Any, TextIO

import pyarrow as pa
from pydantic import BaseModel, BeforeValidator, Field, field_validator, model_validator

from conf.cli import read_command_line as command_line
from conf.settings.alerts_cli import AlertsCliSettings
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from contract.alerts import FIRING, RULES, SEVERITIES
from contract.rules.model import is_rule_name, known_rules
from contract.times import parse_since, readable, utc_now
from lake.layout import ALERTS, INCIDENTS
from lake.reader import LakeReader
from ops.alert_reader import (
    RESOLVED_LOOKBACK,
    AlertFilter,
    IncidentRows,
    alert_record,
    describe_duration,
    describe_peak,
    describe_value,
    incident_duration,
    incident_record,
    new_alerts,
    query_alerts,
    query_incidents,
    read_alerts,
    read_incidents,
    values,
)
from ops.piping import run_quietly_piped
from ops.table_text import line

DEFAULT_LIMIT = 50
# Flags named otherwise than their field (conf/cli.py: one flag per field).
FLAGS = {"follow_interval": "--interval", "follow": "-f"}
Column = tuple[str, int, Callable[[dict[str, Any]], str]]


# (header, width, value): widths fit the usual values; a longer value pushes its row.
def alert_table(units: Mapping[str, str] | None = None) -> list[Column]:
    """The alerts table's columns, values in their rule's unit (``units``: by rule)."""
    return [
        ("DETECTED (UTC)", 19, lambda r: _table_time(r["detected_at"])),
        ("SEVERITY", 8, lambda r: r["severity"].upper()),
        ("RULE", 16, lambda r: r["rule"]),
        ("SENSOR", 11, lambda r: r["sensor_id"]),
        ("SITE", 22, lambda r: r["site"] or "-"),
        ("WINDOW START (UTC)", 19, lambda r: _table_time(r["window_start"])),
        ("OBSERVED", 16, lambda r: describe_value(r, units)),
        ("READINGS", 8, lambda r: str(r["readings"])),
    ]


def incident_table(units: Mapping[str, str] | None = None) -> list[Column]:
    """The incidents table's columns, values in their rule's unit (``units``: by rule)."""
    return [
        ("STATUS", 8, lambda r: "FIRING" if r["status"] == FIRING else r["status"]),
        ("SEVERITY", 8, lambda r: r["severity"].upper()),
        ("RULE", 16, lambda r: r["rule"]),
        ("SENSOR", 11, lambda r: r["sensor_id"]),
        ("SITE", 22, lambda r: r["site"] or "-"),
        ("STARTED (UTC)", 19, lambda r: _table_time(r["started_at"])),
        ("DURATION", 8, lambda r: describe_duration(incident_duration(r))),
        ("PEAK", 9, lambda r: describe_peak(r, "peak_value", units)),
        ("THRESHOLD", 9, lambda r: describe_peak(r, "threshold", units)),
        ("ALERTS", 6, lambda r: str(r["alert_count"])),
    ]


def _table_time(value: datetime | None) -> str:
    return readable(value, zone=False)  # the columns' heading says UTC


def _hours(span: timedelta) -> str:
    return f"{span.total_seconds() / 3600:g}h"


def _since(text: Any) -> Any:
    return parse_since(text) if isinstance(text, str) else text


class AlertsQuery(BaseModel):
    """The flags of ``scripts/alerts`` that choose what it shows (not settings)."""

    incidents: bool = Field(
        False, description="only the incidents (one row per episode of a rule on a sensor)"
    )
    alerts: bool = Field(False, description="only the raw alerts (the output before incidents)")
    since: Annotated[datetime | None, BeforeValidator(_since)] = Field(
        None,
        description="only alerts detected (detected_at) at or after WHEN, and incidents "
        "firing or changed (updated_at) since WHEN (default for incidents: the last "
        f"{_hours(RESOLVED_LOOKBACK)}): a duration back from now (90s, 30m, 1h, 2d) or an "
        "ISO-8601 timestamp (2026-01-01T10:00:00Z; no zone = UTC)",
    )
    sensor: list[str] = Field([], description="sensor_id")
    site: list[str] = Field([], description="site")
    severity: list[str] = Field([], description=f"severity: {', '.join(SEVERITIES)}")
    rule: list[str] = Field(
        [], description=f"rule: a rule's name, e.g. {', '.join(RULES)} (conf/rules.toml)"
    )
    limit: int = Field(
        DEFAULT_LIMIT,
        ge=0,
        description="show the newest N matching alerts and the first N incidents (0 = all)",
    )
    follow: bool = Field(
        False,
        description="after the newest alerts (oldest of them first), print new alerts as they "
        "land (with --incidents: each incident when it opens and when it resolves); waits "
        "for the lake and the table if they do not exist yet; Ctrl-C ends it",
    )
    json_lines: bool = Field(
        False,
        alias="json",
        description="JSON lines, one alert per line (with --incidents: one incident per "
        "line, with duration_seconds); one kind of record per run, so the alerts only "
        "unless --incidents",
    )

    @field_validator("severity")
    @classmethod
    def _known_severities(cls, given: list[str]) -> list[str]:
        bad = [v for v in values(given) if v not in SEVERITIES]
        if bad:
            raise ValueError(
                f"unknown value(s) {', '.join(map(repr, bad))}; choose from {', '.join(SEVERITIES)}"
            )
        return given

    @field_validator("rule")
    @classmethod
    def _rule_names(cls, given: list[str]) -> list[str]:
        bad = [v for v in values(given) if not is_rule_name(v)]
        if bad:
            raise ValueError(
                f"not a rule name: {', '.join(map(repr, bad))} (lower-case letters, digits and _)"
            )
        return given

    @model_validator(mode="after")
    def _one_view(self) -> AlertsQuery:
        if self.incidents and self.alerts:
            raise ValueError("--incidents and --alerts: choose one (neither shows both)")
        return self


def read_command_line(argv: Sequence[str] | None) -> tuple[dict[str, Any], AlertsQuery]:
    """The settings given as flags (--lake, --interval, ...) and what to show.

    Raises:
        SettingsError: a bad flag of the query, named.
    """
    flags, query = command_line(
        AlertsCliSettings,
        argv,
        prog="scripts/alerts",
        description="SensorWatch incidents (firing first, then those resolved recently) "
        "followed by the raw alerts (newest first, by detected_at). Reads the Delta tables "
        "directly (no Spark). Repeat a filter or separate values by commas to match any of "
        "them; filters apply to both. Exit status: 0, also when a table does not exist yet "
        "or is empty; 1 when the lake folder does not exist; 2 for a bad flag.",
        options=AlertsQuery,
        flags=FLAGS,
    )
    assert query is not None
    return flags, query


class Printer:
    """Writes alerts (or incidents) as an aligned table or as JSON lines."""

    def __init__(
        self,
        out: TextIO,
        as_json: bool,
        table: list[Column] | None = None,
        record: Callable[[dict[str, Any]], dict[str, Any]] = alert_record,
    ) -> None:
        """``table``: the columns (default: :func:`alert_table`'s)."""
        self.out, self.as_json = out, as_json
        self.table, self.record = table or alert_table(), record
        self._header_done = False

    def rows(self, rows: list[dict[str, Any]]) -> None:
        """Print rows (the table header once, before the first row)."""
        for row in rows:
            if self.as_json:
                self.out.write(json.dumps(self.record(row), ensure_ascii=False) + "\n")
                continue
            widths = [w for _, w, _ in self.table]
            if not self._header_done:
                self.out.write(line([h for h, _, _ in self.table], widths) + "\n")
                self._header_done = True
            self.out.write(line([cell(row) for _, _, cell in self.table], widths) + "\n")
        self.out.flush()

    def say(self, text: str) -> None:
        """A line of its own: a section title or a plain note."""
        self.out.write(text + "\n")
        self.out.flush()


def incident_printer(out: TextIO, as_json: bool, units: Mapping[str, str] | None = None) -> Printer:
    """A printer of incidents (``units``: each rule's, from the rules file)."""
    return Printer(out, as_json, incident_table(units), incident_record)


def alert_printer(out: TextIO, as_json: bool, units: Mapping[str, str] | None = None) -> Printer:
    """A printer of alerts (``units``: each rule's, from the rules file)."""
    return Printer(out, as_json, alert_table(units))


def _filter(args: AlertsQuery) -> AlertFilter:
    return AlertFilter(
        since=args.since,
        sensors=values(args.sensor),
        sites=values(args.site),
        severities=values(args.severity),
        rules=values(args.rule),
    )


def _no_lake(reader: LakeReader) -> int:
    print(f"alerts: no lake at {reader.root} (the streaming job creates it)", file=sys.stderr)
    return 1


def show(reader: LakeReader, where: AlertFilter, limit: int, printer: Printer) -> int:
    """Print the newest matching alerts once; returns the exit status."""
    if not reader.exists():
        return _no_lake(reader)
    result = query_alerts(reader, where, limit or None)
    if not result.exists:
        print(f"alerts: no alerts table in {reader.root} yet", file=sys.stderr)
        return 0
    printer.rows(result.rows)
    if not printer.as_json:
        print(_alerts_note(len(result.rows), result.total), file=sys.stderr)
    return 0


def _alerts_note(shown: int, total: int) -> str:
    if shown < total:
        return f"{shown} of {total} alerts (--limit)"
    return f"{shown} alert" + ("" if shown == 1 else "s")


def _resolved_since(where: AlertFilter) -> datetime:
    return where.since or utc_now() - RESOLVED_LOOKBACK


def _incidents_note(result: IncidentRows, where: AlertFilter) -> str:
    """``2 firing, 5 resolved in the last 24h`` (``, 3 shown (--limit)`` when cut)."""
    if where.since is None:
        window = f"in the last {_hours(RESOLVED_LOOKBACK)}"
    else:
        window = f"since {readable(where.since)}"
    note = f"{result.firing} firing, {result.resolved} resolved {window}"
    if len(result.rows) < result.total:
        note += f", {len(result.rows)} shown (--limit)"
    return note


def show_incidents(reader: LakeReader, where: AlertFilter, limit: int, printer: Printer) -> int:
    """Print the matching incidents once, firing first; returns the exit status."""
    if not reader.exists():
        return _no_lake(reader)
    result = query_incidents(reader, where, _resolved_since(where), limit or None)
    if not result.exists:
        print(f"alerts: no incidents table in {reader.root} yet", file=sys.stderr)
        return 0
    printer.rows(result.rows)
    if not printer.as_json:
        print("incidents: " + _incidents_note(result, where), file=sys.stderr)
    return 0


def show_both(
    reader: LakeReader,
    where: AlertFilter,
    limit: int,
    out: TextIO,
    units: Mapping[str, str] | None = None,
) -> int:
    """The ops view: an Incidents section, then the raw alerts; returns the exit status
    (``units``: each rule's, from the rules file).

    A table that does not exist yet is said on stderr, as in the one-table views.
    """
    if not reader.exists():
        return _no_lake(reader)
    incidents = query_incidents(reader, where, _resolved_since(where), limit or None)
    alerts = query_alerts(reader, where, limit or None)
    for name, result in ((INCIDENTS, incidents), (ALERTS, alerts)):
        if not result.exists:
            print(f"alerts: no {name} table in {reader.root} yet", file=sys.stderr)
    printer = incident_printer(out, as_json=False, units=units)
    if incidents.exists:
        printer.say("Incidents: " + _incidents_note(incidents, where))
        printer.rows(incidents.rows)
    if not alerts.exists:
        return 0
    printer = alert_printer(out, as_json=False, units=units)
    if incidents.exists:
        printer.say("")
    if not alerts.rows:
        printer.say("Alerts: none" + (" match" if where != AlertFilter() else ""))
    else:
        printer.say("Alerts, newest first: " + _alerts_note(len(alerts.rows), alerts.total))
        printer.rows(alerts.rows)
    return 0


class _Stop(Exception):
    """SIGTERM: leave the follow loop like Ctrl-C does."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


def follow(
    reader: LakeReader,
    where: AlertFilter,
    limit: int,
    printer: Printer,
    interval: float,
    incidents: bool = False,
) -> int:
    """Print the newest matching alerts (oldest first), then new ones as they land; with
    ``incidents``, the current incidents, then each one again when it opens or resolves.

    Polls the table's Delta version every ``interval`` seconds and reads the table only
    when the version moved; an alert is printed once, by its alert_id, an incident once
    per status.
    """
    name = INCIDENTS if incidents else ALERTS
    seen: set[Any] = set()
    version: int | None = None
    waiting_said = False
    first = True
    while True:
        table = reader.open(name)
        if table is None:
            if not waiting_said:
                print(f"alerts: waiting for {reader.table(name)} ...", file=sys.stderr)
                waiting_said = True
        else:
            table.update_incremental()
            if table.version() != version:
                version = table.version()
                if incidents:
                    rows = _fresh_incidents(reader, where, seen, limit, first)
                else:
                    rows = _fresh(reader, where, seen, limit if first else 0)
                printer.rows(rows)
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


def _fresh_incidents(
    reader: LakeReader, where: AlertFilter, seen: set[Any], limit: int, first: bool
) -> list[dict]:
    """Matching incidents in a status not printed yet: on the first look the current ones
    (firing first; the first ``limit``, 0 = all), later each change, oldest change first."""
    table = read_incidents(reader, where, _resolved_since(where))
    if table is None:
        return []
    rows = [r for r in table.to_pylist() if (r["incident_id"], r["status"]) not in seen]
    # Not shown because of --limit at start still counts as seen: never printed later.
    seen.update((r["incident_id"], r["status"]) for r in rows)
    if first:
        return rows[:limit] if limit else rows
    return sorted(rows, key=lambda r: (r["updated_at"] is None, r["updated_at"]))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    try:
        flags, args = read_command_line(argv)
        settings = load_settings(
            AlertsCliSettings,
            flags,
            SHARED_FILE,
            flags=FLAGS,
        )
    except SettingsError as exc:
        print(f"scripts/alerts: {exc}", file=sys.stderr)
        return 2
    known = known_rules(settings.alert_rules)
    unknown = [rule for rule in values(args.rule) if rule not in known]
    if unknown:
        print(
            f"scripts/alerts: --rule: unknown rule(s) {', '.join(map(repr, unknown))}; the "
            f"rules: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    reader = LakeReader(settings.lake)
    where = _filter(args)
    # One kind of record per JSON stream: the alerts, unless --incidents.
    only_alerts = args.alerts or (not args.incidents and (args.json_lines or args.follow))
    units = settings.alert_rules.units()
    printer = (alert_printer if not args.incidents else incident_printer)(
        sys.stdout, args.json_lines, units
    )
    if not args.follow:
        if args.incidents:
            return show_incidents(reader, where, args.limit, printer)
        if only_alerts:
            return show(reader, where, args.limit, printer)
        return show_both(reader, where, args.limit, sys.stdout, units)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        return follow(reader, where, args.limit, printer, settings.follow_interval, args.incidents)
    except (KeyboardInterrupt, _Stop):
        return 0


def run() -> None:
    """Entry point: exit quietly when the reader of our output goes away (``| head``)."""
    run_quietly_piped(main)


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
