"""A rules file followed while a program runs (conf/rules_watch.py RulesFile) is taken only
whole: an edit once the file has stayed unchanged for the settle time and validates, a
file without rules only when it says alerting is off. A simulated clock, no JVM."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from conf.paths import RULES_FILE
from conf.rules_watch import RulesFile
from conf.settings.base import SettingsError, load_settings
from conf.settings.job import JobSettings
from contract.alerts import OVERHEAT
from contract.rules.parsing import NO_RULES, RulesError, parse_rules, read_rules, rules_from_json

TEXT = RULES_FILE.read_text(encoding="utf-8")
FIRST_RULE_END = TEXT.index("\n[[rule]]", TEXT.index("\n[[rule]]") + 1)  # after a whole rule
COMMENTS_END = TEXT.index("\n[[rule]]") // 2  # inside the opening comments
# An edit that adds a rule whose threshold is its last line: cut there, 45.0 reads as 4.
HOTTER = (
    TEXT
    + """
[[rule]]
name = "server_room_hot"
kind = "reading"
field = "temperature_c"
op = ">="
severity = "critical"
threshold = 45.0
"""
)


class Clock:
    """A clock the test moves; the follower looks at the file at most every second."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def follow(path: Path, settle: float = 5.0) -> tuple[RulesFile, Clock, list[str]]:
    path.write_text(TEXT, encoding="utf-8")
    clock, lines = Clock(), []
    followed = RulesFile(
        path, read_rules(path), lines.append, check_seconds=1.0, clock=clock, settle_seconds=settle
    )
    return followed, clock, lines


def looks(followed: RulesFile, clock: Clock, until: float) -> set[str]:
    """Look at the file every half second until ``until``: the versions it ran with."""
    seen = set()
    while clock.now < until:
        clock.now += 0.5
        seen.add(followed.current().version())
    return seen


@pytest.mark.parametrize(
    ("whole", "cut"),
    [
        (TEXT.replace("threshold = 45.0", "threshold = 46.0"), FIRST_RULE_END),
        (HOTTER, len(HOTTER) - len("5.0\n")),
    ],
    ids=["after-a-whole-rule", "threshold-4-of-45.0"],
)
def test_a_file_written_in_place_in_two_halves_is_never_taken_half(
    tmp_path: Path, whole: str, cut: int
) -> None:
    """The halves 3 s apart, a settle time of 5 s: what runs is the old rules, then the
    whole new file, never its first half (a valid rules file either way)."""
    path = tmp_path / "rules.toml"
    followed, clock, lines = follow(path)
    first = followed.current()
    half = whole[:cut]
    assert parse_rules(tomllib.loads(half)).version() != parse_rules(tomllib.loads(whole)).version()

    path.write_text(half, encoding="utf-8")
    seen = looks(followed, clock, clock.now + 3.0)
    with path.open("a", encoding="utf-8") as rest:  # the second half, appended in place
        rest.write(whole[cut:])
    seen |= looks(followed, clock, clock.now + 10.0)

    taken = followed.current()
    assert taken.version() == parse_rules(tomllib.loads(whole)).version()
    assert seen == {first.version(), taken.version()}
    count = len(taken.rules)
    assert lines == [f"rules {first.version()} -> {taken.version()} from {path}: {count} rule(s)"]


def test_a_half_left_longer_than_the_settle_time_is_taken_so_renaming_is_the_way(
    tmp_path: Path,
) -> None:
    """What the settle time cannot tell: a half that stays as it is for longer looks like a
    finished edit (docs/alerting.md says to write a temporary file and rename it)."""
    path = tmp_path / "rules.toml"
    followed, clock, _ = follow(path, settle=5.0)
    path.write_text(TEXT[:FIRST_RULE_END], encoding="utf-8")
    looks(followed, clock, clock.now + 7.0)
    assert [r.name for r in followed.current().rules] == [OVERHEAT]

    renamed = tmp_path / ".rules.toml.new"
    renamed.write_text(TEXT, encoding="utf-8")
    renamed.replace(path)
    looks(followed, clock, clock.now + 7.0)
    assert len(followed.current().rules) == 7  # the default file's, whole


