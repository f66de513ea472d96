"""Settings of ``python -m producer replay`` (docs/producer.md#replaying-a-recording)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from conf.settings.kafka_connection import KafkaSettings
from conf.settings.metrics_endpoint import MetricsSettings, metrics_port
from conf.settings.values import aware_instant


def _parse_names(value: Any) -> Any:
    """Accept "A,B,..." (flag or environment) as well as a list."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _parse_columns(value: Any) -> Any:
    """Accept "COLUMN[=SENSOR_ID],..." (flag or environment) as well as a table: a
    column without an id names its sensor itself."""
    if isinstance(value, str):
        pairs = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            column, _, sensor = item.partition("=")
            pairs[column.strip()] = sensor.strip() or column.strip()
        return pairs
    return value


class ReplaySettings(KafkaSettings, MetricsSettings):
    """Settings of ``python -m producer replay`` (docs/producer.md#replaying-a-recording):
    recordings of real sensors sent as readings, through the simulator's sender."""

    metrics_port: int = metrics_port(9110)
    format: Literal["auto", "csv", "jsonl"] = Field(
        "auto",
        description="csv (a header line, then a row a line), jsonl (a JSON object a line), "
        "or auto: by the file's extension (.csv; .jsonl, .ndjson, .json), else its first byte",
    )
    time_column: str = Field(
        "timestamp", min_length=1, description="the column (CSV header, JSON key) of the time"
    )
    time_format: str = Field(
        "iso",
        description="iso (ISO-8601: 2013-12-02 21:15:00, ...T21:15:00.5+01:00, ...Z), "
        "epoch_s, epoch_ms, or a strptime pattern such as '%d/%m/%Y %H:%M'",
    )
    time_zone: str = Field(
        "UTC",
        description="zone of the times written without one (IANA name, e.g. Europe/Berlin): "
        "a naive time is taken as UTC unless this says otherwise; a time with a zone or "
        "offset keeps it; event times are sent in UTC",
    )
    value_column: str = Field(
        "value", min_length=1, description="the column of the values (one sensor per file)"
    )
    sensor_id: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="the sensor of each file: one id per file in order, or one for all (a "
        "recording split into files); default: each file's name without its extension",
    )
    sensor_columns: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="one sensor per column instead, COLUMN[=SENSOR_ID],... (without an id, "
        "the column's name is the sensor's); --value-column and --sensor-id do not apply",
    )
    field: Literal["temperature_c", "humidity_pct"] = Field(
        "temperature_c", description="the event field the recorded values are"
    )
    temperature_c: float = Field(
        20.0, ge=-60, le=125, description="temperature_c of every reading if --field is another"
    )
    humidity_pct: float = Field(
        50.0, ge=0, le=100, description="humidity_pct of every reading if --field is another"
    )
    battery_pct: float = Field(100.0, ge=0, le=100, description="battery_pct of every reading")
    speed: float = Field(
        0.0,
        ge=0,
        description="recorded seconds per wall-clock second (600: ten recorded minutes a "
        "second); 0 = as fast as possible. Event times stay the recorded ones",
    )
    start_time: datetime | None = Field(
        None,
        description="shift every time so the recording starts then (ISO-8601 with zone, or "
        "'now'); default: the recorded times as they are",
    )
    count: int | None = Field(None, ge=1, description="stop after this many messages")
    duration: float | None = Field(None, gt=0, description="stop after this many seconds")
    site: str = Field("replay", min_length=1, description="the sensors' site in --registry-out")
    registry_out: Path | None = Field(
        None, description="write the replayed sensors here as a device registry (JSON lines)"
    )
    manifest: Path | None = Field(
        None, description="write one JSON line per delivered message here"
    )
    progress_interval: float = Field(5.0, gt=0, description="seconds between progress lines")

    _parse_sensor_id = field_validator("sensor_id", mode="before")(_parse_names)
    _parse_sensor_columns = field_validator("sensor_columns", mode="before")(_parse_columns)

    @field_validator("start_time", mode="before")
    @classmethod
    def _now(cls, value: Any) -> Any:
        from datetime import UTC

        if isinstance(value, str) and value.strip().lower() == "now":
            return datetime.now(UTC)
        return value

    _aware = field_validator("start_time")(aware_instant)

    @field_validator("time_format")
    @classmethod
    def _time_format(cls, value: str) -> str:
        if value not in ("iso", "epoch_s", "epoch_ms") and "%" not in value:
            raise ValueError("expected iso, epoch_s, epoch_ms or a strptime pattern (with %)")
        return value

    @field_validator("time_zone")
    @classmethod
    def _time_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo

        if value != "UTC":
            try:
                ZoneInfo(value)
            except (ValueError, KeyError, OSError):  # not found: a KeyError
                raise ValueError("not a time zone name, e.g. UTC or Europe/Berlin") from None
        return value

    @field_validator("sensor_columns")
    @classmethod
    def _distinct(cls, value: dict[str, str]) -> dict[str, str]:
        ids = list(value.values())
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"a sensor id for more than one column: {', '.join(twice)}")
        return value

    @model_validator(mode="after")
    def _one_mapping(self) -> ReplaySettings:
        if self.sensor_columns and self.sensor_id:
            raise ValueError(
                "--sensor-id and --sensor-columns exclude each other: one sensor per file, "
                "or one per column"
            )
        return self
