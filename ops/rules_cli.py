"""``scripts/rules check [FILE ...]``: validate alert rules files without starting a job
(and without a JVM), the way the job validates its ``--rules`` file at start.

Prints one line per rule and the rule set's version, or the file, the rule and the
problem, and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from conf.paths import PROJECT_ROOT
from contract.rules import RulesError, describe, read_rules
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
        print(f"{path}: {len(rules.rules)} rules, version {rules.version()}")
        for line in describe(rules.rules):
            print(f"  {line}")
    return status


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="scripts/rules", description="Alert rules files (docs/alerting.md)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    checking = commands.add_parser(
        "check", help="validate rules files and say what each rule watches"
    )
    checking.add_argument(
        "files", nargs="*", type=Path, default=[DEFAULT_RULES],
        help=f"rules files (default {DEFAULT_RULES.relative_to(PROJECT_ROOT)})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    return check(args.files)


if __name__ == "__main__":
    run_quietly_piped(main)
