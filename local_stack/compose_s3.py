"""The compose profile ``s3`` (docker-compose.yml): the lake in a bucket of an S3Proxy
service instead of the ``lake`` volume, with the same services otherwise.

    python -m local_stack.compose_s3 init          # the s3-init service, once per volumes
    exports="$(python -m local_stack.compose_s3 env)"   # scripts/compose-run, in each service

``init`` makes the service's credentials (random, once: they are in no compose file,
image or log) and S3Proxy's configuration in the ``s3-config`` volume, and the bucket's
folder in the ``s3-data`` volume. It runs as the app's user, whom S3Proxy runs as too: the
volumes come owned by that user from the image's folders, so nothing here needs root.
``env`` waits for S3Proxy to answer, then prints the lines that point a program at the
bucket: ``SENSORWATCH_LAKE`` and the standard AWS variables (to be eval'ed, never shown).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.cli import read_options
from conf.settings.base import SettingsError
from local_stack.s3 import S3Error, properties, read_credentials, wait_until_ready
from local_stack.server import print_exports, write_private

PROG = "compose-s3"
CONFIG_DIR = Path("/run/s3")  # the s3-config volume, wherever it is mounted
DATA_DIR = Path("/data/s3")  # the s3-data volume as s3-init sees it
# ... and as S3Proxy sees it: a path its image does not have, so that the empty volume is
# never given the image's ownership (root) in place of the app image's.
SERVICE_BASEDIR = "/srv/buckets"
LISTEN = "http://0.0.0.0:9000"
ENDPOINT = "http://s3:9000"
BUCKET = "sensorwatch"
LAKE = f"s3a://{BUCKET}/lake"


class VolumeNotWritable(Exception):
    """A volume of the profile that the app's user cannot write."""


def init(config_dir: Path = CONFIG_DIR, data_dir: Path = DATA_DIR) -> None:
    """Credentials (made once), S3Proxy's properties and the bucket."""
    for folder in (config_dir, data_dir):
        with contextlib.suppress(PermissionError):  # said just below, with what to do
            folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise VolumeNotWritable(
                f"{folder} is not writable by this user (uid {os.getuid()}): the volume was "
                "made by an older release that prepared it as root; remove it once with "
                "`docker compose --profile s3 down -v` (the bucket's data goes with it)"
            )
    creds = read_credentials(config_dir)
    write_private(config_dir / "s3proxy.properties", properties(SERVICE_BASEDIR, LISTEN, creds))
    (data_dir / BUCKET).mkdir(parents=True, exist_ok=True)
    print(f"{PROG}: bucket {BUCKET} and credentials ready (made once, kept in the volume)")


def environment(config_dir: Path = CONFIG_DIR) -> dict[str, str]:
    """The variables that point the project's programs at the bucket."""
    creds = read_credentials(config_dir)
    return {
        "SENSORWATCH_LAKE": LAKE,
        "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_ACCESS_KEY_ID": creds.access_key,
        "AWS_SECRET_ACCESS_KEY": creds.secret_key,
    }


class ComposeS3Options(BaseModel):
    """The command line of ``python -m local_stack.compose_s3``."""

    action: CliPositionalArg[Literal["init", "env"]] = Field(description="init or env")
    timeout: float = Field(120.0, gt=0, description="seconds to wait (env)")


def main(argv: list[str] | None = None) -> int:
    """``init`` or ``env``; returns the exit status."""
    try:
        args = read_options(ComposeS3Options, argv, prog=PROG, description=__doc__ or "")
    except SettingsError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    if args.action == "init":
        try:
            init(CONFIG_DIR, DATA_DIR)
        except VolumeNotWritable as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
        return 0
    if not (CONFIG_DIR / "credentials.json").is_file():
        print(f"{PROG}: no credentials in {CONFIG_DIR}: did s3-init run?", file=sys.stderr)
        return 2
    try:
        wait_until_ready(ENDPOINT, args.timeout)
    except S3Error as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print_exports(environment(CONFIG_DIR))
    return 0


if __name__ == "__main__":
    sys.exit(main())
