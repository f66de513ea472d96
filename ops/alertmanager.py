"""Prometheus Alertmanager's API v2: the one client of the notifier and the dashboard.

Stdlib ``urllib`` only (no JVM, no HTTP framework). Every failure to get an answer (no
connection, a timeout, an error status, a body that is not JSON) raises
``AlertmanagerUnavailable`` with a message that names the Alertmanager and says which.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contract.times import parse_instant

HTTP_TIMEOUT = 10.0


class AlertmanagerUnavailable(RuntimeError):
    """Alertmanager did not answer, or answered with an error; the message says which."""


@dataclass(frozen=True)
class Alertmanager:
    """Alertmanager's API v2 at ``url``, its base URL as this process reaches it."""

    url: str
    timeout: float = HTTP_TIMEOUT

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url.rstrip('/')}{path}",
            data=None if body is None else json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            method=method,
        )
        where = f"Alertmanager at {self.url}"
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", errors="replace").strip().strip('"')[:300]
            raise AlertmanagerUnavailable(f"{where} answered HTTP {exc.code}: {text}") from None
        except urllib.error.URLError as exc:
            raise AlertmanagerUnavailable(f"{where} is not reachable: {exc.reason}") from None
        except (OSError, ValueError) as exc:  # timeouts, resets; a body that is not JSON
            reason = str(exc) or type(exc).__name__
            raise AlertmanagerUnavailable(f"{where} did not answer: {reason}") from None

    def _expect(self, answer: Any, kind: type) -> Any:
        if not isinstance(answer, kind):
            raise AlertmanagerUnavailable(f"Alertmanager at {self.url} answered {answer!r}")
        return answer

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """Post ``alerts`` (API v2 ``postableAlerts``) in one request."""
        self._call("POST", "/api/v2/alerts", alerts)

    def alerts(self, **labels: str) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds unresolved (firing, silenced or inhibited) whose
        labels include ``labels``. A resolved alert is not listed: Alertmanager has
        taken its end."""
        query = urllib.parse.urlencode([("filter", f'{k}="{v}"') for k, v in labels.items()])
        return self._expect(self._call("GET", f"/api/v2/alerts?{query}"), list)

    def started_at(self) -> datetime:
        """When this Alertmanager process started (``uptime`` of ``/api/v2/status``).
        Alerts live in its memory: it knows none posted before then."""
        status = self._expect(self._call("GET", "/api/v2/status"), dict)
        try:
            return parse_instant(status["uptime"])
        except (KeyError, TypeError, ValueError):
            raise AlertmanagerUnavailable(
                f"Alertmanager at {self.url} gave no start time: {status!r}"
            ) from None

    def create_silence(self, silence: dict[str, Any], timeout: float | None = None) -> str:
        """Create a silence (API v2 ``postableSilence``); its id."""
        answer = self._expect(self._call("POST", "/api/v2/silences", silence, timeout), dict)
        if not answer.get("silenceID"):
            raise AlertmanagerUnavailable(f"Alertmanager at {self.url} answered {answer!r}")
        return str(answer["silenceID"])

    def active_silences(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """The silences in effect now (state ``active``)."""
        answer = self._expect(self._call("GET", "/api/v2/silences", None, timeout), list)
        return [s for s in answer if (s.get("status") or {}).get("state") == "active"]
