"""HTTP from the ops programs to Alertmanager and Prometheus, with httpx.

One request per call, on a connection of its own (as urllib made them: nothing pooled
to hold open or close); redirects followed; the proxy environment variables honoured.
TLS is verified against a CA file when one is given (read at each call, so a replaced
file counts at once) or else the system's certificates, loaded once per process: some
50 ms each time, too much for every call of the dashboard.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import httpx

E = TypeVar("E", bound=BaseException)

# What a call may raise when it gets no usable answer: the transport's errors (no
# connection, a timeout, a reset), a URL httpx cannot use, a body that is not JSON.
FAILURES: tuple[type[Exception], ...] = (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError)


@functools.cache
def _system_certificates() -> ssl.SSLContext:
    return ssl.create_default_context()


def trust(ca: Path | None = None) -> ssl.SSLContext:
    """The certificates a server's must chain to: ``ca``'s only, else the system's.

    Raises:
        OSError, ssl.SSLError: ``ca`` cannot be read, or holds no certificate.
    """
    return ssl.create_default_context(cafile=str(ca)) if ca else _system_certificates()


def request(
    method: str,
    url: str,
    timeout: float,
    *,
    params: Sequence[tuple[str, str | float]] | Mapping[str, str | float] | None = None,
    content: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    verify: ssl.SSLContext | None = None,
) -> httpx.Response:
    """One request; ``timeout`` bounds the connection and each read and write;
    ``verify``: from :func:`trust` (default: the system's certificates).

    Raises:
        httpx.HTTPError, httpx.InvalidURL: no answer (see :data:`FAILURES`).
    """
    return httpx.request(
        method,
        url,
        params=params,
        content=content,
        headers=headers,
        auth=auth,
        timeout=timeout,
        verify=verify or trust(),
        follow_redirects=True,
    )


def cause(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of ``kind`` among ``exc`` and its causes (httpx wraps the
    ``ssl`` error of a certificate it did not trust in two of its own)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
