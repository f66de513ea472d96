"""Instants: the one module of time conversions (docs/architecture.md#time-zones: every
instant is UTC).

Every instant in SensorWatch is an aware ``datetime`` in UTC, from the Kafka record to
every table and every comparison. A naive datetime is a bug: PySpark reads one as the
process's local time, so a result would change with the machine's time zone. The helpers
here turn what arrives (Arrow values, ISO text, epoch milliseconds) into aware UTC, and
aware UTC into what leaves (ISO text).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def utc_now() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """An instant as an aware UTC datetime; None stays None.

    A naive value is taken as UTC: that is how Arrow and delta-rs hand back the lake's
    timestamps (stored as UTC instants) when a column carries no zone. Never pass a
    naive datetime from PySpark here: PySpark's are local time (use ``spark.sql.session
    .timeZone`` = UTC and aware values instead).
    """
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, to the millisecond: ``2026-01-01T00:15:00.000Z``."""
    utc = as_utc(value)
    return None if utc is None else utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def readable(value: datetime | None, zone: bool = True) -> str:
    """An instant for people, in UTC to the second: ``2026-11-23 03:10:05 UTC`` (without
    the zone where a table's heading says it); ``-`` for None."""
    utc = as_utc(value)
    if utc is None:
        return "-"
    return utc.strftime("%Y-%m-%d %H:%M:%S UTC" if zone else "%Y-%m-%d %H:%M:%S")


def parse_instant(text: str) -> datetime:
    """ISO-8601 text with a zone (``Z`` or ``+01:00``; more than microsecond digits are
    cut) as an aware UTC datetime.

    Raises:
        ValueError: not ISO-8601, or without a zone.
    """
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    head, dot, rest = value.partition(".")
    if dot:  # Python reads at most 6 fraction digits; Go and Java write up to 9
        digits = len(rest) - len(rest.lstrip("0123456789"))
        value = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.astimezone(UTC)


def from_epoch_ms(ms: int) -> datetime:
    """Milliseconds since the epoch (Kafka's, Spark's and Delta's clocks) as aware UTC."""
    return EPOCH + ms * _MS


def to_epoch_ms(moment: datetime) -> int:
    """An aware instant as milliseconds since the epoch.

    Raises:
        ValueError: a naive datetime (it would be read as local time).
    """
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: an instant needs a zone")
    return (moment - EPOCH) // _MS  # truncated, as Java and Kafka do


# Durations as Spark writes intervals ("30 seconds", "2 minutes", "1 hour"): the settings
# and the rules file use them, and the job hands them to Spark as they are.
_INTERVAL = re.compile(r"^\d+(\.\d+)? (second|minute|hour|day)s?$")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}


def parse_interval(value: str) -> str:
    """``value`` stripped, if it is an interval such as '30 seconds'; else ValueError."""
    if not _INTERVAL.match(value.strip()):
        raise ValueError("expected an interval such as '30 seconds', '2 minutes' or '1 hour'")
    return value.strip()


def interval_seconds(interval: str) -> float:
    """A valid interval such as '5 minutes' in seconds."""
    number, unit = interval.split()
    return float(number) * _UNIT_SECONDS[unit.rstrip("s")]


# How far back to look, as people type it at the ops view (--since, the dashboard's since).
_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_SINCE_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``1h``, ``30m``, ``2d``, ``90s`` (that long before ``now``) or an ISO-8601 timestamp
    (without a zone: UTC), as an aware UTC datetime.

    Raises:
        ValueError: neither form.
    """
    match = _SINCE.match(text)
    if match:
        amount, unit = match.groups()
        return (now or utc_now()) - timedelta(**{_SINCE_UNIT[unit]: float(amount)})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"expected a duration such as 90s, 30m, 1h, 2d or an ISO-8601 timestamp, got {text!r}"
        ) from None
    # A person's timestamp may leave out the zone (parse_instant refuses that): UTC.
    utc = as_utc(when)
    assert utc is not None
    return utc
