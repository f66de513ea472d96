"""Value types and parsers the settings of several programs share: fractions, instants,
``KEY=VALUE`` pairs, files that must exist, Spark intervals, loopback addresses."""

from __future__ import annotations

import ipaddress
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from contract.times import parse_interval

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


def _empty_is_unset(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


# An optional setting an empty value leaves unset: compose passes an unset .env variable
# as an empty string. Annotated[str | None, EmptyIsUnset].
EmptyIsUnset = BeforeValidator(_empty_is_unset)


def aware_instant(value: datetime | None) -> datetime | None:
    """A given instant must name its time zone (a naive one is a bug: docs/reference.md)."""
    if value is not None and value.tzinfo is None:
        raise ValueError("needs a time zone, e.g. 2026-01-01T00:00:00Z")
    return value


def parse_pairs(value: Any) -> Any:
    """Accept "KEY=VALUE,KEY=VALUE" (flag or environment) as well as a table."""
    if isinstance(value, str):
        pairs = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, setting = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"expected KEY=VALUE[,KEY=VALUE...], got {item!r}")
            pairs[key.strip()] = setting.strip()
        return pairs
    return value


def _readable_file(value: Path | None) -> Path | None:
    if value is not None and not value.is_file():
        raise ValueError(f"no such file: {value}")
    return value


# A file the program (or a server it starts) reads: it must be there at start-up.
ReadableFile = Annotated[Path | None, AfterValidator(_readable_file)]
PemFile = ReadableFile


SparkInterval = Annotated[str, AfterValidator(parse_interval)]


def is_loopback(host: str) -> bool:
    """True for an address only this machine (or container) reaches."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
