"""The notifier's loop: each sync reads ``incidents`` from the lake and posts them to
Alertmanager (ops/notifier/incident_alerts.py says how each looks), retrying while Alertmanager
is away and keeping, in ops/notifier/state.py, up to which change of the table it was
told everything; its real-time lane is ops/notifier/alert_stream.py. The command is
ops/notify.py."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
from deltalake.exceptions import DeltaError

from common.stop_signal import Stop
from conf.rules_watch import RulesFile
from conf.settings.notifier import NotifierSettings
from contract.alerts import (
    FIRING,
)
from contract.rules.model import RuleSet
from contract.times import as_utc, readable, utc_now
from lake.layout import INCIDENTS
from lake.reader import LakeReader
from ops.alert_reader import AlertFilter, read_incidents
from ops.alertmanager_api import Alertmanager, AlertmanagerRefused, AlertmanagerUnavailable
from ops.baselines import baseline_notes
from ops.notifier.alert_stream import Episodes, rule_holds
from ops.notifier.incident_alerts import (
    BASELINE,
    INCIDENT_LABEL,
    LATE_LABEL,
    POSTED_AS,
    incident_alert,
    inhibition_order,
    late_alert,
    posted_as,
)
from ops.notifier.metrics import SYNC, NotifierMetrics
from ops.notifier.state import StateUnusable, ToldUntil

# --once gives Alertmanager this long (retries included) before it gives up.
ONCE_TIMEOUT = 30.0


# Retries while Alertmanager is down: doubling from the first delay up to the cap.
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0


class LakeUnreadable(RuntimeError):
    """The incidents table exists but could not be read."""


# --- one sync and the loop -------------------------------------------------------------


@dataclass(frozen=True)
class Sync:
    """What one sync found and posted. ``state`` is ``posted``, or why nothing was:
    ``no-lake``, ``no-table`` or ``empty``. ``late``: resolved incidents reported late
    (:func:`late_alert`)."""

    state: str
    firing: frozenset[str] = frozenset()
    resolved: frozenset[str] = frozenset()
    late: frozenset[str] = frozenset()


@dataclass
class Notifier:
    """Syncs ``incidents`` with Alertmanager; ``log`` takes news, ``warn`` problems."""

    settings: NotifierSettings
    log: Callable[[str], None] = field(default=lambda line: print(line, flush=True))
    warn: Callable[[str], None] = field(
        default=lambda line: print(line, file=sys.stderr, flush=True)
    )
    now: Callable[[], datetime] = field(default=utc_now)
    max_backoff: float = MAX_BACKOFF
    once_timeout: float = ONCE_TIMEOUT
    # How long an episode reported late shows firing (default: the setting late_firing).
    brief_firing: timedelta | None = None
    # Given: the real-time lane (ops/notifier/alert_stream.py) learns the incidents here.
    episodes: Episodes | None = None
    metrics: NotifierMetrics | None = None
    _last: Sync | None = field(default=None, init=False)
    _rules_file: RulesFile | None = field(default=None, init=False)
    # Up to which change of the table Alertmanager has been told everything (see
    # ops/notifier/state.py); read from its file at the first sync.
    _told: datetime | None = field(default=None, init=False)
    _told_read: bool = field(default=False, init=False)
    _state_said: bool = field(default=False, init=False)
    # Why syncs did not go through since the last one that did: said in late reports.
    _missed: str | None = field(default=None, init=False)
    _missed_since: datetime | None = field(default=None, init=False)

    def rules(self) -> RuleSet:
        """The rules file as it says now: an edit is taken up within a second and said, a
        bad edit refused with one line while the last good rules go on (as in the job)."""
        if self._rules_file is None:
            self._rules_file = RulesFile(
                self.settings.rules, self.settings.alert_rules, self.log,
                on_change=self._rules_changed,
            )  # fmt: skip
        return self._rules_file.current()

    def _rules_changed(self, rules: RuleSet) -> None:
        if self.episodes is not None:
            self.episodes.set_holds(rule_holds(rules))

    @property
    def alertmanager(self) -> Alertmanager:
        """The Alertmanager posted to."""
        return Alertmanager.from_settings(self.settings)

    @property
    def dashboard_url(self) -> str | None:
        """The dashboard link of every alert; None when not set (or set empty)."""
        return (self.settings.dashboard_url or "").rstrip("/") or None

    @property
    def late_firing(self) -> timedelta:
        """How long an episode reported late shows firing."""
        if self.brief_firing is not None:
            return self.brief_firing
        return timedelta(seconds=self.settings.late_firing)

    @property
    def state(self) -> ToldUntil:
        """The file of this lake and Alertmanager (ops/notifier/state.py)."""
        settings = self.settings
        return ToldUntil.of(
            settings.notifier_state_dir, str(settings.lake), settings.alertmanager_url
        )

    def sync(self) -> Sync:
        """Read the incidents to post and post them.

        Raises:
            AlertmanagerUnavailable: a call to Alertmanager failed, counted in the
                metrics (nothing is lost: the next sync posts the then current state).
            LakeUnreadable: the table exists but reading it failed.
        """
        try:
            return self._sync()
        except AlertmanagerUnavailable as exc:
            # Here, not per call: a sync fails on its read of Alertmanager's alerts as
            # well as on a post, and both are what the retries are about.
            if self.metrics is not None:
                self.metrics.sync_failed(reachable=isinstance(exc, AlertmanagerRefused))
            self._missing(f"Alertmanager at {self.settings.alertmanager_url} did not answer")
            raise
        except LakeUnreadable:
            self._missing(f"the lake {self.settings.lake} could not be read")
            raise

    def _missing(self, why: str) -> None:
        if self._missed_since is None:
            self._missed_since = self.now()
        self._missed = why

    def _told_until(self, now: datetime) -> datetime:
        """Up to which change Alertmanager has been told everything. On a first start (no
        file) nothing is known: only what ended within ``late_firing`` is reported late,
        as an episode the job wrote already resolved."""
        if not self._told_read:
            self._told_read = True
            try:
                self._told = self.state.read()
            except StateUnusable as exc:
                self._say_state(exc)
            if self._told is not None and self._missed is None:
                self._missed, self._missed_since = "the notifier was not running", self._told
        return self._told if self._told is not None else now - self.late_firing

    def _say_state(self, exc: StateUnusable) -> None:
        if not self._state_said:
            self.warn(
                f"notify: {exc}; after a restart an episode that began and ended while it "
                "was out is not reported (set notifier_state_dir to a writable folder)"
            )
            self._state_said = True

    def _keep_told(self, told: datetime, rows: list[dict[str, Any]]) -> None:
        """After a sync went through: everything up to the newest change it read is told."""
        stamps = [as_utc(r["updated_at"]) for r in rows if r.get("updated_at") is not None]
        newest = max([told, *[s for s in stamps if s is not None]])
        if newest == self._told:
            return
        self._told = newest
        try:
            self.state.write(newest, str(self.settings.lake), self.settings.alertmanager_url)
        except StateUnusable as exc:
            self._say_state(exc)

    def _why_late(self, row: dict[str, Any], now: datetime) -> str:
        """Why a resolved incident was never notified firing, for its late report."""
        if self._missed is not None:
            since = self._missed_since or now
            return f"{self._missed} from {readable(since)} to {readable(now)}"
        if as_utc(row.get("created_at")) == as_utc(row["updated_at"]):
            return (
                "it began and ended between two updates of the incidents table "
                "(within one micro-batch or one availableNow run)"
            )
        return "no sync of the notifier saw it firing"

    def _sync(self) -> Sync:
        now = self.now()
        reader = LakeReader(self.settings.lake)
        if not reader.exists():
            return Sync("no-lake")
        resolved_since = now - timedelta(seconds=self.settings.resolved_lookback)
        try:
            table = read_incidents(reader, AlertFilter(), resolved_since)
        except (OSError, DeltaError, pa.ArrowException, ValueError) as exc:
            raise LakeUnreadable(f"cannot read {reader.table(INCIDENTS)}: {exc}") from exc
        told = self._told_until(now)
        if table is None:
            return self._synced(Sync("no-table"), now, [], told)
        rows = table.to_pylist()
        if self.episodes is not None:
            self.episodes.saw(rows)
        if not rows:
            return self._synced(Sync("empty"), now, rows, told)
        interval = self.settings.notify_interval
        rules = self.rules()
        firing = [r for r in rows if r["status"] == FIRING]
        others = [r for r in rows if r["status"] != FIRING]
        # What Alertmanager holds: needed for the ends, and, with the real-time lane on,
        # for the episodes the lane posted under an id of its own (posted_as).
        held = self.alertmanager.alerts() if others or self.episodes is not None else []
        if self.episodes is not None:
            made = {r["incident_id"] for r in rows}
            firing = [{**r, POSTED_AS: posted_as(r, held, made)} for r in firing]
            others = [{**r, POSTED_AS: posted_as(r, held, made)} for r in others]
        # A deviation incident says what the sensor's normal is (learned nothing since
        # the breach began: the normal its alerts were compared with).
        notes = baseline_notes(reader, rows, rules.rules if rules is not None else ())
        if notes:
            firing = [{**r, BASELINE: notes.get((r["sensor_id"], r["rule"]))} for r in firing]
            others = [{**r, BASELINE: notes.get((r["sensor_id"], r["rule"]))} for r in others]
        alerts = [incident_alert(row, now, interval, self.dashboard_url, rules) for row in firing]
        ended, late = self._ended(others, held, told, now, rules)
        alerts += ended
        for batch in inhibition_order(alerts, now):
            if batch:
                self._post(batch)
        if late and self.metrics is not None:
            self.metrics.reported_late(len(late))
        posted = Sync(
            "posted",
            frozenset(r["incident_id"] for r in firing),
            frozenset(r["incident_id"] for r in rows if r["status"] != FIRING),
            frozenset(late),
        )
        return self._synced(posted, now, rows, told)

    def _post(self, alerts: list[dict[str, Any]]) -> None:
        try:
            self.alertmanager.post_alerts(alerts)
        except AlertmanagerUnavailable as exc:
            if self.metrics is not None:
                self.metrics.failed(SYNC, isinstance(exc, AlertmanagerRefused))
            raise
        if self.metrics is not None:
            self.metrics.posted(SYNC)

    def _synced(
        self, result: Sync, now: datetime, rows: list[dict[str, Any]], told: datetime
    ) -> Sync:
        self._keep_told(told, rows)
        self._missed = self._missed_since = None
        if self.metrics is not None:
            self.metrics.synced(now, rows)
        return result

    def _ended(
        self,
        rows: list[dict[str, Any]],
        alerts_held: list[dict[str, Any]],
        told: datetime,
        now: datetime,
        rules: RuleSet,
    ) -> tuple[list[dict[str, Any]], set[str]]:
        """The alerts to post for resolved incidents, and which of them are late reports.

        Alertmanager notifies a group with every alert it holds for it. An ended alert
        posted again after its resolution went out would ride along, a second time, in
        the group's next notification: the one that announces a later episode of the same
        sensor and rule. So an incident's end is posted while Alertmanager still lists
        it unresolved, or when Alertmanager started after the incident was first written
        (its alerts live in memory: one restarted since may have lost the firing alert
        and never heard of its end, while its notification log, kept on disk, knows a
        firing notification went out).

        One first written after everything was last told (``told``) was never posted
        firing: no sync saw it before it ended, because the notifier, Alertmanager or the
        lake was out, or because it began and ended between two updates of the table.
        Its end alone would notify nobody, so it is reported late (:func:`late_alert`),
        once: from then on Alertmanager holds the late alert until it ends by itself,
        and the next syncs' ``told`` lies past it.
        """
        if not rows:
            return [], set()
        held = {a["labels"].get(INCIDENT_LABEL): a for a in alerts_held}
        interval, link = self.settings.notify_interval, self.dashboard_url
        started: datetime | None = None
        alerts: list[dict[str, Any]] = []
        late: set[str] = set()
        for row in rows:
            there = held.get(row.get(POSTED_AS) or row["incident_id"])
            first = as_utc(row.get("created_at"))
            if there is not None:
                if there["labels"].get(LATE_LABEL) != "true":  # a late one ends by itself
                    alerts.append(incident_alert(row, now, interval, link, rules))
            elif first is not None and first > told:
                why = self._why_late(row, now)
                alerts.append(late_alert(row, now, why, self.late_firing, link, rules))
                late.add(row["incident_id"])
            else:
                if started is None:
                    started = self.alertmanager.started_at()
                if (first or as_utc(row["updated_at"]) or now) < started:
                    alerts.append(incident_alert(row, now, interval, link, rules))
        return alerts, late

    def _report(self, result: Sync, always: bool = False) -> None:
        """One line when the outcome differs from the previous sync's (or ``always``)."""
        last, self._last = self._last, result
        if not always and result == last:
            return
        lake = self.settings.lake
        if result.state == "no-lake":
            self.log(f"notify: no lake at {lake} yet (the job creates it): nothing to send")
        elif result.state == "no-table":
            self.log(f"notify: no incidents table in {lake} yet: nothing to send")
        elif result.state == "empty":
            self.log("notify: no firing or recently resolved incidents: nothing to send")
        else:
            line = (
                f"notify: {len(result.firing)} firing, {len(result.resolved)} resolved "
                f"-> Alertmanager {self.settings.alertmanager_url}"
            )
            if last is not None:
                new = len(result.firing - last.firing)
                ended = len(result.resolved - last.resolved)
                if new or ended:
                    line += f" (new: {new} firing, {ended} resolved)"
            if result.late:
                line += (
                    f"; {len(result.late)} reported late (they ended before any "
                    'notification: labelled late="true")'
                )
            self.log(line)

    def run(self, stop: Stop) -> int:
        """Sync every ``notify_interval`` seconds until ``stop`` is set; returns 0.

        While Alertmanager is down, retries with a doubling delay (capped) and says so
        once, and once more when it answers again.
        """
        url = self.settings.alertmanager_url
        self.log(
            f"notify: keeping Alertmanager {url} in sync with the incidents of "
            f"{self.settings.lake} every {self.settings.notify_interval:g}s"
        )
        backoff, down, unreadable = FIRST_BACKOFF, False, False
        while not stop.is_set():
            try:
                result = self.sync()
            except AlertmanagerUnavailable as exc:
                if not down:
                    self.warn(
                        f"notify: {exc}; retrying "
                        f"(every {self.max_backoff:g}s at most), nothing is lost meanwhile"
                    )
                    down = True
                delay, backoff = backoff, min(backoff * 2, self.max_backoff)
            except LakeUnreadable as exc:
                if not unreadable:
                    self.warn(f"notify: {exc}; trying again every sync")
                    unreadable = True
                delay = self.settings.notify_interval
            else:
                if down:
                    self.log(f"notify: Alertmanager {url} answers again; caught up")
                backoff, down, unreadable = FIRST_BACKOFF, False, False
                self._report(result)
                delay = self.settings.notify_interval
            stop.wait(delay)
        return 0

    def run_once(self, stop: Stop) -> int:
        """One sync; retries while Alertmanager is down, for ``once_timeout`` at most.

        Returns 0 when synced (or nothing to send, or stopped), 1 when Alertmanager did
        not answer in time or the table could not be read, 2 at once when Alertmanager
        refused this client (credentials, certificate: settings that waiting won't mend).
        """
        deadline = time.monotonic() + self.once_timeout
        backoff, url = FIRST_BACKOFF, self.settings.alertmanager_url
        while True:
            try:
                result = self.sync()
            except LakeUnreadable as exc:
                self.warn(f"notify: {exc}")
                return 1
            except AlertmanagerRefused as exc:
                self.warn(f"notify: {exc}; nothing was sent")
                return 2
            except AlertmanagerUnavailable as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.warn(
                        f"notify: Alertmanager {url} did not answer within "
                        f"{self.once_timeout:g}s ({exc}); nothing was sent"
                    )
                    return 1
                if backoff == FIRST_BACKOFF:
                    self.warn(f"notify: {exc}; retrying")
                if stop.wait(min(backoff, left)):
                    return 0
                backoff = min(backoff * 2, self.max_backoff)
            else:
                self._report(result, always=True)
                return 0
