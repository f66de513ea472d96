"""The real-time path as the job's main loop keeps it (jobs/realtime/path.py): whatever
the rules, the slots, the topics or its own failures, it never stops the job, and it
says each reason it does not run once. Stand-ins for the query and the broker, no JVM;
the last test watches the topics on the session's broker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from conf.paths import RULES_FILE
from conf.settings.base import load_settings
from conf.settings.job import JobSettings
from contract.rules.model import RuleSet
from contract.rules.parsing import parse_rules, read_rules
from jobs.realtime.path import EDIT_MARGIN_S, RealtimePath
from jobs.realtime.topic_watch import TopicWatch
from tests.support.polling import wait_until

RULES = read_rules(RULES_FILE)
OFF = parse_rules({"alerting": "off"})
WINDOW_ONLY = RuleSet(rule=tuple(RULES.of_kind("window")))
NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)  # the wall clock at the simulated clock's 0
SETTINGS = load_settings(
    JobSettings,
    {"topic": "readings", "alerts_topic": "alerts", "master": "local[3]", "realtime": True},
)


class Query:
    """A stand-in for a running StreamingQuery."""

    def __init__(self) -> None:
        self.isActive, self.lastProgress, self.error = True, None, None

    def exception(self) -> Exception | None:
        return self.error

    def stop(self) -> None:
        self.isActive = False


@dataclass
class Context:
    """What the path asks of the job's context."""

    rule_set: RuleSet = field(default_factory=lambda: RULES)
    settings: JobSettings = field(default_factory=lambda: SETTINGS)
    registry_version: int = 1
    lines: list[str] = field(default_factory=list)

    def echo(self, line: str) -> None:
        self.lines.append(line)

    def refresh_registry(self) -> int:
        return self.registry_version


class Broker:
    """The topics as a broker would tell them; ``create`` makes the alerts topic."""

    def __init__(self, partitions: int) -> None:
        self.topics = {"readings": partitions, "alerts": partitions}
        self.created: list[tuple[str, int]] = []

    def __call__(self, _client: dict) -> dict[str, int]:
        return dict(self.topics)

    def create(self, _client: dict, topic: str, partitions: int, **_: object) -> bool:
        self.created.append((topic, partitions))
        self.topics[topic] = partitions
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def path_of(
    ctx: Context,
    broker: Broker,
    clock: Clock,
    slots: int = 3,
    starter: Callable[[object, datetime | None], Query] | None = None,
    judged: list[datetime | None] | None = None,
) -> tuple[RealtimePath, list[Query]]:
    """The path with stand-ins; ``judged`` gets each start's ``judged_before``."""
    started: list[Query] = []

    def start(_ctx: object, judged_before: datetime | None) -> Query:
        started.append(Query())
        if judged is not None:
            judged.append(judged_before)
        return started[-1]

    watch = TopicWatch(ctx.settings, ctx.echo, 30.0, clock, broker, broker.create)
    path = RealtimePath(
        ctx, first_delay=1.0, max_delay=8.0, topics=watch, slots=lambda: slots,  # type: ignore[arg-type]
        starter=starter or start, now=lambda: NOW + timedelta(seconds=clock.now),
    )  # fmt: skip
    return path, started


def run_loop(path: RealtimePath, clock: Clock, seconds: float) -> None:
    """The main loop: a check a second."""
    end = clock.now + seconds
    while clock.now < end:
        clock.now += 1.0
        path.check(clock.now)


def test_with_no_reading_rule_the_path_idles_says_so_once_and_runs_again_on_an_edit() -> None:
    ctx, clock, broker = Context(rule_set=OFF), Clock(), Broker(2)
    path, started = path_of(ctx, broker, clock)

    assert path.begin(clock.now, 2) is None
    run_loop(path, clock, 10)
    assert started == [] and len(ctx.lines) == 1
    assert ctx.lines[0] == (
        f"realtime: rules {OFF.version()}: alerting is off; the real-time path idles until an "
        "edit brings one (the lake path runs on)"
    )

    ctx.rule_set = RULES
    run_loop(path, clock, 2)
    assert len(started) == 1 and path.query is started[0]
    assert ctx.lines[1:] == ["realtime: the real-time alert path runs again"]

    ctx.rule_set = WINDOW_ONLY  # an edit that leaves no reading rule: the query stops
    run_loop(path, clock, 5)
    assert not started[0].isActive and path.query is None and len(started) == 1
    assert ctx.lines[2:] == [
        f"realtime: rules {WINDOW_ONLY.version()}: they have no reading rule; the real-time "
        "path idles until an edit brings one (the lake path runs on)"
    ]


def test_after_an_edit_the_readings_judged_before_it_are_not_judged_again() -> None:
    """A start after an edit of the rules or the registry leaves out what came more than
    EDIT_MARGIN_S before the stop (the path judged it by the rules then in force); a
    failure's restart keeps that cut, and new partitions (never read) clear it."""
    ctx, broker, clock = Context(), Broker(partitions=2), Clock()
    judged: list[datetime | None] = []
    path, started = path_of(ctx, broker, clock, slots=8, judged=judged)
    path.begin(clock.now, 2)
    run_loop(path, clock, 5)
    ctx.rule_set = parse_rules({"rule": [{"name": "warm", "kind": "reading",
                                          "field": "temperature_c", "op": ">", "threshold": 1,
                                          "severity": "warning"}]})  # fmt: skip
    run_loop(path, clock, 1)  # at 6 s: stopped and started again
    edit = NOW + timedelta(seconds=6 - EDIT_MARGIN_S)
    assert judged == [None, edit] and started[0].isActive is False
    started[1].error, started[1].isActive = RuntimeError("boom"), False
    run_loop(path, clock, 3)
    ctx.registry_version = 2
    run_loop(path, clock, 10)
    registry_edit = NOW + timedelta(seconds=clock.now - 10 - EDIT_MARGIN_S + 1)
    assert judged[2] == edit and judged[3] == registry_edit, judged
    broker.topics["readings"] = 3
    run_loop(path, clock, 31)
    assert judged[-1] is None and len(judged) == 5


