"""Where the lake lives: a local folder, or a prefix in an S3-compatible object store.

A lake is an absolute folder path (a local disk or a shared file system) or
``s3a://bucket/prefix`` (``s3://`` is taken as the same place and written ``s3a://``, the
scheme Hadoop's S3 connector registers). The endpoint and region of an object store come
from the standard AWS variables. Pure functions of text and the environment: settings
validation imports this without the storage libraries (lake/storage.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from conf.secrets import secret_from_file

SCHEME = "s3a"
ACCEPTED_SCHEMES = ("s3a", "s3")
DEFAULT_REGION = "us-east-1"


def parse_lake(value: str | Path) -> str:
    """A lake location as every program writes it: an absolute folder path, or
    ``s3a://bucket[/prefix]`` without a trailing slash.

    Raises:
        ValueError: a URI of another scheme, without a bucket, or with credentials,
            a query or a fragment in it.
    """
    text = str(value).strip()
    if "://" not in text:
        if not text:
            raise ValueError("empty: give a folder or s3a://bucket/prefix")
        return str(Path(text).expanduser().absolute())
    parts = urlsplit(text)
    if parts.scheme not in ACCEPTED_SCHEMES:
        raise ValueError(
            f"{parts.scheme}:// is not supported: give a folder (a local disk or a shared "
            "file system) or s3a://bucket/prefix (S3 or an S3-compatible store)"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "credentials do not belong in the lake's URI (it shows in logs): set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment instead"
        )
    if not parts.hostname:
        raise ValueError(f"{parts.scheme}:// without a bucket: give s3a://bucket/prefix")
    if parts.query or parts.fragment:
        raise ValueError("a lake URI has no query (?...) or fragment (#...)")
    prefix = parts.path.strip("/")
    return f"{SCHEME}://{parts.netloc}" + (f"/{prefix}" if prefix else "")


def is_object_store(location: str | Path) -> bool:
    """True for a lake (or a table of one) in an object store."""
    return str(location).startswith(f"{SCHEME}://")


def join(location: str | Path, *parts: str) -> str:
    """A path below ``location``: a table, a checkpoint, a file."""
    if is_object_store(location):
        return "/".join([str(location).rstrip("/"), *parts])
    return str(Path(location, *parts))


# The standard variables a lake's credentials come from; each may instead name a file
# (``<NAME>_FILE``), the way Docker and Kubernetes hand secrets to a container.
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def load_credential_files() -> None:
    """Set each unset credential variable from the file its ``<NAME>_FILE`` names.

    Every library (Spark's S3A in the JVM this process starts, delta-rs, pyarrow) reads
    the standard variables from the environment, so the files become those variables once,
    at start; nothing else in the project holds the secret.

    Raises:
        ValueError: a named file cannot be read or is empty (the message names the
            variable and the path, never the content).
    """
    for name in CREDENTIAL_VARIABLES:
        if os.environ.get(name):
            continue
        value = secret_from_file(f"{name}_FILE")
        if value is not None:
            os.environ[name] = value


def endpoint() -> str | None:
    """The S3 endpoint URL of the environment, None for AWS's own."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def region() -> str:
    """The region requests are signed for."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
