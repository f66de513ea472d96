"""Who is there: the one credentials check of the dashboard and the /metrics endpoints.

A caller shows ``Authorization: Bearer <token>`` (scripts, Prometheus) or ``Basic``
(browsers ask for it). Both secrets come from the environment or files
(conf/settings/metrics_endpoint.py: WhoIsThereSettings), never from flags.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass


def _same(given: str, wanted: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), wanted.encode("utf-8"))


@dataclass(frozen=True)
class Credentials:
    """The token and/or basic-auth user a caller must show; none set: anyone may call."""

    token: str | None = None
    user: str | None = None
    password: str | None = None

    @property
    def required(self) -> bool:
        """True when a caller must show one of them."""
        return self.token is not None or self.user is not None

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of a 401: basic auth makes a browser ask."""
        return 'Basic realm="SensorWatch", charset="UTF-8"' if self.user else "Bearer"

    def allows(self, authorization: str) -> bool:
        """True when the ``Authorization`` header carries the token or the user."""
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and self.token is not None:
            return _same(given.strip(), self.token)
        if scheme.lower() == "basic" and self.user is not None:
            try:
                decoded = base64.b64decode(given.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            user, _, password = decoded.partition(":")
            # Both compared, always: the time taken says nothing about which was wrong.
            return _same(user, self.user) & _same(password, self.password or "")
        return False
