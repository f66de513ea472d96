"""The rules file as a running program follows it: an edit taken up once the file has
settled, a half-written or invalid one refused with its reason while the rules in force
stay (docs/alerting.md#the-rules-file)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from pathlib import Path

from contract.rules.model import RuleSet
from contract.rules.parsing import RulesError, read_rules

# How long a followed file must stay unchanged before an edit is taken (a program's own
# setting may say otherwise: the job's is ``rules_settle``). A file written in place is
# read while it is being written; a half that is valid TOML (cut after a whole rule, or
# ``threshold = 4`` cut from ``45.0``) would otherwise be taken.
SETTLE_S = 2.0


_State = tuple[int, int, int, str] | None
_UNSEEN: _State = (-1, -1, -1, "")


def _fingerprint(path: Path) -> _State:
    """What tells one state of a file from another: inode, modification time, size and a
    hash of the bytes (an mtime may be coarse; the file is small). None: no file."""
    try:
        stat = path.stat()
        data = path.read_bytes()
    except OSError:
        return None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size, hashlib.sha256(data).hexdigest())


class RulesFile:
    """A rules file followed while a program runs: an edit is taken once the file has
    stayed unchanged for ``settle_seconds`` and validates; a bad edit is refused with one
    line (per edit) and the last good rules keep running.

    ``first`` is what the program read, strictly, at start (a bad file stops it there).
    The file is looked at every ``check_seconds`` at most. Writing a temporary file and
    renaming it over the rules file (docs/alerting.md) is the way to edit it: a rename is
    atomic, so no reader ever sees half a file; the settle time covers the writes in place.
    """

    def __init__(
        self,
        path: Path,
        first: RuleSet,
        log: Callable[[str], None] | None = None,
        check_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[RuleSet], None] | None = None,
        settle_seconds: float = SETTLE_S,
    ) -> None:
        """``on_change``: called with each new rule set before it is taken up and said;
        if it raises, the edit is not taken, and is tried again at the next look."""
        self.path, self.log, self.check_seconds, self.clock = path, log, check_seconds, clock
        self.on_change, self.settle_seconds = on_change, settle_seconds
        self._rules = first
        self._lock = threading.Lock()  # a program's threads may ask at once (the notifier's)
        # The state last taken or refused: none yet, so the first look judges the file as
        # it is then (it may have changed since the program read it at start).
        self._judged: _State = _UNSEEN
        self._seen: _State = _UNSEEN  # the newest state seen, and since when
        self._seen_at = clock()
        self._checked_at = clock()
        self.changes = 0  # how many edits were taken up

    def current(self) -> RuleSet:
        """The rules as the file says now, or the last good ones."""
        with self._lock:
            return self._current()

    def _current(self) -> RuleSet:
        now = self.clock()
        if now - self._checked_at < self.check_seconds:
            return self._rules
        self._checked_at = now
        state = _fingerprint(self.path)
        if state != self._seen:  # changed since the last look: wait for it to settle
            self._seen, self._seen_at = state, now
        if state == self._judged or now - self._seen_at < self.settle_seconds:
            return self._rules
        try:
            rules = read_rules(self.path)
        except RulesError as exc:
            self._judged = state
            if self.log is not None:
                self.log(f"{exc}; the edit is refused, rules {self._rules.version()} keep running")
            return self._rules
        if rules.version() == self._rules.version():
            self._judged = state
            return self._rules
        if self.on_change is not None:
            self.on_change(rules)  # before the rules are taken: a failure takes nothing
        if self.log is not None:
            count = "alerting off" if rules.off else f"{len(rules.rules)} rule(s)"
            change = f"{self._rules.version()} -> {rules.version()}"
            self.log(f"rules {change} from {self.path}: {count}")
        self._judged, self._rules = state, rules
        self.changes += 1
        return rules
