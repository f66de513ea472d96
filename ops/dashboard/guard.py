"""Who is there: the dashboard's credentials check (docs/architecture.md#connections-and-security).

The dashboard changes what pages people (its silence buttons), so when its settings give
a token or a basic-auth user, every request must carry one of them: ``Authorization:
Bearer <token>`` (scripts, API clients) or ``Basic`` (browsers ask for it, then send it
with every request of the page). Otherwise the answer is 401, with the
``WWW-Authenticate`` challenge that makes a browser ask. ``/healthz`` stays open for
probes (compose's healthcheck), and tells an unauthenticated caller only that it serves.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from telemetry.credentials import Credentials

# The request scope key the app reads to know whether the caller showed credentials.
AUTHENTICATED = "sensorwatch.authenticated"
OPEN_PATHS = frozenset({"/healthz"})


class Guard:
    """ASGI middleware: pass requests with the right credentials, answer 401 otherwise."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None = None,
        user: str | None = None,
        password: str | None = None,
    ) -> None:
        self.app, self.credentials = app, Credentials(token, user, password)

    def allows(self, authorization: str) -> bool:
        """True when the ``Authorization`` header carries the token or the user."""
        return self.credentials.allows(authorization)

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
        response = JSONResponse(
            {"error": "who is there? this dashboard asks for credentials"},
            status_code=401,
            headers={"WWW-Authenticate": self.credentials.challenge, "Cache-Control": "no-store"},
        )
        await response(scope, receive, send)
