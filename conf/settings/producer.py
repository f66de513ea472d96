"""Settings of ``python -m producer``, the sensor fleet simulator (docs/producer.md)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from conf.settings.kafka_connection import KafkaSettings
from conf.settings.metrics_endpoint import MetricsSettings, metrics_port
from conf.settings.mqtt_connection import MqttSettings
from conf.settings.rules_file import RulesSettings
from conf.settings.values import Fraction, aware_instant


def _parse_range(value: Any) -> Any:
    """Accept "MIN:MAX" (flag or environment) as well as a pair."""
    if isinstance(value, str):
        low, sep, high = value.partition(":")
        if not sep:
            raise ValueError(f"expected MIN:MAX in seconds, got {value!r}")
        return (low.strip(), high.strip())
    return value


class ProducerSettings(KafkaSettings, MqttSettings, RulesSettings, MetricsSettings):
    """Settings of ``python -m producer`` (docs/architecture.md#command-line-names): the
    Kafka settings for ``transport`` kafka, the MQTT ones for mqtt (docs/devices.md)."""

    metrics_port: int = metrics_port(9110)
    transport: Literal["kafka", "mqtt"] = Field(
        "kafka",
        description="kafka: produce the readings to --topic; mqtt: publish them as the "
        "devices would (one login per site, QoS 1) to the MQTT broker, for the bridge",
    )
    mqtt_credentials_dir: Path | None = Field(
        None,
        description="with --transport mqtt: a folder holding each device's password in a "
        "file named by the device (scripts/mqtt-local's <data-dir>/credentials); or one "
        "password for every device in SENSORWATCH_MQTT_PASSWORD (or _FILE)",
    )
    sensors: int = Field(100, ge=1, le=100_000, description="number of sensors in the fleet")
    interval: float = Field(5.0, gt=0, description="event-time seconds between two readings")
    rate: float = Field(0.0, ge=0, description="wall-clock messages per second, 0 = unpaced")
    count: int | None = Field(None, ge=1, description="stop after this many messages")
    duration: float | None = Field(None, gt=0, description="stop after this many seconds")
    seed: int | None = Field(None, description="random seed; without it one is drawn and shown")
    start_time: datetime | None = Field(
        None, description="start of a simulated event clock, ISO-8601 with zone"
    )
    late_fraction: Fraction = Field(0.02, description="fraction of readings sent late")
    late_delay: Annotated[tuple[float, float], NoDecode] = Field(
        (30.0, 300.0), description="how late, in seconds, drawn uniformly from MIN:MAX"
    )
    out_of_order_fraction: Fraction = Field(
        0.02, description="fraction of readings held back and sent after newer ones"
    )
    out_of_order_window: int = Field(
        20, ge=2, le=10_000, description="at most this many messages later"
    )
    duplicate_fraction: Fraction = Field(
        0.01, description="fraction of readings re-sent with the same event_id"
    )
    malformed_fraction: Fraction = Field(
        0.01, description="fraction of readings sent broken (JSON, field, type, range)"
    )
    spike_rate: float = Field(
        0.05, ge=0, description="spikes above the critical threshold per sensor per hour"
    )
    first_spike_after: float | None = Field(
        None,
        ge=0,
        description="one scripted spike this many event seconds after the start (a demo's "
        "first incident), on the first sensor to read then; none: only --spike-rate",
    )
    sustained_rate: float = Field(
        0.02, ge=0, description="sustained overheating stretches per sensor per hour"
    )
    sustained_duration: float = Field(
        420.0, gt=0, description="length of an overheating stretch, event seconds"
    )
    silence_rate: float = Field(0.02, ge=0, description="silences per sensor per hour")
    silence_duration: float = Field(600.0, gt=0, description="length of a silence, event seconds")
    battery_rate: float = Field(
        0.0,
        ge=0,
        description="failing batteries per sensor per hour: the battery reads below the "
        "battery rule's threshold (battery_low) until replaced, battery_duration later",
    )
    battery_duration: float = Field(
        900.0, gt=0, description="how long a failing battery reads low, event seconds"
    )
    humidity_rate: float = Field(
        0.0,
        ge=0,
        description="humid stretches (a door left open) per sensor per hour, above the "
        "humidity rule's threshold (humidity_high)",
    )
    humidity_duration: float = Field(
        300.0, gt=0, description="length of a humid stretch, event seconds"
    )
    warming_rate: float = Field(
        0.1,
        ge=0,
        description="slow failures per sensor per hour: the temperature climbs 0.25 to 0.4 "
        "°C a minute, below every temperature threshold, then recovers (the rate and "
        "deviation rules see it, no fixed threshold does); 0: none",
    )
    warming_duration: float = Field(
        3600.0,
        ge=1800,
        description="length of a warming, event seconds: climbing for three quarters of it "
        "(holding once just short of the sensor's lowest temperature threshold), back to "
        "normal over the last quarter",
    )
    registry_out: Path | None = Field(None, description="write the fleet here as JSON lines")
    manifest: Path | None = Field(
        None, description="write one JSON line per delivered message here"
    )
    progress_interval: float = Field(5.0, gt=0, description="seconds between progress lines")

    _parse_late_delay = field_validator("late_delay", mode="before")(_parse_range)

    _aware = field_validator("start_time")(aware_instant)

    @field_validator("late_delay")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if low < 0 or low > high:
            raise ValueError(f"needs 0 <= MIN <= MAX, got {low:g}:{high:g}")
        return value

    @field_validator("mqtt_credentials_dir")
    @classmethod
    def _a_folder(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_dir():
            raise ValueError(f"no such folder: {value}")
        return value

    # Replaces MqttSettings' check of the same name: the producer logs in as each device,
    # its user name the device's, so a password needs no mqtt_username here.
    @model_validator(mode="after")
    def _mqtt_login_is_whole(self) -> ProducerSettings:
        if self.transport != "mqtt":
            return self  # the MQTT settings are not used (the environment may hold a bridge's)
        if self.mqtt_username is not None:
            raise ValueError(
                "--mqtt-username (SENSORWATCH_MQTT_USERNAME): with --transport mqtt the "
                "producer logs in as each device, its user name the device's "
                "(docs/devices.md); leave it unset"
            )
        given = (self.mqtt_credentials_dir is not None) + (self.mqtt_password is not None)
        if given != 1:
            raise ValueError(
                "--transport mqtt needs the devices' passwords from one place: "
                "--mqtt-credentials-dir (SENSORWATCH_MQTT_CREDENTIALS_DIR, a file per device "
                "as scripts/mqtt-local makes them: var/mosquitto/credentials) or "
                "SENSORWATCH_MQTT_PASSWORD (or _FILE, one password for every device)"
                + ("; both are set" if given else "")
            )
        levels = self.mqtt_topic_layout.split("/")
        if "+" in levels or "#" in levels:
            raise ValueError(
                f"--mqtt-topic-layout (SENSORWATCH_MQTT_TOPIC_LAYOUT) {self.mqtt_topic_layout!r}: "
                "the producer publishes to it, so it needs names, {site} and {sensor_id} "
                "only (no + or #)"
            )
        return self

    @model_validator(mode="after")
    def _fractions_fit(self) -> ProducerSettings:
        # Late, out-of-order and malformed are exclusive fates of one reading.
        total = self.late_fraction + self.out_of_order_fraction + self.malformed_fraction
        if total > 1.0:
            raise ValueError(
                "late_fraction + out_of_order_fraction + malformed_fraction must not "
                f"exceed 1 (got {total:g})"
            )
        return self
