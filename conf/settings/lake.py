"""Where the lake is, for the job that writes it and every program that reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from conf.lake_location import is_object_store, load_credential_files, parse_lake
from conf.paths import VAR_DIR
from conf.settings.base import ProgramSettings


def _lake(value: Any) -> str:
    """A lake location: a folder, or s3a://bucket/prefix (conf/lake_location.py)."""
    if not isinstance(value, str | Path):
        raise ValueError("expected a folder or s3a://bucket/prefix")
    location = parse_lake(value)
    if is_object_store(location):
        load_credential_files()  # AWS_*_FILE -> AWS_*, before any library reads them
    return location


# A folder or an object store URI, written one way (conf.lake_location.parse_lake).
LakeLocation = Annotated[str, BeforeValidator(_lake)]

# Where the job writes, and the ops view reads, unless told another lake.
DEFAULT_LAKE = str(VAR_DIR / "lake")


class LakeReaderSettings(ProgramSettings):
    """Settings of a program that only reads the lake (the ops view)."""

    lake: LakeLocation = Field(
        DEFAULT_LAKE,
        validate_default=True,
        description="where the Delta tables are (the job's --lake): a folder or "
        "s3a://bucket/prefix",
    )
