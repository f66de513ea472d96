"""Settings of the MQTT bridge, ``python -m bridge`` (docs/devices.md)."""

from __future__ import annotations

from pydantic import Field

from conf.settings.kafka_connection import KafkaSettings
from conf.settings.metrics_endpoint import MetricsSettings, metrics_port
from conf.settings.mqtt_connection import MqttSettings


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
