"""The dashboard's live alerts (ops/dashboard/live.py) without Kafka: what a page's
stream carries, and that it ends when the server stops."""

from __future__ import annotations

import asyncio
import json

from conf.settings.base import load_settings
from conf.settings.dashboard import DashboardSettings
from ops.dashboard.live import KEEP, LiveAlerts


def alert(n: int) -> dict:
    return {
        "alert_id": f"a{n}", "sensor_id": "sensor-0001", "rule": "overheat_reading",
        "severity": "critical", "window_start": "2026-01-01T00:10:00.000Z",
        "detected_at": "2026-01-01T00:10:05.000Z", "observed_value": 50.0 + n,
    }  # fmt: skip


def live_alerts(said: list[str]) -> LiveAlerts:
    settings = load_settings(DashboardSettings, {"alerts_topic": "alerts-x"})
    return LiveAlerts(settings, log=said.append, warn=said.append)


def event(chunk: str) -> tuple[str, dict]:
    name, data = chunk.strip().split("\n")
    return name.removeprefix("event: "), json.loads(data.removeprefix("data: "))


def test_each_alert_is_kept_once_and_what_is_not_an_alert_is_said() -> None:
    said: list[str] = []
    live = live_alerts(said)

    assert live.add(json.dumps(alert(1)).encode())
    assert not live.add(json.dumps(alert(1)).encode())  # a repeat of its alert_id
    assert not live.add(b"not json")
    assert not live.add(json.dumps({"alert_id": "a2"}).encode())
    for n in range(2, KEEP + 3):
        live.add(json.dumps(alert(n)).encode())

    kept = [a["alert_id"] for a in live.recent()]
    assert len(kept) == KEEP and kept[-1] == f"a{KEEP + 2}" and "a1" not in kept
    assert len(said) == 2 and all("skipped a message of alerts-x" in line for line in said)


def test_a_page_gets_the_kept_alerts_then_each_new_one_until_the_server_stops() -> None:
    live = live_alerts([])
    live.add(json.dumps(alert(1)).encode())

    async def page() -> list[str]:
        stream = live.events()
        chunks = [await anext(stream), await anext(stream)]  # retry, hello
        # A new alert from the consumer's thread, then the server stops.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, live.add, json.dumps(alert(2)).encode())
        chunks.append(await anext(stream))
        await loop.run_in_executor(None, live.close)
        chunks.extend([chunk async for chunk in stream])
        return chunks

    chunks = asyncio.run(asyncio.wait_for(page(), 30))

    assert chunks[0] == "retry: 2000\n\n"
    assert event(chunks[1]) == ("hello", {"topic": "alerts-x", "alerts": [alert(1)]})
    assert event(chunks[2]) == ("alert", alert(2))
    assert len(chunks) == 3  # close() ended the stream
