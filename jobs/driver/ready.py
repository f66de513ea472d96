"""``python -m jobs.driver.ready [--lake DIR|URI]``: exit 0 once the job's ingest query has
committed a micro-batch to the lake, 1 before; a readiness probe (docker-compose.yml's
healthcheck of the job, a Kubernetes readinessProbe) that reads the lake where the job
writes it, a folder or a bucket alike."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from conf.cli import read_command_line
from conf.lake_location import join
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from conf.settings.lake import LakeReaderSettings
from lake import storage
from lake.layout import Lake

PROG = "jobs.driver.ready"


def ready(lake: str) -> bool:
    """True when the ingest query's checkpoint records a committed batch."""
    return bool(storage.list_names(join(Lake(lake).checkpoint("ingest"), "commits")))


def main(argv: Sequence[str] | None = None) -> int:
    """The probe; returns the exit status (2: a setting is wrong or the lake unreachable)."""
    flags, _ = read_command_line(
        LakeReaderSettings, argv, prog=f"python -m {PROG}", description=__doc__ or ""
    )
    try:
        settings = load_settings(LakeReaderSettings, flags, SHARED_FILE)
        done = ready(settings.lake)
    except (SettingsError, OSError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print(f"{PROG}: {'ready' if done else 'no batch committed yet'}")
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
