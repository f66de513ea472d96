"""A rules file read and validated into a :class:`RuleSet` (model.py): every problem
named with its file, its rule and its field; nothing here needs a JVM (``scripts/rules
check FILE``).

A file with no rule is refused (a file caught half-written may hold only its opening
comments) unless it says ``alerting = "off"``: then no rule runs, whatever it lists.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contract.rules.model import KINDS, RuleSet


class RulesError(ValueError):
    """A rules file cannot be used: ``source`` (the file) and each problem, naming its rule."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source, self.problems = source, problems
        super().__init__(f"{source}: " + "; ".join(problems))


def _where(rules: list[Any], loc: tuple[Any, ...]) -> str:
    """'rule 'battery_low' (the 4th [[rule]]), threshold' for a pydantic error location."""
    if len(loc) < 2 or loc[0] != "rule" or not isinstance(loc[1], int):
        return ".".join(str(part) for part in loc) or "the file"
    index = loc[1]
    given = rules[index] if index < len(rules) else None
    name = given.get("name") if isinstance(given, dict) else None
    # The kind's union tag (e.g. "reading") is pydantic's, not the file's: leave it out.
    rest = [str(p) for p in loc[2:]]
    if rest[:1] and rest[0] in KINDS:
        rest = rest[1:]
    if rest[:1] == ["override"] and len(rest) > 1:
        rest = [f"override {int(rest[1]) + 1}", *rest[2:]]
    who = f"rule {name!r}" if isinstance(name, str) else f"[[rule]] number {index + 1}"
    return who + (f": {'.'.join(rest)}" if rest else "")


def _problem(error: dict[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "union_tag_invalid":
        given = error.get("input")
        kind = given.get("kind") if isinstance(given, dict) else ""
        return f"unknown kind {kind!r}; known: {', '.join(KINDS)}"
    if error["type"] == "union_tag_not_found":
        return f"no kind; one of {', '.join(KINDS)}"
    if error["type"] == "string_pattern_mismatch" and error["loc"][-1:] == ("name",):
        return "lower-case letters, digits and _, from a letter (it is the alertname)"
    if error["type"] == "literal_error":
        return f"{message} (got {error.get('input')!r})"
    return message


def _duplicates(given: list[Any]) -> list[str]:
    names = [r.get("name") for r in given if isinstance(r, dict)]
    twice = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    return [f"rule {name!r}: defined more than once" for name in twice]


# Why a file without rules is refused, and what says "no alerting" on purpose.
NO_RULES = (
    "no [[rule]]: a file without rules is refused (one caught while being written may hold "
    'only its opening comments); to run without alerting on purpose, say alerting = "off"'
)


def parse_rules(data: dict[str, Any], source: str = "the rules") -> RuleSet:
    """A rule set from a parsed TOML document; RulesError names ``source``, and the rule
    of every problem found. A document without rules is refused unless it says
    ``alerting = "off"``, which gives a rule set of no rules."""
    given = data.get("rule") if isinstance(data.get("rule"), list) else []
    problems = _duplicates(given)
    try:
        rules = RuleSet.model_validate(data)
    except ValidationError as exc:
        problems += [f"{_where(given, e['loc'])}: {_problem(e)}" for e in exc.errors()]
    else:
        if not rules.rules and not rules.off:
            problems.append(NO_RULES)
    if problems:
        raise RulesError(source, problems)
    return rules.model_copy(update={"rules": ()}) if rules.off else rules


def rules_from_json(text: str, source: str = "the rules") -> RuleSet:
    """A rule set from the JSON of its rules (a ``rule_changes`` row's ``rules``; an empty
    list is a file that turned alerting off)."""
    given = json.loads(text)
    return parse_rules({"rule": given} if given else {"alerting": "off"}, source)


def read_rules(path: Path) -> RuleSet:
    """The rules file at ``path``, validated.

    Raises:
        RulesError: the file cannot be read, is not TOML, or a rule is wrong.
    """
    source = f"rules file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise RulesError(source, [reason]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(source, [f"not TOML: {exc}"]) from None
    return parse_rules(data, source)
