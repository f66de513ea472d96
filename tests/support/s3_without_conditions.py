"""A test double of an S3-compatible store that ignores ``If-None-Match: *``: an HTTP
proxy in front of a real S3Proxy that forwards every request unchanged (its signature
stays valid: the Host header is kept) and answers a refused conditional write (412) with
200, as a store that does not honour the condition would. Everything else is S3Proxy's."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


def _handler(upstream: str) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                answer = connection.getresponse()
                status, data = answer.status, answer.read()
                replied = [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP]
            finally:
                connection.close()
            if self.command == "PUT" and status == 412 and "If-None-Match" in self.headers:
                status, data = 200, b""  # the condition ignored: "written"
                replied = [(k, v) for k, v in replied if k.lower() != "content-type"]
                replied.append(("ETag", '"0123456789abcdef0123456789abcdef"'))
            self.send_response(status)
            for key, value in replied:
                if key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet

    return Forward


@contextmanager
def store_without_conditions(upstream: str) -> Iterator[str]:
    """A proxy to the S3 endpoint ``upstream`` that ignores conditional writes; yields
    its endpoint URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
