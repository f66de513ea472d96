"""Where devices publish on MQTT and how to connect to the broker (docs/devices.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, SecretStr, model_validator

from conf.settings.base import ProgramSettings
from conf.settings.values import EmptyIsUnset, PemFile
from contract.devices import DEFAULT_TOPIC_LAYOUT, TopicLayout


def _topic_layout(value: str) -> str:
    TopicLayout(value)  # ValueError says what is wrong with it
    return value


class TopicLayoutSettings(ProgramSettings):
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
    mqtt_username: Annotated[str | None, EmptyIsUnset] = Field(
        None, min_length=1, description="the MQTT user"
    )
    mqtt_password: Annotated[SecretStr | None, EmptyIsUnset] = Field(
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

    # Named apart from KafkaSettings' _connection_is_whole: pydantic keeps one validator
    # per name, so a class with both bases (the bridge's) would lose this one.
    @model_validator(mode="after")
    def _mqtt_login_is_whole(self) -> MqttSettings:
        if self.mqtt_password is not None and self.mqtt_username is None:
            raise ValueError("SENSORWATCH_MQTT_PASSWORD needs mqtt_username")
        return self

    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
        "a client certificate": ("mqtt_certificate_location", "mqtt_key_location")
    }

    @model_validator(mode="after")
    def _mqtt_tls_is_whole(self) -> MqttSettings:
        files = {
            name for name in ("mqtt_ca_location", "mqtt_certificate_location", "mqtt_key_location")
            if getattr(self, name) is not None
        }  # fmt: skip
        if files and not self.mqtt_tls:
            raise ValueError(f"{', '.join(sorted(files))} need mqtt_tls")
        return self
