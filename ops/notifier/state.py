"""The one thing the notifier remembers across a restart: up to which change of the
incidents table Alertmanager has been told everything (ops/notifier/loop.py).

Alertmanager forgets an alert once it has ended, and says nothing of what it notified, so
neither it nor the table can tell the notifier whether an episode that is already over
when it looks was ever paged. This instant can: the newest ``updated_at`` (the job's
clock) among the rows of the last sync that went through. An incident first written
after it (``created_at`` later) was never posted firing by any sync; if it already ended,
the notifier reports it late instead of dropping it.

One small JSON file per lake and Alertmanager, replaced atomically (a kill -9 leaves the
old one or the new one). A file that cannot be read or written is said once by the caller
and does not stop the notifier: it then decides as on its first start.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from contract.times import as_utc, parse_instant


class StateUnusable(OSError):
    """The state file could not be read or written; the message names it."""


@dataclass(frozen=True)
class ToldUntil:
    """The file that keeps the instant, for one lake and one Alertmanager."""

    path: Path

    @classmethod
    def of(cls, folder: Path, lake: str, alertmanager_url: str) -> ToldUntil:
        """The file in ``folder`` of this lake and Alertmanager (named by a digest of both:
        two notifiers of two lakes, or of two Alertmanagers, never share one)."""
        key = f"{lake}\n{alertmanager_url.rstrip('/')}".encode()
        return cls(folder / f"told-{hashlib.sha256(key).hexdigest()[:16]}.json")

    def read(self) -> datetime | None:
        """The instant kept; None when there is no file yet (a first start).

        Raises:
            StateUnusable: the file exists but cannot be read or makes no sense.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateUnusable(f"cannot read {self.path}: {exc}") from exc
        try:
            return parse_instant(json.loads(text)["told_until"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StateUnusable(f"cannot read {self.path}: {exc!r}") from exc

    def write(self, moment: datetime, lake: str, alertmanager_url: str) -> None:
        """Keep ``moment`` (aware), naming the lake and Alertmanager for a reader.

        Raises:
            StateUnusable: the folder or the file cannot be written.
        """
        # To the microsecond, as the table's stamps are: rounded, a row stamped at the
        # instant itself would look newer than it after a restart, and be reported twice.
        told = as_utc(moment).isoformat().replace("+00:00", "Z")
        body = {"told_until": told, "lake": lake, "alertmanager": alertmanager_url}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=".told-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(body, out)
                os.replace(temp, self.path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise StateUnusable(f"cannot write {self.path}: {exc}") from exc
