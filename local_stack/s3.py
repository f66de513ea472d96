"""A real S3-compatible server on loopback, without Docker: ``scripts/s3-local``.

Runs S3Proxy (Maven Central's ``org.gaul:s3proxy`` self-contained jar, fetched on first
start; version ``S3PROXY_VERSION`` in .env) with its file-system back end, on 127.0.0.1
only. It speaks the S3 API with AWS signatures (v2 and v4) and honours conditional
writes (``If-None-Match: *``), which delta-rs commits rely on. One server per data
directory; several can run side by side on different ports. The data directory holds:

    buckets/            one folder per bucket, one file per object
    credentials.json    the access key and secret of this server, made on first start
                        (mode 0600; never printed except by ``env``)
    s3proxy.properties  S3Proxy's configuration, written on each start (mode 0600)
    s3proxy.log         its log
    s3proxy.json        pid, port and endpoint of the running server

Usage::

    scripts/s3-local start [--data-dir DIR] [--port N] [--bucket NAME]
                                       # prints endpoint=http://127.0.0.1:N
    scripts/s3-local status [--data-dir DIR]
    scripts/s3-local stop [--data-dir DIR]
    scripts/s3-local env [--data-dir DIR]   # export lines for the AWS_* variables
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.paths import VAR_DIR
from local_stack.optional_jars import s3proxy_jar
from local_stack.server import (
    LOOPBACK,
    LocalServer,
    LocalServerError,
    RunningHttpServer,
    entry_point,
    print_exports,
    wait_for_server,
    write_private,
)

DEFAULT_DATA_DIR = VAR_DIR / "s3"
DEFAULT_PORT = 9000
DEFAULT_BUCKET = "sensorwatch"
# S3Proxy's region is fixed; clients must sign for it.
REGION = "us-east-1"
# S3's rules for bucket names (the common subset): 3 to 63 of a-z, 0-9, '.', '-'.
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class S3Error(LocalServerError):
    """A LocalServerError of S3Proxy (scripts/s3-local)."""


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret (the secret never goes into a log or an error)."""

    access_key: str
    secret_key: str = ""

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key=***)"


@dataclass(frozen=True)
class S3Server(RunningHttpServer):
    """A running local S3-compatible server."""

    URL_NAME: ClassVar[str] = "endpoint"

    @property
    def endpoint(self) -> str:
        """The URL clients send S3 requests to (path-style addressing)."""
        return self.url

    @property
    def credentials(self) -> Credentials:
        """The server's access key and secret."""
        return read_credentials(self.data_dir)

    def environment(self) -> dict[str, str]:
        """The standard AWS variables that point a client (the job, delta-rs, the AWS
        CLI) at this server."""
        creds = self.credentials
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": creds.access_key,
            "AWS_SECRET_ACCESS_KEY": creds.secret_key,
            "AWS_REGION": REGION,
        }


# Its properties file names the data directory on its command line.
SERVER = LocalServer.of(
    "s3-local", "s3proxy", S3Error, lambda data_dir: str(data_dir / "s3proxy.properties"),
    S3Server, DEFAULT_DATA_DIR,
)  # fmt: skip


def _credentials_file(data_dir: Path) -> Path:
    return data_dir / "credentials.json"


def read_credentials(data_dir: Path) -> Credentials:
    """The credentials of the server on ``data_dir``, made (random) on first use."""
    path = _credentials_file(data_dir)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        return Credentials(stored["access_key"], stored["secret_key"])
    except (OSError, ValueError, KeyError):
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    creds = Credentials(f"sensorwatch-{secrets.token_hex(4)}", secrets.token_urlsafe(24))
    write_private(
        path, json.dumps({"access_key": creds.access_key, "secret_key": creds.secret_key})
    )
    return creds


def properties(basedir: Path | str, listen: str, creds: Credentials) -> str:
    """S3Proxy's configuration: listening on ``listen`` (a URL), buckets under ``basedir``."""
    settings = {
        "s3proxy.endpoint": listen,
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": creds.access_key,
        "s3proxy.credential": creds.secret_key,
        # S3Proxy's own file-system back end: the older jclouds "filesystem" one lists
        # every folder as an object too ("a/" beside "a/b"), which S3 never does.
        "jclouds.provider": "filesystem-nio2",
        "jclouds.filesystem.basedir": str(basedir),
        # Required by S3Proxy, unused by a local back end.
        "jclouds.identity": "local",
        "jclouds.credential": "local",
    }
    return "".join(f"{k}={v}\n" for k, v in settings.items())


