"""Prometheus Alertmanager's API v2: the one client of the notifier and the dashboard.

Over httpx (ops/http.py). Every failure to get an answer (no connection, a timeout, an
error status, a body that is not JSON) raises ``AlertmanagerUnavailable`` with a message
that names the Alertmanager and says which.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from conf.settings.alertmanager_client import AlertmanagerSettings
from contract.times import parse_instant
from ops.http import FAILURES, cause, request, trust

HTTP_TIMEOUT = 10.0


class AlertmanagerUnavailable(RuntimeError):
    """Alertmanager did not answer, or answered with an error; the message says which."""


class AlertmanagerRefused(AlertmanagerUnavailable):
    """Alertmanager answered but refused this client (401 or 403: credentials), or its
    certificate is not trusted: a setting to fix, which waiting does not mend."""


@dataclass(frozen=True)
class Alertmanager:
    """Alertmanager's API v2 at ``url``, its base URL as this process reaches it; behind
    basic auth (``user``, ``password``) and TLS (``ca``: the certificates to trust, else
    the system's) when it is configured so (its ``--web.config.file``)."""

    url: str
    timeout: float = HTTP_TIMEOUT
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca: Path | None = None

    @classmethod
    def from_settings(cls, settings: AlertmanagerSettings, url: str | None = None) -> Alertmanager:
        """The client ``settings`` describe (``url`` where this process reaches it
        differently, as the dashboard server in compose)."""
        password = settings.alertmanager_password
        return cls(
            (url or settings.alertmanager_url).rstrip("/"),
            user=settings.alertmanager_user,
            password=None if password is None else password.get_secret_value(),
            ca=settings.alertmanager_ca_location,
        )

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        # Outside the try: a CA file that cannot be read, or a body that is not JSON, is
        # this side's fault, not Alertmanager's.
        tls = trust(self.ca)
        content = None if body is None else json.dumps(body).encode("utf-8")
        where = f"Alertmanager at {self.url}"
        try:
            response = request(
                method,
                f"{self.url.rstrip('/')}{path}",
                timeout or self.timeout,
                content=content,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                auth=None if self.user is None else (self.user, self.password or ""),
                verify=tls,
            )
            if response.is_success:
                return json.loads(response.content or b"null")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            untrusted = cause(exc, ssl.SSLCertVerificationError)
            if untrusted is not None:
                raise AlertmanagerRefused(
                    f"{where}: its certificate is not trusted ({untrusted.verify_message}); "
                    "check alertmanager_ca_location"
                ) from None
            raise AlertmanagerUnavailable(f"{where} is not reachable: {exc}") from None
        except FAILURES as exc:  # timeouts, resets; a body that is not JSON
            reason = str(exc) or type(exc).__name__
            raise AlertmanagerUnavailable(f"{where} did not answer: {reason}") from None
        code = response.status_code
        text = response.content.decode("utf-8", errors="replace").strip().strip('"')[:300]
        if code in (401, 403):
            raise AlertmanagerRefused(
                f"{where} answered HTTP {code}: {text}; it asks for basic auth: "
                "check alertmanager_user and SENSORWATCH_ALERTMANAGER_PASSWORD (or _FILE)"
            )
        raise AlertmanagerUnavailable(f"{where} answered HTTP {code}: {text}")

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
