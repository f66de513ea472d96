"""The bridge's pieces without a broker: the record an MQTT message becomes, the book of
acknowledgements (in order, never for a lost connection's messages), its /metrics, its
settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from prometheus_client import generate_latest

from bridge.acks import AckBook
from bridge.metrics import ERROR_KINDS, Flight, Tally, bridge_registry
from bridge.records import Record, to_record
from conf.settings.base import SettingsError, env_name, load_settings
from conf.settings.bridge import BridgeSettings
from contract.devices import HEADER_MQTT_TOPIC, HEADER_RECEIVED_AT, TopicLayout

RECORD = Record(b"s", b"{}", ())


def test_a_record_keeps_the_payload_and_says_where_and_when() -> None:
    at = datetime(2026, 12, 6, 10, 15, 30, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    record = to_record("sensors/north/sensor-0001/readings", b"\xff not json", at, TopicLayout())
    assert record.key == b"sensor-0001"
    assert record.value == b"\xff not json"
    assert dict(record.headers) == {
        HEADER_MQTT_TOPIC: b"sensors/north/sensor-0001/readings",
        HEADER_RECEIVED_AT: b"2026-12-06T04:45:30.123Z",  # UTC, whatever the zone given
    }


def test_a_topic_without_a_sensor_goes_with_an_empty_key() -> None:
    # Empty, not null: the job quarantines it (key_without_sensor), where it would judge a
    # record without a key by its payload alone.
    record = to_record("sensors/north//readings", b"{}", datetime.now(UTC), TopicLayout())
    assert record.key == b""
    assert dict(record.headers)[HEADER_MQTT_TOPIC] == b"sensors/north//readings"


def test_acknowledgements_go_in_arrival_order() -> None:
    book, acked = AckBook(), []
    ack = lambda mid, qos: acked.append(mid)  # noqa: E731
    entries = [book.received(mid, 1, RECORD) for mid in (7, 8, 9)]
    assert book.delivered(entries[2].seq, ack) == [] and acked == []
    assert book.delivered(entries[1].seq, ack) == [] and acked == []
    done = book.delivered(entries[0].seq, ack)
    assert [e.mid for e in done] == [7, 8, 9] and acked == [7, 8, 9]
    assert book.in_flight == 0


def test_qos_0_messages_take_their_turn_without_an_acknowledgement() -> None:
    book, acked = AckBook(), []
    first, second = book.received(0, 0, RECORD), book.received(3, 1, RECORD)
    book.delivered(second.seq, lambda mid, qos: acked.append((mid, qos)))
    assert acked == []
    book.delivered(first.seq, lambda mid, qos: acked.append((mid, qos)))
    assert acked == [(3, 1)]


def test_a_lost_connection_forgets_its_messages() -> None:
    book, acked = AckBook(), []
    old = book.received(5, 1, RECORD)
    assert book.connection_lost() == 1
    # The broker sends it again, on the new connection, with the same packet id.
    again = book.received(5, 1, RECORD)
    assert book.delivered(old.seq, lambda mid, qos: acked.append(mid)) == []
    assert acked == []  # nothing for the old connection's copy
    book.delivered(again.seq, lambda mid, qos: acked.append(mid))
    assert acked == [5]


def test_the_oldest_unacknowledged_age() -> None:
    now = [100.0]
    book = AckBook(clock=lambda: now[0])
    assert book.oldest_age() == 0.0
    first = book.received(1, 1, RECORD)
    now[0] = 102.5
    book.received(2, 1, RECORD)
    now[0] = 104.0
    assert book.oldest_age() == 4.0
    book.delivered(first.seq, lambda mid, qos: None)
    assert book.oldest_age() == 1.5


def test_metrics_say_counts_flight_and_every_error_kind() -> None:
    tally = Tally(received=5, forwarded=4, acknowledged=3)
    tally.errors["kafka_delivery"] = 2
    registry, latency = bridge_registry(tally, lambda: Flight(2, 1.25))
    latency.observe(0.004)
    text = generate_latest(registry).decode()
    for line in (
        "sensorwatch_bridge_messages_received_total 5.0",
        "sensorwatch_bridge_messages_forwarded_total 4.0",
        "sensorwatch_bridge_messages_acknowledged_total 3.0",
        "sensorwatch_bridge_messages_in_flight 2.0",
        "sensorwatch_bridge_oldest_unacknowledged_age_seconds 1.25",
        'sensorwatch_bridge_errors_total{kind="kafka_delivery"} 2.0',
        'sensorwatch_bridge_forward_seconds_bucket{le="0.005"} 1.0',
    ):
        assert line in text.splitlines(), line
    for kind in ERROR_KINDS:
        assert f'sensorwatch_bridge_errors_total{{kind="{kind}"}}' in text


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({}, "SENSORWATCH_MQTT_PASSWORD needs mqtt_username"),
        ({"mqtt_username": "b", "mqtt_ca_location": __file__}, "mqtt_ca_location need mqtt_tls"),
    ],
)
def test_the_bridge_s_mqtt_settings_are_checked_beside_kafka_s(
    given: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BridgeSettings has both KafkaSettings' and MqttSettings' checks: each must run.
    monkeypatch.setenv(env_name("mqtt_password"), "secret")
    with pytest.raises(SettingsError, match=says):
        load_settings(BridgeSettings, given)