# The server running on a data directory, or None (LocalServer.running).
running = SERVER.running


def answers(endpoint: str, timeout: float = 2.0) -> bool:
    """True when an S3 server answers at ``endpoint`` (an unsigned request is refused
    with 403: that is an answer)."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def wait_until_ready(
    endpoint: str, timeout: float = 60.0, alive: Callable[[], bool] | None = None
) -> None:
    """Block until the server answers HTTP.

    Raises:
        S3Error: ``timeout`` passed first, or ``alive`` reports the process died.
    """
    wait_for_server(
        f"S3Proxy at {endpoint}", lambda: answers(endpoint), timeout, 0.2, alive, S3Error
    )


def start(
    data_dir: Path = DEFAULT_DATA_DIR,
    port: int = DEFAULT_PORT,
    *,
    buckets: tuple[str, ...] = (DEFAULT_BUCKET,),
    heap: str = "256m",
    timeout: float = 60.0,
) -> S3Server:
    """Start a server on ``data_dir`` with ``buckets`` (made if missing) and return once
    it answers (idempotent).

    Raises:
        S3Error: a bucket name is not valid, the port is taken, a server already runs
            on this data directory at another port, or it did not come up (the message
            carries the tail of its log).
    """
    for bucket in buckets:
        if not BUCKET_NAME.match(bucket):
            raise S3Error(
                f"bucket name {bucket!r} is not valid: 3 to 63 characters of a-z, 0-9, "
                "'.' and '-', starting and ending with a letter or digit"
            )
    data_dir = data_dir.resolve()
    current = running(data_dir)
    if current is not None:
        SERVER.check_same(data_dir, "S3Proxy", {"--port": current.port}, {"--port": port})
        _make_buckets(data_dir, buckets)
        wait_until_ready(current.endpoint, timeout)
        return current
    SERVER.check_free(port)
    creds = read_credentials(data_dir)
    _make_buckets(data_dir, buckets)
    config = data_dir / "s3proxy.properties"
    write_private(config, properties(data_dir / "buckets", f"http://{LOOPBACK}:{port}", creds))
    endpoint = f"http://{LOOPBACK}:{port}"
    proc = SERVER.launch(
        ["java", f"-Xmx{heap}", "-jar", str(s3proxy_jar()), "--properties", str(config)],
        data_dir=data_dir,
        state={"port": port, "endpoint": endpoint},
        wait=lambda alive: wait_until_ready(endpoint, timeout, alive),
    )  # fmt: skip
    return S3Server(proc.pid, port, data_dir)


def _make_buckets(data_dir: Path, buckets: tuple[str, ...]) -> None:
    # With the file-system back end a bucket is a folder: made here, it exists before
    # the first request, with no signed CreateBucket call to get right.
    for bucket in buckets:
        (data_dir / "buckets" / bucket).mkdir(parents=True, exist_ok=True)


# Stop the server on a data directory (LocalServer.stop; True if one ran).
stop = SERVER.stop


class Options(BaseModel):
    """The options of scripts/s3-local."""

    command: CliPositionalArg[Literal["start", "stop", "status", "env"]] = Field(
        description="start, stop, status; env: export lines for the AWS_* variables"
    )
    data_dir: Path = Field(DEFAULT_DATA_DIR, description="the buckets, credentials, config and log")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="port on 127.0.0.1")
    bucket: list[str] = Field(
        [DEFAULT_BUCKET], description="a bucket to make if missing (repeatable)"
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | env."""
    return SERVER.main(
        argv, Options,
        "A real S3-compatible server (S3Proxy, file-system back end) on 127.0.0.1.",
        lambda _given, args: _command(args),
    )  # fmt: skip


def _command(args: Options) -> int:
    """start or env (LocalServer.main answers stop and status)."""
    if args.command == "env":
        server = running(args.data_dir)
        if server is None:
            raise S3Error(f"no server runs on {args.data_dir.resolve()}")
        print_exports(server.environment())
        return 0
    buckets = tuple(args.bucket)
    server = start(args.data_dir, args.port, buckets=buckets)
    return SERVER.started(
        server,
        f"buckets {', '.join(buckets)}; credentials: "
        f'eval "$(scripts/s3-local env --data-dir {server.data_dir})"',
    )


if __name__ == "__main__":
    entry_point(main)
