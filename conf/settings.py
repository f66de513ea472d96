"""Typed settings for SensorWatch's programs, validated at start-up.

Each setting has a default here, can be set in a settings file (the job's ``--config``,
by default ``conf/pipeline.toml``), overridden by an environment variable
``SENSORWATCH_<NAME>`` and by a command-line flag ``--<name>`` (flags win; conf/cli.py
makes each program's flags from its settings class). A bad value stops the program with
a message that names both the flag and the variable.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from conf.lake_location import is_object_store, load_credential_files, parse_lake
from conf.paths import PROJECT_ROOT, RULES_FILE, VAR_DIR
from conf.secrets import secret_from_file
from contract.devices import DEFAULT_TOPIC_LAYOUT, TopicLayout
from contract.rules import RulesError, RuleSet, read_rules
from contract.times import interval_seconds, parse_interval

ENV_PREFIX = "SENSORWATCH_"

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]


def _aware_instant(value: datetime | None) -> datetime | None:
    """A given instant must name its time zone (a naive one is a bug: docs/reference.md)."""
    if value is not None and value.tzinfo is None:
        raise ValueError("needs a time zone, e.g. 2026-01-01T00:00:00Z")
    return value


class SettingsError(ValueError):
    """Settings failed validation; ``str()`` lists one problem per line."""


def _parse_range(value: Any) -> Any:
    """Accept "MIN:MAX" (flag or environment) as well as a pair."""
    if isinstance(value, str):
        low, sep, high = value.partition(":")
        if not sep:
            raise ValueError(f"expected MIN:MAX in seconds, got {value!r}")
        return (low.strip(), high.strip())
    return value


def _parse_pairs(value: Any) -> Any:
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

# Settings whose rejected value an error must not repeat: a lake URI may carry a user's
# credentials (refused, and not to be printed either); its messages say what is wrong.
_UNECHOED = frozenset({"lake"})


@dataclass(frozen=True)
class SettingsFile:
    """A settings file (TOML) for :func:`load_settings`: the job's own (``--config``,
    every setting in it must be one of the job's), or, ``shared``, the job's file read by
    another program, which takes the settings it shares with the job (nothing when the
    file does not exist)."""

    path: Path
    shared: bool = False


class SettingsFileSource(TomlConfigSettingsSource):
    """pydantic-settings' TOML source, with the file's tables only grouping settings
    (``[kafka]`` ``bootstrap_servers = ...`` sets ``bootstrap_servers``) and the mistakes
    a file can hold refused in one line each: unreadable, not TOML, an unknown setting, a
    secret, a setting the rules file took over.

    Raises:
        SettingsError: the file holds one of those mistakes.
    """

    def __init__(self, settings_cls: type[BaseSettings], file: SettingsFile) -> None:
        self.file = file
        self.settings_cls = settings_cls
        if not file.shared:
            try:
                file.path.open("rb").close()  # missing: the source would skip it
            except OSError as exc:
                raise SettingsError(f"--config: cannot read {file.path}: {exc.strerror}") from None
        super().__init__(settings_cls, toml_file=file.path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        path = self.file.path
        try:
            data = super()._read_file(file_path)
        except OSError as exc:
            raise SettingsError(f"--config: cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"--config: {path} is not valid TOML: {exc}") from None
        flat: dict[str, Any] = {}
        for key, value in data.items():
            flat.update(value if isinstance(value, dict) else {key: value})
        known = self.settings_cls.model_fields
        if issubclass(self.settings_cls, RulesSettings):
            for name in MOVED_TO_RULES.keys() & flat.keys():
                raise SettingsError(f"settings file: {name} is {_moved(name)}")
        if self.file.shared:  # another program's file: what this one shares with it
            flat = {k: v for k, v in flat.items() if k in known}
        unknown = sorted(flat.keys() - known.keys())
        if unknown:
            raise SettingsError(f"settings file: unknown setting(s) {', '.join(unknown)}")
        for name in sorted(SECRET_SETTINGS & flat.keys()):
            raise SettingsError(
                f"settings file: {name} is a secret: set {env_name(name)} or "
                f"{env_name(name)}_FILE (a file holding it) instead"
            )
        return flat


# The settings file of the load_settings call under way (pydantic-settings builds the
# sources inside the class's constructor).
_SETTINGS_FILE: ContextVar[SettingsFile | None] = ContextVar("settings_file", default=None)


class _Settings(BaseSettings):
    """Precedence, highest first: flags, environment, settings file, defaults."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file = _SETTINGS_FILE.get()
        if file is None:
            return (init_settings, env_settings)
        return (init_settings, env_settings, SettingsFileSource(settings_cls, file))

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name in SECRET_SETTINGS & set(cls.model_fields):
            if data.get(name) is not None or os.environ.get(env_name(name)):
                continue
            secret = secret_from_file(env_name(name) + "_FILE")
            if secret is not None:
                data[name] = secret
        return data


# Settings that hold a secret: read from SENSORWATCH_<NAME> or from the file named by
# SENSORWATCH_<NAME>_FILE, never from a flag (which `ps` shows) or a settings file, and
# never shown (pydantic's SecretStr prints as stars).
SECRET_SETTINGS = frozenset(
    {
        "kafka_sasl_password", "kafka_ssl_key_password", "alertmanager_password",
        "dashboard_token", "dashboard_password", "mqtt_password",
    }
)  # fmt: skip

