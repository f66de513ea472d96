"""Rules files of a given size for the benchmark's rules part: the default file's rules
first, then more of every kind (reading rules on each field, window rules on every
aggregate the windows compute, stuck and absence rules), some scoped to a site or a
device model with overrides, their thresholds where they fire now and then."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from conf.paths import RULES_FILE
from contract.rules.model import COMPUTED
from contract.rules.parsing import read_rules

# Extra rules, cycled: (kind, the rule's own keys), thresholds moved a little per copy.
_KINDS: tuple[dict[str, Any], ...] = (
    {"kind": "reading", "field": "temperature_c", "op": ">=", "threshold": 40.0},
    {"kind": "reading", "field": "battery_pct", "op": "<", "threshold": 10.0},
    {"kind": "reading", "field": "humidity_pct", "op": ">", "threshold": 90.0},
    *({"kind": "window", "window": window, "aggregate": aggregate, "field": field,
       "op": "<" if aggregate == "count" else ">=",
       "threshold": 2.0 if aggregate == "count" else 30.0 if field == "temperature_c" else 85.0}
      for window in ("1m", "5m") for aggregate, field in sorted(COMPUTED, key=str)),
    {"kind": "stuck", "field": "temperature_c", "window": "5m"},
    {"kind": "absence", "after": "10 minutes"},
)  # fmt: skip


def rules_document(count: int) -> dict[str, Any]:
    """``count`` rules: the first of the default file, then extra ones."""
    default = [r.model_dump(mode="json", by_alias=True, exclude_defaults=True)
               for r in read_rules(RULES_FILE).rules]  # fmt: skip
    rules = default[: min(count, len(default))]
    kinds = itertools.cycle(_KINDS)
    for n in range(count - len(rules)):
        given = {k: v for k, v in next(kinds).items() if v is not None}  # count: no field
        rule = {"name": f"bench_{n:03d}", "severity": "warning", **given}
        if "threshold" in rule:
            rule["threshold"] = rule["threshold"] + (n % 7) * 0.5
        if n % 3 == 1:  # one in three scoped, with an override for a model
            rule["scope"] = {"sites": [f"site-{n % 5}"], "models": ["TempSense T100"]}
            if "threshold" in rule:
                rule["override"] = [{"models": ["TempSense T100"], "threshold": rule["threshold"]}]
        rules.append(rule)
    return {"rule": rules}


def _toml(value: Any) -> str:
    """A TOML value: the rules' strings, numbers, booleans, lists and inline tables."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)  # strings and numbers are written alike in JSON and TOML


def rules_toml(rules: Iterable[dict[str, Any]]) -> str:
    """The text of a rules file holding ``rules`` (each a ``[[rule]]`` table's keys)."""
    return "".join(
        "[[rule]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in rule.items()) + "\n"
        for rule in rules
    )


def write_rules(count: int, path: Path) -> Path:
    """Write a rules file of ``count`` rules at ``path`` (checked by reading it back)."""
    path.write_text(rules_toml(rules_document(count)["rule"]), encoding="utf-8")
    assert len(read_rules(path).rules) == count
    return path