def test_a_file_cut_inside_its_opening_comments_is_refused_once_and_the_rules_run_on(
    tmp_path: Path,
) -> None:
    """No rules: refused like any bad edit, in one line, however long it stays so."""
    path = tmp_path / "rules.toml"
    followed, clock, lines = follow(path, settle=2.0)
    first = followed.current()

    path.write_text(TEXT[:COMMENTS_END], encoding="utf-8")
    seen = looks(followed, clock, clock.now + 30.0)

    assert seen == {first.version()} and followed.changes == 0
    assert lines == [
        f"rules file {path}: {NO_RULES}; the edit is refused, rules {first.version()} keep running"
    ]
    path.write_text(TEXT, encoding="utf-8")  # the rest arrives: the same rules, nothing said
    looks(followed, clock, clock.now + 5.0)
    assert followed.current().version() == first.version() and len(lines) == 1


def test_a_file_that_turns_alerting_off_is_taken_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    followed, clock, lines = follow(path, settle=2.0)
    first = followed.current()

    path.write_text('# maintenance window\nalerting = "off"\n' + TEXT, encoding="utf-8")
    looks(followed, clock, clock.now + 5.0)

    off = followed.current()
    assert off.off and off.rules == ()
    assert lines == [f"rules {first.version()} -> {off.version()} from {path}: alerting off"]


def test_an_edit_whose_record_fails_is_not_taken_and_is_tried_again(tmp_path: Path) -> None:
    """on_change (the job records the rule set in rule_changes) comes before the rules
    are taken: what runs is always what was recorded."""
    path = tmp_path / "rules.toml"
    path.write_text(TEXT, encoding="utf-8")
    clock, failures = Clock(), [RuntimeError("the lake is away")]

    def record(_rules: object) -> None:
        if failures:
            raise failures.pop()

    followed = RulesFile(
        path, read_rules(path), None, clock=clock, on_change=record, settle_seconds=1.0
    )
    first = followed.current()
    path.write_text(TEXT.replace("threshold = 45.0", "threshold = 46.0"), encoding="utf-8")
    with pytest.raises(RuntimeError, match="the lake is away"):
        looks(followed, clock, clock.now + 5.0)
    assert followed.current() is first and followed.changes == 0
    looks(followed, clock, clock.now + 2.0)
    assert followed.current().by_name()[OVERHEAT].threshold == 46.0 and followed.changes == 1


def test_no_rules_is_refused_unless_alerting_is_off_on_purpose() -> None:
    with pytest.raises(RulesError) as caught:
        parse_rules({}, "rules file x.toml")
    assert caught.value.problems == [NO_RULES]
    assert 'alerting = "off"' in NO_RULES

    off = parse_rules({"alerting": "off"})
    assert off.off and off.rules == ()
    # The listed rules are still checked, and none of them runs.
    listed = parse_rules({"alerting": "off", **tomllib.loads(TEXT)})
    assert listed.rules == () and listed.version() == off.version()
    with pytest.raises(RulesError, match="rule 'hot': field"):
        parse_rules({"alerting": "off", "rule": [{"name": "hot", "kind": "reading"}]})
    with pytest.raises(RulesError, match=r"alerting: Input should be 'on' or 'off'"):
        parse_rules({"alerting": "maybe", **tomllib.loads(TEXT)})


def test_a_rule_set_comes_back_from_its_json_off_included() -> None:
    rules = read_rules(RULES_FILE)
    text = json.dumps(
        [r.model_dump(mode="json", by_alias=True) for r in rules.rules], sort_keys=True
    )
    assert rules_from_json(text) == rules
    assert rules_from_json("[]").off


def test_a_job_started_on_a_file_without_rules_is_a_settings_error_naming_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(TEXT[:COMMENTS_END], encoding="utf-8")
    with pytest.raises(SettingsError) as caught:
        load_settings(JobSettings, {"rules": str(path)})
    assert f"--rules (SENSORWATCH_RULES): rules file {path}: no [[rule]]" in str(caught.value)

    path.write_text('alerting = "off"\n', encoding="utf-8")
    assert load_settings(JobSettings, {"rules": str(path)}).alert_rules.off
