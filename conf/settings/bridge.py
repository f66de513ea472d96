"""Settings of the MQTT bridge, ``python -m bridge`` (docs/devices.md)."""

from __future__ import annotations

from typing import Literal

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
    mqtt_shared_group: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        pattern=r"^[^/+#]+$",
        description="share the readings among the bridges of this group (an MQTT shared "
        "subscription, $share/<group>/...): each reading goes to one of them; each bridge "
        "keeps its own mqtt_client_id. Unset: this bridge receives every reading",
    )
    mqtt_protocol: Literal["3.1.1"] = Field(  # type: ignore[assignment]
        "3.1.1",
        description="the bridge speaks MQTT 3.1.1 (its engine's client, paho.mqtt.golang); "
        "its session persists, and the broker's max_inflight_messages bounds how many "
        "readings it hands over unacknowledged",
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