def test_a_start_that_fails_is_said_once_retried_with_a_growing_delay_and_never_raises() -> None:
    ctx, clock, broker = Context(), Clock(), Broker(2)
    attempts: list[float] = []
    fail = [True]

    def starter(_ctx: object, _judged_before: datetime | None) -> Query:
        attempts.append(clock.now)
        if fail[0]:
            raise RuntimeError("[UNSUPPORTED] Can only star expand struct data types\nat ...")
        return Query()

    path, _ = path_of(ctx, broker, clock, starter=starter)
    assert path.begin(clock.now, 2) is None
    run_loop(path, clock, 20)

    assert attempts == [0.0, 1.0, 3.0, 7.0, 15.0]  # 1, 2, 4, 8 s apart (8 at most)
    assert ctx.lines == [
        "realtime: the real-time alert path could not start ([UNSUPPORTED] Can only star "
        "expand struct data types); the lake path runs on, and the path tries again in 1 s"
    ]
    fail[0] = False
    run_loop(path, clock, 10)
    assert path.query is not None and path.restarts == 5
    assert ctx.lines[1:] == ["realtime: the real-time alert path runs again"]


def test_a_partition_more_than_the_slots_hold_stops_the_path_in_one_line() -> None:
    """Three slots hold the path's two tasks and the lake path's one; a third partition
    would take the lake path's: the path stops at the restart that follows, saying so,
    and looks again now and then (executors may join a cluster)."""
    ctx, clock, broker = Context(), Clock(), Broker(2)
    path, started = path_of(ctx, broker, clock, slots=3)
    assert path.begin(clock.now, 2) is started[0]

    broker.topics["readings"] = 3
    run_loop(path, clock, 120)

    assert not started[0].isActive and path.query is None and len(started) == 1
    assert len(ctx.lines) == 1
    assert ctx.lines[0].startswith(
        "realtime: the real-time alert path needs a task slot for each of the 3 partitions of "
        "readings for as long as it runs, and the lake path at least one more: local[3] "
        "offers 3. Give it 4 or more"
    )
    assert ctx.lines[0].endswith("; the path stops, the lake path runs on")


@pytest.mark.parametrize("slots", [2, 3])
def test_the_slots_are_counted_at_every_start(slots: int) -> None:
    """A restart for a rules edit counts them as the first start did."""
    ctx, clock, broker = Context(), Clock(), Broker(2)
    path, started = path_of(ctx, broker, clock, slots=slots)
    path.begin(clock.now, 2)
    ctx.rule_set = parse_rules(
        {"rule": [{"name": "hot", "kind": "reading", "field": "temperature_c", "op": ">=",
                   "threshold": 50, "severity": "critical"}]}
    )  # fmt: skip
    run_loop(path, clock, 3)
    assert len(started) == (2 if slots == 3 else 0)
    assert any("needs a task slot" in line for line in ctx.lines) == (slots == 2)


def test_a_deleted_alerts_topic_is_made_again_and_said_loudly() -> None:
    ctx, clock, broker = Context(), Clock(), Broker(2)
    path, _ = path_of(ctx, broker, clock)
    path.begin(clock.now, 2)
    del broker.topics["alerts"]
    run_loop(path, clock, 31)
    assert broker.created == [("alerts", 2)]
    assert [line for line in ctx.lines if "WARNING" in line] == [
        "realtime: WARNING the alerts topic alerts was gone (deleted while the job ran?); made "
        "it again with 2 partitions. What the path sent meanwhile is lost to its consumers; "
        "the alerts table has every alert"
    ]


def test_the_watch_on_a_real_broker_sees_new_partitions_and_makes_a_deleted_topic_again(
    kafka, new_topic
) -> None:
    """topic_partitions and create_topic against the session's broker, no Spark."""
    topic, alerts = new_topic("watch", 1), new_topic("watch-alerts", 1)
    settings = load_settings(
        JobSettings, {"bootstrap_servers": kafka.bootstrap, "topic": topic, "alerts_topic": alerts}
    )
    lines: list[str] = []
    watch = TopicWatch(settings, lines.append, 30.0)
    assert watch.partitions() == 1 and not watch.look(force=True)

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_partitions([NewPartitions(topic, 2)])[topic].result(timeout=60)
    admin.delete_topics([alerts])[alerts].result(timeout=60)
    wait_until(
        lambda: alerts not in admin.list_topics(timeout=10).topics, 60, "the alerts topic gone"
    )
    assert watch.look(force=True) and watch.partitions() == 2
    assert [line for line in lines if "WARNING" in line] == [
        f"realtime: WARNING the alerts topic {alerts} was gone (deleted while the job ran?); "
        "made it again with 2 partitions. What the path sent meanwhile is lost to its "
        "consumers; the alerts table has every alert"
    ]
    assert len(admin.list_topics(topic=alerts, timeout=10).topics[alerts].partitions) == 2
