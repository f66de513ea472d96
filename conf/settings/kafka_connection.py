"""Where the readings and the real-time alerts are on Kafka and how to connect: the settings
every Kafka client shares (conf/kafka_client.py turns them into each client's configuration)."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from conf.settings.base import ProgramSettings
from conf.settings.values import PemFile, parse_pairs

# Kafka client properties with a setting of their own (or secret): not in kafka_properties.
_KAFKA_OWN_PROPERTIES = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms",
    "sasl.username", "sasl.password", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.password",
})  # fmt: skip
_SECRET_PROPERTY = re.compile(r"password|secret|jaas|\.key$|\.pem$|token")


class KafkaSettings(ProgramSettings):
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

    _parse_kafka_properties = field_validator("kafka_properties", mode="before")(parse_pairs)

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

    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
        "mutual TLS": ("kafka_ssl_certificate_location", "kafka_ssl_key_location")
    }

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
        return self


class AlertsTopicSettings(ProgramSettings):
    """The Kafka topic of the real-time alert path: the job writes it, the notifier reads it."""

    alerts_topic: str = Field(
        "sensor-alerts",
        min_length=1,
        description="Kafka topic of the real-time alert path (made like the readings "
        "topic when missing): key alert_id, value the alert as JSON",
    )


class RealtimeAlertsSettings(KafkaSettings, AlertsTopicSettings):
    """A reader of the real-time path's alerts (the notifier, the dashboard)."""

    realtime_alerts: bool = Field(
        True,
        description="also follow the real-time path's alerts (alerts_topic on Kafka) as they "
        "arrive: the notifier posts each to Alertmanager as the incident it opens or "
        "extends, the dashboard shows it; false: the lake's tables only",
    )
