"""A program's /metrics endpoint: the Prometheus text format (prometheus_client) from a
registry of the program's own, on the address its settings give, in a daemon thread.

Every program has its own registry (not prometheus_client's global one), so tests can run
several in one process and read each one's values. When the settings give credentials,
every request must show them (telemetry/credentials.py); otherwise the endpoint only
listens beyond loopback where the settings say the network is private
(conf/settings/metrics_endpoint.py: MetricsSettings).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from conf.settings.metrics_endpoint import MetricsSettings
from telemetry.credentials import Credentials

StartResponse = Callable[..., Any]


class _Quiet(WSGIRequestHandler):
    """No access log line per scrape on the program's stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Say nothing."""


class _Server(ThreadingWSGIServer):
    address_family = socket.AF_INET


class _Server6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


def guarded(app: Callable[..., Iterable[bytes]], credentials: Credentials) -> Any:
    """``app`` answering 401 to a request without the credentials (when any are set)."""
    if not credentials.required:
        return app

    def check(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if credentials.allows(environ.get("HTTP_AUTHORIZATION", "")):
            return app(environ, start_response)
        start_response(
            "401 Unauthorized",
            [
                ("WWW-Authenticate", credentials.challenge),
                ("Content-Type", "text/plain; charset=utf-8"),
            ],
        )
        return [b"who is there? /metrics asks for the dashboard's credentials\n"]

    return check


class MetricsEndpoint:
    """/metrics of ``registry`` served while the program runs; :meth:`close` stops it."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, creds: Credentials):
        server_class = _Server6 if ":" in host else _Server
        self._server = make_server(
            host.strip("[]"),
            port,
            guarded(make_wsgi_app(registry), creds),
            server_class,
            handler_class=_Quiet,
        )
        self.host, self.port = host, int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """Where Prometheus scrapes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()


class EndpointError(RuntimeError):
    """The endpoint cannot listen where the settings say (a port in use, say)."""


def serve_metrics(settings: MetricsSettings, registry: CollectorRegistry) -> MetricsEndpoint | None:
    """Serve ``registry`` at the settings' metrics_host and metrics_port (none when the
    settings turn metrics off).

    Raises:
        EndpointError: the address cannot be listened on; the message names the settings.
    """
    if not settings.metrics:
        return None
    credentials = Credentials(*settings.credentials())
    try:
        return MetricsEndpoint(registry, settings.metrics_host, settings.metrics_port, credentials)
    except OSError as exc:
        raise EndpointError(
            f"/metrics cannot listen on {settings.metrics_host}:{settings.metrics_port} "
            f"({exc.strerror or exc}): choose another --metrics-port "
            "(SENSORWATCH_METRICS_PORT; 0 takes a free one), or --metrics false"
        ) from None
