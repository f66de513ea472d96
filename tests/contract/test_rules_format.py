"""The rules file's format (contract/rules/) and `scripts/rules check`: what is valid,
what each mistake says, which threshold applies to a sensor. No JVM."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from conf.rules_watch import RulesFile
from contract.alerts import OVERHEAT, SEVERITY, SILENT, SUSTAINED
from contract.rules.model import (
    COMPUTED,
    AbsenceRule,
    DeviationRule,
    RateRule,
    ReadingRule,
    StuckRule,
    WindowRule,
)
from contract.rules.parsing import RulesError, parse_rules, read_rules

DEFAULT = PROJECT_ROOT / "conf" / "rules.toml"
RULES = PROJECT_ROOT / "scripts" / "rules"


def one(**rule: object) -> dict:
    """A document of one rule."""
    return {"rule": [rule]}


def problems(data: dict) -> list[str]:
    with pytest.raises(RulesError) as caught:
        parse_rules(data, "rules file x.toml")
    assert str(caught.value).startswith("rules file x.toml: ")
    return caught.value.problems


READING = {"name": "hot", "kind": "reading", "field": "temperature_c", "op": ">=",
           "threshold": 40.0, "severity": "critical"}  # fmt: skip


def test_the_default_file_holds_todays_rules_and_the_examples() -> None:
    rules = read_rules(DEFAULT).by_name()

    assert list(rules)[:3] == [OVERHEAT, SUSTAINED, SILENT]
    overheat, sustained, silent = rules[OVERHEAT], rules[SUSTAINED], rules[SILENT]
    assert isinstance(overheat, ReadingRule) and (overheat.field, overheat.op) == (
        "temperature_c", ">=")  # fmt: skip
    assert overheat.threshold == 45.0 and overheat.registry_threshold == "max_temp_c"
    assert isinstance(sustained, WindowRule)
    assert (sustained.window, sustained.aggregate, sustained.threshold) == ("5m", "avg", 35.0)
    assert sustained.min_readings == 3
    assert isinstance(silent, AbsenceRule) and silent.after == "5 minutes"
    assert silent.registered_only
    for name in (OVERHEAT, SUSTAINED, SILENT):  # the severities Alertmanager routes on
        assert rules[name].severity == SEVERITY[name]
    assert isinstance(rules["battery_low"], ReadingRule)
    assert rules["battery_low"].field == "battery_pct"
    assert isinstance(rules["humidity_high"], WindowRule)
    assert rules["humidity_high"].field == "humidity_pct"
    # The demo's rules that learn (the producer's warmings set them off), set to show
    # within an hour: the kinds' defaults would take a day.
    rising, off_normal = rules["temperature_rising"], rules["temperature_off_normal"]
    assert isinstance(rising, RateRule) and (rising.per_minute, rising.for_) == (0.15, "10 minutes")
    assert isinstance(off_normal, DeviationRule)
    assert (off_normal.horizon, off_normal.warm_up, off_normal.for_) == (
        "1 hour", "30 minutes", "10 minutes")  # fmt: skip
    assert (off_normal.direction, off_normal.deviations, off_normal.min_sd) == ("above", 3.0, 0.8)


def test_the_default_files_commented_examples_are_valid_rules(tmp_path: Path) -> None:
    """The rules shown commented out at the end of the default file work once uncommented."""
    text = DEFAULT.read_text(encoding="utf-8")
    head, examples = text.split("# More shapes", 1)
    uncommented = "\n".join(
        line[2:] for line in examples.splitlines() if line.startswith("# ") or line == "#"
    ).replace("\n#\n", "\n\n")
    path = tmp_path / "rules.toml"
    path.write_text(head + uncommented.split("\n", 2)[2], encoding="utf-8")

    rules = read_rules(path).by_name()
    assert (rules["humidity_low"].aggregate, rules["humidity_low"].field) == ("min", "humidity_pct")
    assert rules["humidity_low"].scope.models == ("ClimaTrack CX",)
    assert isinstance(rules["temperature_stuck"], StuckRule)
    assert len(rules) == 9  # the default file's 7 and the 2 examples


def test_every_kind_parses_with_its_defaults() -> None:
    rules = parse_rules({"rule": [
        READING,
        {"name": "dry", "kind": "window", "window": "1m", "aggregate": "avg",
         "field": "humidity_pct", "op": "<", "threshold": 10, "severity": "warning"},
        {"name": "few", "kind": "window", "window": "5m", "aggregate": "count", "op": "<",
         "threshold": 3, "severity": "warning"},
        {"name": "gone", "kind": "absence", "after": "10 minutes", "severity": "warning"},
        {"name": "frozen", "kind": "stuck", "field": "temperature_c", "window": "5m",
         "severity": "warning"},
    ]}).rules  # fmt: skip

    assert [r.kind for r in rules] == ["reading", "window", "window", "absence", "stuck"]
    assert rules[1].min_readings == 1 and rules[0].resolve_after == "5 minutes"
    assert isinstance(rules[4], StuckRule) and rules[4].min_readings == 3
    assert rules[3].registered_only and rules[0].scope.everyone


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"colour": "red"}, "rule 'hot': colour: unknown field"),
        ({"kind": "sometimes"}, "rule 'hot': unknown kind 'sometimes'"),
        ({"field": "pressure"}, "rule 'hot': field: "),
        ({"threshold": "hot"}, "rule 'hot': threshold: "),
        ({"threshold": float("nan")}, "rule 'hot': threshold: must be a finite number"),
        ({"op": "=>"}, "rule 'hot': op: "),
        ({"severity": "page"}, "rule 'hot': severity: unknown severity 'page'"),
        ({"resolve_after": "5 mins"}, "rule 'hot': resolve_after: expected an interval"),
        ({"name": "Hot Rule"}, "rule 'Hot Rule': name: lower-case letters"),
        ({"name": 7}, "[[rule]] number 1: name: "),
        ({"summary": "{sensor} is hot"}, "rule 'hot': summary: unknown placeholder {sensor}"),
        ({"override": [{"threshold": 1}]}, "rule 'hot': override 1: "),
        ({"kind": "window", "window": "1m", "aggregate": "median", "field": "battery_pct"},
         "rule 'hot': aggregate: "),
        ({"kind": "window", "window": "10m", "aggregate": "min", "field": "battery_pct"},
         "rule 'hot': window: "),
        ({"override": [{"sites": ["a"], "models": ["m"], "threshold": 1}]},
         "rule 'hot': override 1: "),
    ],
)  # fmt: skip
def test_each_mistake_names_the_rule_and_the_problem(change: dict, expected: str) -> None:
    found = problems(one(**{**READING, **change}))

    assert any(p.startswith(expected) for p in found), found


def test_every_aggregate_of_every_field_and_any_field_stuck() -> None:
    window = {"name": "w", "kind": "window", "window": "5m", "op": "<", "threshold": 1,
              "severity": "warning"}  # fmt: skip
    for aggregate in ("avg", "min", "max", "range"):
        for field in ("temperature_c", "humidity_pct", "battery_pct"):
            rule = parse_rules(one(**window, aggregate=aggregate, field=field)).rules[0]
            assert (rule.aggregate, rule.field) in COMPUTED
    stuck = {"name": "frozen", "kind": "stuck", "window": "5m", "severity": "warning"}

    assert parse_rules(one(**stuck, field="temperature_c")).rules[0].unit == "°C"
    assert parse_rules(one(**stuck, field="humidity_pct")).rules[0].unit == "%"
    assert problems(one(**stuck, field="pressure"))


def test_a_window_rule_counts_or_measures_a_field_and_silences_last_a_pane() -> None:
    window = {"name": "w", "kind": "window", "window": "1m", "op": ">", "threshold": 1,
              "severity": "warning"}  # fmt: skip
    assert any("needs a field" in p for p in problems(one(**window, aggregate="avg")))
    assert any(
        "give no field" in p
        for p in problems(one(**window, aggregate="count", field="temperature_c"))
    )
    assert any(
        "window: " in p for p in problems(one(**{**window, "window": "2m"}, aggregate="max",
                                               field="battery_pct")))  # fmt: skip
    silent = {"name": "s", "kind": "absence", "severity": "warning", "after": "30 seconds"}
    assert problems(one(**silent)) == ["rule 's': after: must be at least '1 minute'"]


def test_every_problem_of_a_file_is_named_at_once_duplicates_too() -> None:
    found = problems({"rule": [READING, {**READING, "op": "=>"}, {"name": "x"}]})

    assert found[0] == "rule 'hot': defined more than once"
    assert any(p.startswith("rule 'hot': op:") for p in found)
    assert "rule 'x': no kind; one of reading, window, absence, stuck, rate, deviation" in found


def test_a_file_that_is_not_toml_or_not_there_says_so(tmp_path: Path) -> None:
    broken = tmp_path / "rules.toml"
    broken.write_text("[[rule]\nname = 'x'\n", encoding="utf-8")
    with pytest.raises(RulesError, match=r"rules file .*rules.toml: not TOML"):
        read_rules(broken)
    with pytest.raises(RulesError, match="No such file"):
        read_rules(tmp_path / "missing.toml")


def test_the_most_specific_threshold_wins_and_says_where_it_came_from() -> None:
    (rule,) = parse_rules(one(**READING, registry_threshold="max_temp_c", override=[
        {"sites": ["Cold Store"], "threshold": 8.0},
        {"models": ["TX-9"], "threshold": 50.0},
        {"sensors": ["sensor-0007"], "threshold": 60.0},
    ])).rules  # fmt: skip
    assert isinstance(rule, ReadingRule)

    assert rule.threshold_for("sensor-0001", "Plant", None) == (40.0, "rule")
    assert rule.threshold_for("sensor-0001", "Cold Store", None) == (8.0, "site Cold Store")
    assert rule.threshold_for("sensor-0001", "Cold Store", "TX-9") == (50.0, "model TX-9")
    assert rule.threshold_for("sensor-0007", "Cold Store", "TX-9") == (60.0, "sensor sensor-0007")
    assert rule.threshold_for("sensor-0007", "Cold Store", "TX-9", {"max_temp_c": 70.0}) == (
        70.0, "registry max_temp_c")  # fmt: skip
    assert rule.breached(40.0, 40.0) and not rule.breached(39.9, 40.0)


def test_a_scope_covers_its_sites_models_and_sensors() -> None:
    (rule,) = parse_rules(one(**READING, scope={"sites": ["A"], "sensors": ["s9"]})).rules

    assert rule.scope.covers("s1", "A", None) and rule.scope.covers("s9", "B", None)
    assert not rule.scope.covers("s1", "B", "TX-9") and not rule.scope.covers("s1", None, None)


def test_annotations_fill_their_placeholders() -> None:
    (rule,) = parse_rules(one(**READING, summary="{sensor_id} at {site}: {value} >= {threshold}",
                              runbook_url="https://wiki.example/hot")).rules  # fmt: skip

    assert rule.annotations({"sensor_id": "s1", "site": "A", "value": 41.5, "threshold": 40.0}) == {
        "summary": "s1 at A: 41.5 >= 40.0", "runbook_url": "https://wiki.example/hot"}  # fmt: skip


def test_the_version_changes_with_what_the_rules_say_only() -> None:
    base = parse_rules(one(**READING)).version()

    assert parse_rules(one(**dict(reversed(READING.items())))).version() == base
    assert parse_rules(one(**{**READING, "threshold": 41.0})).version() != base
    # Of some kinds only: what the real-time path restarts on (its reading rules).
    window = {"name": "w", "kind": "window", "window": "1m", "aggregate": "count", "op": "<",
              "threshold": 2, "severity": "warning"}  # fmt: skip
    both = parse_rules({"rule": [READING, window]})
    moved = parse_rules({"rule": [READING, {**window, "threshold": 3}]})
    assert (
        both.version("reading") == moved.version("reading") == parse_rules(one(**READING)).version()
    )
    assert both.version() != moved.version()


def test_scripts_rules_check(tmp_path: Path) -> None:
    good = subprocess.run([RULES, "check"], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good.stderr
    assert (
        "7 rules, version " in good.stdout and "overheat_reading (reading, critical)" in good.stdout
    )

    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "hot"\nkind = "reading"\n', encoding="utf-8")
    done = subprocess.run([RULES, "check", bad], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert f"rules: rules file {bad} is not valid:" in done.stderr
    assert "  rule 'hot': field: Field required" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_followed_file_takes_an_edit_refuses_a_bad_one_and_keeps_the_last_good(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rules.toml"
    text = DEFAULT.read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    first = read_rules(path)
    now, lines = [0.0], []
    followed = RulesFile(
        path, first, lines.append, check_seconds=1.0, clock=lambda: now[0], settle_seconds=2.0
    )

    path.write_text(text.replace("threshold = 45.0", "threshold = 47.5"), encoding="utf-8")
    assert followed.current() is first  # not looked at again within a second
    now[0] = 1.5
    assert followed.current() is first  # changed: it must stay so for 2 s first
    now[0] = 3.5
    edited = followed.current()
    assert edited.by_name()[OVERHEAT].threshold == 47.5
    assert lines == [
        f"rules {first.version()} -> {edited.version()} from {path}: {len(edited.rules)} rule(s)"
    ]
    assert followed.changes == 1

    path.write_text(text.replace('kind = "window"', 'kind = "sometimes"', 1), encoding="utf-8")
    for moment in (5.0, 7.5, 9.0, 10.5):  # one line for the bad edit, however often looked at
        now[0] = moment
        assert followed.current() is edited
    assert len(lines) == 2
    assert lines[1].startswith(f"rules file {path}: rule 'sustained_high': unknown kind")
    assert lines[1].endswith(f"the edit is refused, rules {edited.version()} keep running")

    path.unlink()
    now[0] = 12.0
    assert followed.current() is edited  # a file gone: the last good rules run on
    assert followed.changes == 1
