"""The bridge's Python side without a broker: the engine's configuration, its /metrics,
its settings. The engine's own pieces (the record a message becomes, the book of
acknowledgements) are tested in Go: bridge/engine/*_test.go."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest
from prometheus_client import generate_latest

from bridge.engine import engine_config, ignored_kafka_properties
from bridge.metrics import ERROR_KINDS, LATENCY_BUCKETS, Tally, bridge_registry
from common.waiting import poll_until
from conf.settings.base import SettingsError, env_name, load_settings
from conf.settings.bridge import BridgeSettings
from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT


def test_the_engine_is_configured_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(env_name("mqtt_password"), "device-secret")
    settings = load_settings(
        BridgeSettings,
        {
            "mqtt_username": "bridge",
            "mqtt_topic_layout": "plant/{site}/line/{sensor_id}",
            "mqtt_shared_group": "bridges",
            "bootstrap_servers": "k1:9092, k2:9093",
            "kafka_properties": "linger.ms=2,socket.keepalive.enable=true",
        },
    )
    config = engine_config(settings)
    assert config["mqtt"]["subscription"] == "$share/bridges/plant/+/line/+"
    assert config["mqtt"]["password"] == "device-secret"  # on its stdin, never argv
    assert config["sensor_level"] == 3
    assert (config["header_topic"], config["header_received_at"]) == (
        HEADER_MQTT_TOPIC,
        HEADER_RECEIVED_AT,
    )
    assert config["kafka"]["bootstrap"] == ["k1:9092", "k2:9093"]
    assert config["kafka"]["linger_ms"] == 2.0
    assert config["latency_buckets"] == list(LATENCY_BUCKETS)
    assert ignored_kafka_properties(settings) == ["socket.keepalive.enable"]


def test_metrics_say_the_engine_s_counts_flight_latency_and_every_error_kind() -> None:
    counts = [0] * (len(LATENCY_BUCKETS) + 1)
    counts[LATENCY_BUCKETS.index(0.005)] = 1  # one forward of 2.5 to 5 ms
    counts[-1] = 1  # one above the last bound
    tally = Tally.from_report(
        {
            "received": 5, "redelivered": 1, "forwarded": 4, "acknowledged": 3,
            "errors": {"kafka_delivery": 2}, "mqtt_connected": True,
            "kafka_reachable": False, "in_flight": 2, "oldest_age": 1.25,
            "latency_counts": counts, "latency_sum": 40.004,
        }
    )  # fmt: skip
    text = generate_latest(bridge_registry(lambda: tally)).decode()
    for line in (
        "sensorwatch_bridge_messages_received_total 5.0",
        "sensorwatch_bridge_messages_forwarded_total 4.0",
        "sensorwatch_bridge_messages_acknowledged_total 3.0",
        "sensorwatch_bridge_messages_in_flight 2.0",
        "sensorwatch_bridge_oldest_unacknowledged_age_seconds 1.25",
        "sensorwatch_bridge_kafka_reachable 0.0",
        'sensorwatch_bridge_errors_total{kind="kafka_delivery"} 2.0',
        'sensorwatch_bridge_forward_seconds_bucket{le="0.0025"} 0.0',
        'sensorwatch_bridge_forward_seconds_bucket{le="0.005"} 1.0',
        'sensorwatch_bridge_forward_seconds_bucket{le="30.0"} 1.0',
        'sensorwatch_bridge_forward_seconds_bucket{le="+Inf"} 2.0',
        "sensorwatch_bridge_forward_seconds_count 2.0",
        "sensorwatch_bridge_forward_seconds_sum 40.004",
    ):
        assert line in text.splitlines(), line
    for kind in ERROR_KINDS:
        assert f'sensorwatch_bridge_errors_total{{kind="{kind}"}}' in text


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({}, "SENSORWATCH_MQTT_PASSWORD needs mqtt_username"),
        ({"mqtt_username": "b", "mqtt_ca_location": __file__}, "mqtt_ca_location need mqtt_tls"),
        ({"mqtt_username": "b", "mqtt_protocol": "5"}, "--mqtt-protocol .*3.1.1"),
    ],
)
def test_the_bridge_s_mqtt_settings_are_checked_beside_kafka_s(
    given: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BridgeSettings has both KafkaSettings' and MqttSettings' checks: each must run.
    monkeypatch.setenv(env_name("mqtt_password"), "secret")
    with pytest.raises(SettingsError, match=says):
        load_settings(BridgeSettings, given)


def test_a_killed_bridge_leaves_no_engine_holding_its_session() -> None:
    # The engine ends when its standard input does: python -m bridge SIGKILLed included.
    code = (
        "import time\n"
        "from bridge.engine import Engine\n"
        "from conf.settings.base import load_settings\n"
        "from conf.settings.bridge import BridgeSettings\n"
        "engine = Engine(load_settings(BridgeSettings, {'mqtt_port': 1}))\n"
        "print(engine.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    bridge = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        engine = psutil.Process(int(bridge.stdout.readline()))
        assert engine.is_running()
    finally:
        bridge.kill()
        bridge.wait()

    def gone() -> bool:
        return not engine.is_running() or engine.status() == psutil.STATUS_ZOMBIE

    assert poll_until(gone, 10.0, 0.05)
