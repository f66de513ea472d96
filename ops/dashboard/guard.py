"""Who is there: the dashboard's credentials check (SPEC section 10).

The dashboard changes what pages people (its silence buttons), so when its settings give
a token or a basic-auth user, every request must carry one of them: ``Authorization:
Bearer <token>`` (scripts, API clients) or ``Basic`` (browsers ask for it, then send it
with every request of the page). Otherwise the answer is 401, with the
``WWW-Authenticate`` challenge that makes a browser ask. ``/healthz`` stays open for
probes (compose's healthcheck), and tells an unauthenticated caller only that it serves.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

# The request scope key the app reads to know whether the caller showed credentials.
AUTHENTICATED = "sensorwatch.authenticated"
OPEN_PATHS = frozenset({"/healthz"})


def _same(given: str, wanted: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), wanted.encode("utf-8"))


class Guard:
    """ASGI middleware: pass requests with the right credentials, answer 401 otherwise."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        self.app, self.token, self.user, self.password = app, token, user, password

    def allows(self, authorization: str) -> bool:
        """True when the ``Authorization`` header carries the token or the user."""
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and self.token is not None:
            return _same(credentials.strip(), self.token)
        if scheme.lower() == "basic" and self.user is not None:
            try:
                decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return False
            user, _, password = decoded.partition(":")
            # Both compared, always: the time taken says nothing about which was wrong.
            return _same(user, self.user) & _same(password, self.password or "")
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        allowed = self.allows(authorization)
        scope[AUTHENTICATED] = allowed
        if allowed or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        challenge = 'Basic realm="SensorWatch", charset="UTF-8"' if self.user else "Bearer"
        response = JSONResponse(
            {"error": "who is there? this dashboard asks for credentials"},
            status_code=401,
            headers={"WWW-Authenticate": challenge, "Cache-Control": "no-store"},
        )
        await response(scope, receive, send)