# Kafka client properties with a setting of their own (or secret): not in kafka_properties.
_KAFKA_OWN_PROPERTIES = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
    "sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password",
})  # fmt: skip
_SECRET_PROPERTY = re.compile(r"password|secret|jaas|\.key$|\.pem$|token")


def _readable_file(value: Path | None) -> Path | None:
    if value is not None and not value.is_file():
        raise ValueError(f"no such file: {value}")
    return value


# A file the program (or a server it starts) reads: it must be there at start-up.
ReadableFile = Annotated[Path | None, AfterValidator(_readable_file)]
PemFile = ReadableFile


class KafkaSettings(_Settings):
    """Where the readings are and how to connect: shared by the producer and the job, and
    turned into each Kafka client's configuration in one place (conf/kafka_client.py)."""

    bootstrap_servers: str = Field(
        "127.0.0.1:9092", min_length=1, description="Kafka bootstrap servers, host:port[,...]"
    )
    topic: str = Field("sensor-readings", min_length=1, description="the readings topic")
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_* protocols)"
    )
    kafka_sasl_username: str | None = Field(None, min_length=1, description="the SASL user")
    kafka_sasl_password: SecretStr | None = Field(
        None, description="the SASL password: environment or _FILE only, never a flag"
    )
    kafka_ssl_ca_location: PemFile = Field(
        None, description="CA certificates (PEM) to trust; default: the system's"
    )
    kafka_ssl_certificate_location: PemFile = Field(
        None, description="this client's certificate (PEM), for mutual TLS"
    )
    kafka_ssl_key_location: PemFile = Field(
        None, description="this client's private key (PEM, PKCS#8), for mutual TLS"
    )
    kafka_ssl_key_password: SecretStr | None = Field(
        None, description="the private key's password: environment or _FILE only"
    )
    kafka_properties: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="any other Kafka client property both clients know, as KEY=VALUE,... "
        "(e.g. client.id=sw,ssl.endpoint.identification.algorithm=https); no secrets",
    )

    _parse_kafka_properties = field_validator("kafka_properties", mode="before")(_parse_pairs)

    @field_validator("kafka_properties")
    @classmethod
    def _pass_through(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if key in _KAFKA_OWN_PROPERTIES:
                raise ValueError(f"{key} has a setting of its own (see --help)")
            if _SECRET_PROPERTY.search(key):
                raise ValueError(
                    f"{key} would put a secret where flags and logs show it; use the "
                    "SENSORWATCH_KAFKA_SASL_PASSWORD or _SSL_KEY_PASSWORD settings"
                )
            if not re.fullmatch(r"[a-z][a-z0-9]*(\.[a-z0-9]+)*", key):
                raise ValueError(f"{key!r} is not a Kafka client property name")
        return value

    @model_validator(mode="after")
    def _connection_is_whole(self) -> KafkaSettings:
        sasl = self.kafka_security_protocol.startswith("SASL_")
        tls = self.kafka_security_protocol.endswith("SSL")
        given = {
            name for name in type(self).model_fields
            if name.startswith("kafka_s") and name != "kafka_security_protocol"
            and getattr(self, name) is not None
        }  # fmt: skip
        sasl_given = {n for n in given if n.startswith("kafka_sasl_")}
        tls_given = {n for n in given if n.startswith("kafka_ssl_")}
        if sasl:
            missing = {"kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password"}
            missing -= sasl_given
            if missing:
                raise ValueError(
                    f"kafka_security_protocol {self.kafka_security_protocol} needs "
                    + ", ".join(sorted(missing))
                )
        elif sasl_given:
            raise ValueError(
                f"{', '.join(sorted(sasl_given))} need kafka_security_protocol SASL_SSL or "
                "SASL_PLAINTEXT"
            )
        if tls_given and not tls:
            raise ValueError(
                f"{', '.join(sorted(tls_given))} need kafka_security_protocol SSL or SASL_SSL"
            )
        pair = {"kafka_ssl_certificate_location", "kafka_ssl_key_location"}
        if len(pair & tls_given) == 1:
            raise ValueError("mutual TLS needs both kafka_ssl_certificate_location and _key_")
        return self


class WhoIsThereSettings(_Settings):
    """The credentials the dashboard and every /metrics endpoint ask for (one secret for
    both: the people and the Prometheus that read the pipeline)."""

    dashboard_user: str | None = Field(
        None, min_length=1, description="user for basic auth of the dashboard and /metrics"
    )
    dashboard_password: SecretStr | None = Field(
        None, description="basic auth password: environment or _FILE only, never a flag"
    )
    dashboard_token: SecretStr | None = Field(
        None,
        description="a token API clients send as 'Authorization: Bearer <token>': "
        "environment or _FILE only",
    )

    @field_validator("dashboard_user", "dashboard_password", "dashboard_token", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # Compose passes an unset .env variable as an empty string.
        return None if value == "" else value

    @model_validator(mode="after")
    def _basic_auth_whole(self) -> WhoIsThereSettings:
        if (self.dashboard_user is None) != (self.dashboard_password is None):
            raise ValueError(
                "basic auth needs both dashboard_user and SENSORWATCH_DASHBOARD_PASSWORD (or _FILE)"
            )
        return self

    @property
    def asks_who_is_there(self) -> bool:
        """True when credentials are required (a token or basic auth)."""
        return self.dashboard_token is not None or self.dashboard_user is not None

    def credentials(self) -> tuple[str | None, str | None, str | None]:
        """(token, user, password) as plain strings, for the credentials check."""
        return (
            self.dashboard_token.get_secret_value() if self.dashboard_token else None,
            self.dashboard_user,
            self.dashboard_password.get_secret_value() if self.dashboard_password else None,
        )


def metrics_port(default: int) -> Any:
    """The ``metrics_port`` field of a program whose /metrics listens on ``default``."""
    return Field(
        default,
        ge=0,
        le=65535,
        description="port of its /metrics (Prometheus text format); 0: a free port, said at start",
    )


class MetricsSettings(WhoIsThereSettings):
    """A program's own /metrics endpoint for Prometheus (each program sets its port)."""

    metrics: bool = Field(True, description="serve /metrics for Prometheus")
    metrics_host: str = Field("127.0.0.1", min_length=1, description="address /metrics listens on")
    metrics_port: int = metrics_port(0)
    metrics_private_network: bool = Field(
        False,
        description="metrics_host is reached only on a private network this program shares "
        "with Prometheus (compose's), not published: no credentials asked",
    )

    @model_validator(mode="after")
    def _metrics_guarded_beyond_loopback(self) -> MetricsSettings:
        if (
            self.metrics
            and not is_loopback(self.metrics_host)
            and not self.metrics_private_network
            and not self.asks_who_is_there
        ):
            raise ValueError(
                f"/metrics would answer at {self.metrics_host}, beyond loopback, without "
                "asking who is there: set SENSORWATCH_DASHBOARD_TOKEN (or _FILE), or "
                "dashboard_user with SENSORWATCH_DASHBOARD_PASSWORD (or _FILE); or, on a "
                "network only Prometheus shares, metrics_private_network"
            )
        return self


class RulesSettings(_Settings):
    """The alert rules file (contract/rules.py, docs/alerting.md): the job alerts by it,
    the producer scripts incidents around its thresholds, the dashboard draws them, the
    notifier ends episodes by their resolve holds. Read and checked at start."""

    rules: Path = Field(
        RULES_FILE, description="the alert rules file (TOML, docs/alerting.md), checked at start"
    )
    _rule_set: RuleSet | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _rules_valid(self) -> RulesSettings:
        try:
            self._rule_set = read_rules(self.rules)
        except RulesError as exc:
            raise ValueError(f"--rules ({env_name('rules')}): {exc}") from None
        return self

    @property
    def alert_rules(self) -> RuleSet:
        """The rules of ``rules`` as read at start."""
        assert self._rule_set is not None  # set by validation
        return self._rule_set


def _topic_layout(value: str) -> str:
    TopicLayout(value)  # ValueError says what is wrong with it
    return value


class TopicLayoutSettings(_Settings):
    """Where devices publish readings on MQTT (contract/devices.py): the bridge reads by
    it, publishers write by it, the local broker's ACL is made from it."""

    mqtt_topic_layout: Annotated[str, AfterValidator(_topic_layout)] = Field(
        DEFAULT_TOPIC_LAYOUT,
        description="where devices publish readings: a topic template with {sensor_id} "
        "(the Kafka key) and optionally {site} (the device's level) and + levels",
    )

    @property
    def topic_layout(self) -> TopicLayout:
        """The layout of mqtt_topic_layout."""
        return TopicLayout(self.mqtt_topic_layout)


class MqttSettings(TopicLayoutSettings):
    """Where the MQTT broker is and how to connect to it (docs/devices.md): the bridge's,
    and any publisher's of device readings."""

    mqtt_host: str = Field("127.0.0.1", min_length=1, description="the MQTT broker's host")
    mqtt_port: int = Field(1883, ge=1, le=65535, description="the MQTT broker's port")
    mqtt_username: str | None = Field(None, min_length=1, description="the MQTT user")
    mqtt_password: SecretStr | None = Field(
        None, description="the MQTT user's password: environment or _FILE only, never a flag"
    )
    mqtt_tls: bool = Field(False, description="connect with TLS")
    mqtt_ca_location: PemFile = Field(
        None, description="CA certificates (PEM) to trust with mqtt_tls; default: the system's"
    )
    mqtt_certificate_location: PemFile = Field(
        None, description="this client's certificate (PEM), for brokers that ask for one"
    )
    mqtt_key_location: PemFile = Field(
        None, description="this client's private key (PEM, unencrypted), with the certificate"
    )
    mqtt_protocol: Literal["5", "3.1.1"] = Field(
        "5", description="MQTT protocol version: 5 or 3.1.1"
    )
    mqtt_keepalive: int = Field(
        30, ge=5, le=3600, description="seconds between keep-alive pings to the broker"
    )

    @field_validator("mqtt_username", "mqtt_password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value

    # Named apart from KafkaSettings' _connection_is_whole: pydantic keeps one validator
    # per name, so a class with both bases (the bridge's) would lose this one.
    @model_validator(mode="after")
    def _mqtt_login_is_whole(self) -> MqttSettings:
        if self.mqtt_password is not None and self.mqtt_username is None:
            raise ValueError("SENSORWATCH_MQTT_PASSWORD needs mqtt_username")
        return self

    @model_validator(mode="after")
    def _mqtt_tls_is_whole(self) -> MqttSettings:
        files = {
            name for name in ("mqtt_ca_location", "mqtt_certificate_location", "mqtt_key_location")
            if getattr(self, name) is not None
        }  # fmt: skip
        if files and not self.mqtt_tls:
            raise ValueError(f"{', '.join(sorted(files))} need mqtt_tls")
        if len(files & {"mqtt_certificate_location", "mqtt_key_location"}) == 1:
            raise ValueError("a client certificate needs both mqtt_certificate_location and _key_")
        return self


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

    _aware = field_validator("start_time")(_aware_instant)

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


SparkInterval = Annotated[str, AfterValidator(parse_interval)]


def _at_least(interval: str, seconds: float, shown: str) -> str:
    """``interval`` if it lasts ``seconds`` or more; else a ValueError saying ``shown``."""
    if interval_seconds(interval) < seconds:
        raise ValueError(f"must be at least '{shown}'")
    return interval


class AlertsTopicSettings(_Settings):
    """The Kafka topic of the real-time alert path: the job writes it, the notifier reads it."""

    alerts_topic: str = Field(
        "sensor-alerts",
        min_length=1,
        description="Kafka topic of the real-time alert path (made like the readings "
        "topic when missing): key alert_id, value the alert as JSON",
    )


class JobSettings(KafkaSettings, RulesSettings, AlertsTopicSettings, MetricsSettings):
    """Settings of ``python -m jobs.stream`` (docs/architecture.md#command-line-names);
    the defaults here, an installation's changes in conf/pipeline.toml."""

    metrics_port: int = metrics_port(9108)
    lake: LakeLocation = Field(
        str(VAR_DIR / "lake"),
        validate_default=True,
        description="where the Delta tables and their checkpoints live: a folder, or "
        "s3a://bucket/prefix (endpoint, region and credentials from the AWS_* variables)",
    )
    registry: Path | None = Field(None, description="device registry, JSON lines")
    trigger: str = Field(
        "5 seconds",
        description="'availableNow' (process what is there, then exit) or an interval",
    )
    readers_trigger: SparkInterval = Field(
        "60 seconds",
        description="interval of the windows query, which reads the readings table "
        "(statistics, sustained_high, sensor_silent): its results wait for the watermark "
        "anyway, and a slower pace leaves the cores to ingest and its overheat alerts",
    )
    readers: bool = Field(
        True,
        description="run the windows query, which reads the readings table (statistics, "
        "sustained_high, sensor_silent); false runs ingest alone (readings, quarantine, "
        "overheat_reading), e.g. to measure what the windows cost",
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        "earliest", description="where a new checkpoint starts reading the topic"
    )
    max_offsets_per_trigger: int | None = Field(
        250_000,
        ge=1,
        description="cap on Kafka records per micro-batch: a backlog is worked off in "
        "bounded, committed steps, and new overheat alerts do not wait behind one long batch; "
        "'off' reads all there is in each",
    )
    fail_on_data_loss: bool = Field(
        True,
        description="fail when offsets vanished from Kafka (retention, a recreated topic) "
        "instead of skipping them silently",
    )
    watermark_delay: SparkInterval = Field(
        "2 minutes", description="how late a reading may be and still count in the statistics"
    )
    shuffle_partitions: int = Field(
        4, ge=1, le=512, description="partitions of the stateful operators (fixed per checkpoint)"
    )
    master: str = Field(
        "local[2]",
        min_length=1,
        description="Spark master URL; in local mode (local[N]) N task slots for the lake "
        "path, to which the job adds one per topic partition for the real-time path",
    )
    realtime: bool = Field(
        True,
        description="run the real-time alert path: overheat_reading on every hot reading, "
        "on the Kafka topic alerts_topic within milliseconds (jobs/queries/realtime.py); it holds "
        "one task slot per partition of the readings topic while it runs",
    )
    realtime_checkpoint_interval: SparkInterval = Field(
        "1 minute",
        description="how often the real-time query commits its progress (not a latency): "
        "after a failure at most this much is sent again, and each commit pauses the path "
        "for a moment (at least 5 seconds)",
    )
    realtime_topic_check: SparkInterval = Field(
        "30 seconds",
        description="how often the job looks at the readings topic's partitions (a new one "
        "needs a task slot of the real-time path: the slots are counted again) and at the "
        "alerts topic (made again if deleted)",
    )
    rules_settle: SparkInterval = Field(
        "15 seconds",
        description="how long the rules file must stay unchanged before the job takes an "
        "edit of it: a file written in place is never taken half-written (renaming a "
        "finished file over it is atomic; docs/alerting.md)",
    )
    lease_expiry: float = Field(
        15.0,
        ge=3,
        le=600,
        description="seconds the job's lease on its lake lasts without a renewal (it renews "
        "every quarter of this): a job killed or cut off is replaced after this long; a "
        "clean stop hands the lake over at once (lake/lease.py)",
    )
    standby: bool = Field(
        False,
        description="when another job holds the lake: wait, and take over when it stops "
        "renewing, instead of exiting",
    )
    driver_memory: str = Field(
        "1g",
        description="the heap of Spark's JVM (in local mode driver and executors): the "
        "windows query's state takes about 250 bytes per reading inside the watermark, so "
        "1g holds 5,000 readings/s at a 2-minute watermark; raise it for more "
        "(docs/streaming-job.md#memory)",
    )
    metrics_flush_seconds: float = Field(
        10.0, gt=0, description="how often pipeline_metrics is written while running"
    )
    registry_refresh_batches: int = Field(
        10, ge=1, description="check the registry file for changes every this many batches"
    )
    spark_ui: bool = Field(False, description="serve Spark's web UI (port 4040)")
    spark_conf: Annotated[dict[str, str], NoDecode] = Field(
        {},
        description="any other Spark property, as KEY=VALUE,KEY=VALUE (e.g. "
        "spark.driver.maxResultSize=64m); it wins over SensorWatch's own",
    )
    maintenance: bool = Field(
        True,
        description="keep the tables healthy while running: compaction, log checkpoints, "
        "VACUUM and log expiry, raw_retention (jobs/writer/maintenance.py); false leaves that to "
        "another tool, which must then be the only one compacting",
    )
    maintenance_interval: SparkInterval = Field(
        "15 seconds", description="how often maintenance looks at the tables"
    )
    compact_min_files: int = Field(
        20,
        ge=2,
        description="compact a table once it holds this many files smaller than "
        "compact_small_mb (at a 1 s trigger: every 20 s or so)",
    )
    compact_small_mb: int = Field(
        8,
        ge=1,
        le=1024,
        description="the frequent compaction turns small files into files of about this "
        "size; a file under it is rewritten with newer ones, so a larger size rewrites more",
    )
    compact_target_mb: int = Field(
        128,
        ge=1,
        le=4096,
        description="once an hour, files under this size are compacted into files of about "
        "this size: fewer files for readers of a long-running table",
    )
    vacuum_retention: SparkInterval = Field(
        "1 hour",
        description="how long the files compaction and retention replaced, and the log "
        "entries of old commits, are kept. It bounds how long a Delta stream reading a "
        "table (other than the job's own windows query, which maintenance waits for) may be "
        "stopped, and how far back time travel reaches. Longer costs every commit: "
        "delta-rs lists the whole log on each (docs/streaming-job.md)",
    )
    raw_retention: SparkInterval | None = Field(
        None,
        description="delete readings and quarantine rows ingested longer ago than this "
        "(e.g. '30 days'); empty or 'off' (the default) keeps them for ever. Statistics, "
        "alerts and incidents are kept either way",
    )
    log_level: Literal["error", "warn", "info", "debug"] = Field(
        "warn",
        description="level of Spark's own log lines (stderr): 'warn' shows real problems and "
        "hides the known-harmless ones (conf/log4j2.properties); 'info' or 'debug' show "
        "everything Spark says, for troubleshooting",
    )

    _parse_spark_conf = field_validator("spark_conf", mode="before")(_parse_pairs)

    @field_validator("spark_conf")
    @classmethod
    def _spark_properties(cls, value: dict[str, str]) -> dict[str, str]:
        wrong = [key for key in value if not key.startswith("spark.")]
        if wrong:
            raise ValueError(f"not a Spark property (spark.*): {', '.join(wrong)}")
        return value

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        if value.strip().lower() == "availablenow":
            return "availableNow"
        return parse_interval(value)

    @field_validator("raw_retention", "max_offsets_per_trigger", mode="before")
    @classmethod
    def _off_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "off", "none"):
            return None
        return value

    @field_validator("vacuum_retention")
    @classmethod
    def _retention_long_enough(cls, value: str) -> str:
        # A reader's snapshot must outlive the files it is reading.
        return _at_least(value, 30, "30 seconds")

    @model_validator(mode="after")
    def _small_below_target(self) -> JobSettings:
        if self.compact_small_mb > self.compact_target_mb:
            raise ValueError(
                f"--compact-small-mb ({self.compact_small_mb}) must not exceed "
                f"--compact-target-mb ({self.compact_target_mb}); environment "
                "SENSORWATCH_COMPACT_SMALL_MB and SENSORWATCH_COMPACT_TARGET_MB"
            )
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("realtime_checkpoint_interval")
    @classmethod
    def _realtime_interval(cls, value: str) -> str:
        # Spark's floor (spark.sql.streaming.realTimeMode.minBatchDuration).
        return _at_least(value, 5, "5 seconds")

    @field_validator("realtime_topic_check", "rules_settle")
    @classmethod
    def _a_second_to_an_hour(cls, value: str) -> str:
        # Below a second the file or the broker would be asked all the time; above an
        # hour an edit or a new partition would wait longer than anyone expects.
        if interval_seconds(value) > 3600:
            raise ValueError("must be at most '1 hour'")
        return _at_least(value, 1, "1 second")

    @property
    def realtime_topic_check_seconds(self) -> float:
        """realtime_topic_check in seconds."""
        return interval_seconds(self.realtime_topic_check)

    @property
    def rules_settle_seconds(self) -> float:
        """rules_settle in seconds."""
        return interval_seconds(self.rules_settle)

    @property
    def available_now(self) -> bool:
        """True for the run-what-is-there-then-exit trigger."""
        return self.trigger == "availableNow"

    @property
    def maintenance_interval_seconds(self) -> float:
        """maintenance_interval in seconds."""
        return interval_seconds(self.maintenance_interval)

    @property
    def vacuum_retention_seconds(self) -> float:
        """vacuum_retention in seconds."""
        return interval_seconds(self.vacuum_retention)

    @property
    def raw_retention_seconds(self) -> float | None:
        """raw_retention in seconds (None: off)."""
        return None if self.raw_retention is None else interval_seconds(self.raw_retention)


# The job's settings file; the ops view reads the settings it shares with the job from it
# (the lake, the thresholds), so a lake or threshold set there is seen by both.
PIPELINE_CONFIG = PROJECT_ROOT / "conf" / "pipeline.toml"
# The job's settings file as the programs that read its lake take it: what they share.
SHARED_FILE = SettingsFile(PIPELINE_CONFIG, shared=True)


class LakeReaderSettings(_Settings):
    """Settings of a program that only reads the lake (the ops view)."""

    lake: LakeLocation = Field(
        JobSettings.model_fields["lake"].default,
        validate_default=True,
        description="where the Delta tables are (the job's --lake): a folder or "
        "s3a://bucket/prefix",
    )


class AlertsCliSettings(LakeReaderSettings, RulesSettings):
    """Settings of ``scripts/alerts`` (``python -m ops.alerts_cli``)."""

    follow_interval: float = Field(
        1.0, gt=0, le=60, description="seconds between two looks at the alerts table (--follow)"
    )


# Where Alertmanager answers on a laptop (scripts/alertmanager-local's port).
ALERTMANAGER_URL = "http://127.0.0.1:9093"


class AlertmanagerSettings(_Settings):
    """Where the Prometheus Alertmanager that pages people answers."""

    alertmanager_url: str = Field(
        ALERTMANAGER_URL,
        pattern=r"^https?://",
        description="base URL of the Prometheus Alertmanager (its API and web UI)",
    )
    alertmanager_user: str | None = Field(
        None, min_length=1, description="user for Alertmanager's basic auth, if it asks"
    )
    alertmanager_password: SecretStr | None = Field(
        None, description="basic auth password: environment or _FILE only, never a flag"
    )
    alertmanager_ca_location: PemFile = Field(
        None, description="CA certificates (PEM) to trust for an https Alertmanager"
    )

    @model_validator(mode="after")
    def _basic_auth_is_whole(self) -> AlertmanagerSettings:
        if (self.alertmanager_user is None) != (self.alertmanager_password is None):
            raise ValueError(
                "Alertmanager's basic auth needs both alertmanager_user and "
                "SENSORWATCH_ALERTMANAGER_PASSWORD (or _FILE)"
            )
        return self


class RealtimeAlertsSettings(KafkaSettings, AlertsTopicSettings):
    """A reader of the real-time path's alerts (the notifier, the dashboard)."""

    realtime_alerts: bool = Field(
        True,
        description="also follow the real-time path's alerts (alerts_topic on Kafka) as they "
        "arrive: the notifier posts each to Alertmanager as the incident it opens or "
        "extends, the dashboard shows it; false: the lake's tables only",
    )


class NotifierSettings(
    LakeReaderSettings,
    AlertmanagerSettings,
    RealtimeAlertsSettings,
    RulesSettings,
    MetricsSettings,
):
    """Settings of ``python -m ops.notify``: keeps Alertmanager in sync with ``incidents``,
    and posts the real-time path's alerts as they arrive."""

    metrics_port: int = metrics_port(9109)
    notify_interval: float = Field(
        10.0, gt=0, le=3600, description="seconds between two syncs with Alertmanager"
    )
    notify_once: bool = Field(False, description="sync once, then exit")
    dashboard_url: str | None = Field(
        "http://127.0.0.1:8080",
        description="the dashboard's URL, linked from every notification (empty: no link)",
    )
    resolved_lookback: float = Field(
        3600.0,
        gt=0,
        description="seconds a resolved incident keeps being posted as resolved: covers an "
        "Alertmanager outage that long (after it, Alertmanager ends the alert on its own)",
    )
    notifier_state_dir: Path = Field(
        VAR_DIR / "notifier",
        description="folder of the notifier's one small file per lake and Alertmanager: up "
        "to which change of the incidents table Alertmanager has been told everything, so "
        "that an episode that began and ended while the notifier, Alertmanager or the lake "
        "was out is reported late after a restart, not lost",
    )
    late_firing: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="seconds an episode reported late (it ended before it could be notified) "
        'shows as firing, labelled late="true", before it ends: long enough for '
        "Alertmanager to notify it (group_wait, group_interval)",
    )


class AlertmanagerLocalSettings(_Settings):
    """Settings of ``scripts/alertmanager-local``: where its ``sensorwatch`` receiver posts."""

    alert_webhook_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="webhook the local Alertmanager posts notifications to (JSON, firing "
        "and resolved); none or empty: the receiver sends nothing",
    )

    @field_validator("alert_webhook_url", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


# host:port of a scrape target: the host a name, an IPv4 address or a bracketed IPv6 one.
_SCRAPE_TARGET = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")
# A Prometheus duration such as 15s, 1m30s, 500ms.
PROMETHEUS_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def parse_targets(value: str | Sequence[str]) -> tuple[str, ...]:
    """``host:port[,host:port...]`` (or a list of them) as a tuple; empty: none.

    Raises:
        ValueError: an entry that is not host:port.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    targets = tuple(item.strip() for item in items if item.strip())
    for target in targets:
        if not _SCRAPE_TARGET.match(target):
            raise ValueError(f"expected host:port, got {target!r}")
    return targets


class PrometheusLocalSettings(_Settings):
    """Settings of ``scripts/prometheus-local``: what it scrapes and where alerts go."""

    prometheus_job_target: str = Field(
        "127.0.0.1:9108",
        description="host:port of the job's /metrics (several: comma-separated, e.g. a "
        "job and its standby; empty: not scraped)",
    )
    prometheus_notifier_target: str = Field(
        "127.0.0.1:9109", description="host:port of the notifier's /metrics"
    )
    prometheus_producer_target: str = Field(
        "127.0.0.1:9110", description="host:port of the producer's /metrics"
    )
    prometheus_dashboard_target: str = Field(
        "127.0.0.1:8080", description="host:port of the dashboard (its /metrics)"
    )
    prometheus_bridge_target: str = Field(
        "",
        description="host:port of the MQTT bridge's /metrics (python -m bridge, default port "
        "9111; empty: not scraped, as without devices over MQTT)",
    )
    alertmanager_url: str = Field(
        ALERTMANAGER_URL,
        pattern=r"^https?://",
        description="base URL of the Alertmanager the pipeline's alerts go to (the one "
        "ops.notify posts incidents to)",
    )
    prometheus_scrape_interval: str = Field(
        "15s", pattern=PROMETHEUS_DURATION.pattern, description="how often Prometheus scrapes"
    )
    prometheus_evaluation_interval: str = Field(
        "15s", pattern=PROMETHEUS_DURATION.pattern, description="how often it evaluates the rules"
    )
    prometheus_scrape_token_file: Path | None = Field(
        None,
        description="a file holding the bearer token /metrics asks for (the dashboard's "
        "token); Prometheus reads it itself",
    )
    prometheus_scrape_user: str | None = Field(
        None, min_length=1, description="user for /metrics behind basic auth"
    )
    prometheus_scrape_password_file: Path | None = Field(
        None, description="a file holding that user's password; Prometheus reads it itself"
    )
    # Alertmanager behind basic auth and TLS: the notifier's own variables, so that one
    # set of them serves both (Prometheus takes the password's file, not its value).
    alertmanager_user: str | None = Field(
        None, min_length=1, description="user for Alertmanager's basic auth, if it asks"
    )
    alertmanager_password_file: ReadableFile = Field(
        None,
        description="a file holding that user's password, which Prometheus reads itself "
        "(the notifier reads the same file)",
    )
    alertmanager_ca_location: PemFile = Field(
        None, description="CA certificates (PEM) to trust for an https Alertmanager"
    )

    @field_validator(
        "prometheus_job_target", "prometheus_notifier_target",
        "prometheus_producer_target", "prometheus_dashboard_target",
        "prometheus_bridge_target",
    )  # fmt: skip
    @classmethod
    def _targets(cls, value: str) -> str:
        try:
            parse_targets(value)
        except ValueError:
            raise ValueError("expected host:port[,host:port...], no scheme or path") from None
        return value

    @field_validator(
        "prometheus_scrape_token_file", "prometheus_scrape_user",
        "prometheus_scrape_password_file", "alertmanager_user", "alertmanager_password_file",
        "alertmanager_ca_location", mode="before",
    )  # fmt: skip
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        # Compose passes an unset .env variable as an empty string.
        return None if value == "" else value

    @model_validator(mode="after")
    def _auth_is_whole(self) -> PrometheusLocalSettings:
        if (self.prometheus_scrape_user is None) != (self.prometheus_scrape_password_file is None):
            raise ValueError(
                "basic auth for scraping needs both prometheus_scrape_user and "
                "prometheus_scrape_password_file"
            )
        if self.prometheus_scrape_token_file is not None and self.prometheus_scrape_user:
            raise ValueError("scraping takes a token file or basic auth, not both")
        if (self.alertmanager_user is None) != (self.alertmanager_password_file is None):
            value_only = self.alertmanager_password_file is None and os.environ.get(
                env_name("alertmanager_password")
            )
            raise ValueError(
                "basic auth for Alertmanager needs both alertmanager_user and "
                f"alertmanager_password_file ({env_name('alertmanager_password_file')})"
                + (
                    f"; {env_name('alertmanager_password')} is set, but Prometheus reads "
                    "the password from a file itself"
                    if value_only
                    else ""
                )
            )
        return self


class DashboardSettings(
    LakeReaderSettings,
    RulesSettings,
    AlertmanagerSettings,
    RealtimeAlertsSettings,
    WhoIsThereSettings,
):
    """Settings of the dashboard (``python -m ops.dashboard``)."""

    dashboard_host: str = Field("127.0.0.1", min_length=1, description="address to listen on")
    dashboard_port: int = Field(8080, ge=1, le=65535, description="port to listen on")
    registry: Path | None = Field(
        None, description="device registry (JSON lines): per-sensor max_temp_c thresholds"
    )
    refresh_seconds: float = Field(
        5.0, ge=1, le=3600, description="how often the page refreshes itself"
    )
    open_minutes: float = Field(
        60.0, gt=0, description="an alert detected this recently counts as open"
    )
    alertmanager_api_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="base URL the dashboard server itself uses for Alertmanager's API "
        "(silences) where it differs from the browser's alertmanager_url, as in compose "
        "(http://alertmanager:9093); unset: alertmanager_url",
    )
    prometheus_url: str | None = Field(
        "http://127.0.0.1:9090",
        pattern=r"^https?://",
        description="base URL the dashboard server reads the pipeline's metrics from "
        "(Prometheus' HTTP API) for its pipeline view; empty: no such view",
    )
    prometheus_browser_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="Prometheus' address for the browser's links, where it differs from "
        "prometheus_url (compose: the published port); unset: prometheus_url",
    )
    dashboard_published_address: str | None = Field(
        None,
        description="the address others reach the dashboard at when it differs from "
        "dashboard_host (compose: the host address its port is published on); "
        "credentials are required unless that address is loopback",
    )

    @field_validator("prometheus_url", "prometheus_browser_url", mode="before")
    @classmethod
    def _no_prometheus(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _guarded_beyond_loopback(self) -> DashboardSettings:
        reachable = self.dashboard_published_address or self.dashboard_host
        if not is_loopback(reachable) and not self.asks_who_is_there:
            raise ValueError(
                f"the dashboard would answer at {reachable}, beyond loopback, without "
                "asking who is there (it can silence alerts): set "
                "SENSORWATCH_DASHBOARD_TOKEN (or _FILE), or dashboard_user with "
                "SENSORWATCH_DASHBOARD_PASSWORD (or _FILE)"
            )
        return self


class BridgeSettings(KafkaSettings, MqttSettings, MetricsSettings):
    """Settings of ``python -m bridge``: MQTT in, Kafka out, at least once
    (docs/devices.md)."""

    metrics_port: int = metrics_port(9111)
    mqtt_client_id: str = Field(
        "sensorwatch-bridge",
        min_length=1,
        max_length=23 * 4,
        description="the bridge's MQTT client id: its session (and what the broker queues for "
        "it while it is away) is found by it, so it stays the same across restarts",
    )
    mqtt_session_expiry: int = Field(
        7 * 24 * 3600,
        ge=60,
        le=4_294_967_294,
        description="seconds the broker keeps the bridge's session, and queues readings for "
        "it, while it is away (MQTT 5; a 3.1.1 broker decides itself)",
    )
    mqtt_shared_group: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        pattern=r"^[^/+#]+$",
        description="share the readings among the bridges of this group (an MQTT shared "
        "subscription, $share/<group>/...): each reading goes to one of them; each bridge "
        "keeps its own mqtt_client_id. Unset: this bridge receives every reading",
    )
    mqtt_receive_maximum: int = Field(
        5000,
        ge=1,
        le=65535,
        description="readings the broker may hand the bridge before it acknowledges the first "
        "(MQTT 5): the most in flight, and at most what a crash sends to Kafka twice",
    )
    bridge_stall_after: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds a reading may wait for Kafka before the bridge says, once, that "
        "it stopped acknowledging",
    )
    bridge_shutdown_timeout: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="seconds a stop waits for Kafka to confirm what is in flight; what it "
        "did not confirm stays unacknowledged, and the broker sends it again",
    )


def is_loopback(host: str) -> bool:
    """True for an address only this machine (or container) reaches."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


S = TypeVar("S", bound=BaseModel)


def flag_name(field: str) -> str:
    """The command-line flag of a setting: ``late_fraction`` -> ``--late-fraction``."""
    return "--" + field.replace("_", "-")


def env_name(field: str) -> str:
    """The environment variable of a setting: ``late_fraction`` -> ``SENSORWATCH_LATE_FRACTION``."""
    return ENV_PREFIX + field.upper()


# Settings the rules file took over (docs/alerting.md): where each one went.
MOVED_TO_RULES = {
    "critical_temp_c": "overheat_reading's threshold",
    "warning_temp_c": "sustained_high's threshold",
    "sustained_min_readings": "sustained_high's min_readings",
    "silence_timeout": "sensor_silent's after",
    "incident_hold": "each rule's resolve_after",
}


def _moved(name: str) -> str:
    """Where a setting the rules file took over went, as the end of a sentence."""
    return (
        f"now {MOVED_TO_RULES[name]} in the rules file ({RULES_FILE.name} by default, "
        "--rules; docs/alerting.md)"
    )


def load_settings(
    cls: type[S],
    overrides: dict[str, Any],
    settings_file: SettingsFile | None = None,
    flags: dict[str, str] | None = None,
) -> S:
    """Build ``cls`` from defaults, a settings file, environment and ``overrides`` (flags;
    None = not given), in rising precedence. ``flags`` names a setting's flag where it is
    not ``--<name>`` (the dashboard's ``dashboard_port`` is ``--port``).

    Raises:
        SettingsError: one line per invalid setting, naming its flag and variable.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    if issubclass(cls, RulesSettings):  # refused rather than ignored
        for name in MOVED_TO_RULES:
            if os.environ.get(env_name(name)) is not None:
                raise SettingsError(f"{env_name(name)}: {name} is {_moved(name)}")
    token = _SETTINGS_FILE.set(settings_file)
    try:
        return cls(**given)
    except ValidationError as exc:
        raise invalid(exc, flags) from None
    finally:
        _SETTINGS_FILE.reset(token)


def invalid(
    exc: ValidationError, flags: Mapping[str, str] | None = None, settings: bool = True
) -> SettingsError:
    """A validation failure as one line per field, naming its flag (``flags`` where it is
    not ``--<name>``), with its variable for a ``settings`` field, and the value given
    unless the message says it already or it must not be repeated."""
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        message = error["msg"].removeprefix("Value error, ")
        if not field:
            lines.append(message)
            continue
        got = error.get("input")
        flag = (flags or {}).get(field) or flag_name(field)
        if settings:
            flag += f" ({env_name(field)})"
        echo = not isinstance(got, dict) and field not in _UNECHOED and repr(got) not in message
        lines.append(f"{flag}: {message} (got {got!r})" if echo else f"{flag}: {message}")
    return SettingsError("\n".join(lines))


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

    _aware = field_validator("start_time")(_aware_instant)

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
