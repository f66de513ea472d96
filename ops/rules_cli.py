"""``scripts/rules check [FILE ...]``: validate alert rules files without starting a job
(and without a JVM), the way the job validates its ``--rules`` file at start.

Prints one line per rule and the rule set's version, or the file, the rule and the
problem, and exits 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg, CliSubCommand

from conf.cli import read_command_line
from conf.paths import PROJECT_ROOT
from contract.rules.model import (
    AbsenceRule,
    DeviationRule,
    RateRule,
    ReadingRule,
    Rule,
    Scope,
    WindowRule,
)
from contract.rules.parsing import RulesError, read_rules
from ops.piping import run_quietly_piped

DEFAULT_RULES = PROJECT_ROOT / "conf" / "rules.toml"


def check(paths: list[Path]) -> int:
    """Validate each file; 0 when all are valid, else 1 (problems on stderr)."""
    status = 0
    for path in paths:
        try:
            rules = read_rules(path)
        except RulesError as exc:
            print(f"rules: {exc.source} is not valid:", file=sys.stderr)
            for problem in exc.problems:
                print(f"  {problem}", file=sys.stderr)
            status = 1
            continue
        if rules.off:
            print(f'{path}: alerting = "off", no rule runs; version {rules.version()}')
            continue
        print(f"{path}: {len(rules.rules)} rules, version {rules.version()}")
        for line in describe(rules.rules):
            print(f"  {line}")
    return status


class Check(BaseModel):
    """validate rules files and say what each rule watches"""

    files: CliPositionalArg[list[Path]] = Field(
        [],
        description=f"rules files (default {DEFAULT_RULES.relative_to(PROJECT_ROOT)})",
    )


class RulesCommand(BaseModel):
    """The commands of scripts/rules."""

    check: CliSubCommand[Check] = Field(description="validate rules files")


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    _, command = read_command_line(
        None,
        argv,
        prog="scripts/rules",
        description="Alert rules files (docs/alerting.md).",
        options=RulesCommand,
    )
    assert command is not None
    if command.check is None:
        print("scripts/rules: name a command: check (see scripts/rules --help)", file=sys.stderr)
        return 2
    return check(command.check.files or [DEFAULT_RULES])


def describe(rules: Iterable[Rule]) -> list[str]:
    """One line per rule, for people: what it watches and when it fires."""
    lines = []
    for rule in rules:
        scope = "" if rule.scope.everyone else " in " + _scope_text(rule.scope)
        if isinstance(rule, ReadingRule):
            what = f"a reading's {rule.field} {rule.op} {rule.threshold:g}"
        elif isinstance(rule, WindowRule):
            measured = "readings" if rule.aggregate == "count" else f"{rule.field}"
            what = (
                f"{rule.aggregate} {measured} over {rule.window} {rule.op} {rule.threshold:g} "
                f"(at least {rule.min_readings} readings)"
            )
        elif isinstance(rule, AbsenceRule):
            who = "a registered sensor" if rule.registered_only else "a sensor"
            what = f"{who} silent for {rule.after}"
        elif isinstance(rule, RateRule):
            sign = "+" if rule.trend == "rising" else "-"
            what = (
                f"{rule.field} {rule.trend} {sign}{rule.per_minute:g} {rule.unit} or faster "
                f"(slope over {rule.window}) for {rule.for_}"
            )
        elif isinstance(rule, DeviationRule):
            side = {"both": "either side of", "above": "above", "below": "below"}[rule.direction]
            what = (
                f"{rule.field} {rule.deviations:g} deviations {side} its own baseline "
                f"(over {rule.horizon}, warm after {rule.warm_up or rule.horizon}) "
                f"for {rule.for_}"
            )
        else:
            what = f"{rule.field} unchanged over {rule.window} ({rule.min_readings}+ readings)"
        extra = ""
        if isinstance(rule, ReadingRule | WindowRule):
            if rule.overrides:
                extra += f", {len(rule.overrides)} override(s)"
            if rule.registry_threshold:
                extra += f", the registry's {rule.registry_threshold} wins"
        lines.append(f"{rule.name} ({rule.kind}, {rule.severity}): {what}{scope}{extra}")
    return lines


def _scope_text(scope: Scope) -> str:
    parts = [
        f"{label} {', '.join(names)}"
        for label, names in (("sites", scope.sites), ("models", scope.models),
                             ("sensors", scope.sensors))
        if names
    ]  # fmt: skip
    return "; ".join(parts)


if __name__ == "__main__":
    run_quietly_piped(main)
