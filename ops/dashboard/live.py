"""The dashboard's live alerts: each alert of the real-time path (Kafka ``alerts_topic``)
pushed to every open page as it arrives, as Server-Sent Events (``/api/alerts/live``),
seconds before the lake's ``alerts`` and ``incidents`` rows that the page polls for.

One consumer thread per dashboard reads the topic from its end (ops/alert_topic.py) and
keeps the newest alerts it saw, one per alert_id (every reading of a hot minute repeats
it; a restart of the path replays some): a page that connects gets those first, then each
new one. The page drops a live alert once the lake has its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from conf.settings.dashboard import DashboardSettings
from ops.alert_topic import TopicReader

# Alerts kept for a page that connects: more than a dashboard shows as live at once.
KEEP = 200
# Per page: alerts waiting to be sent to a browser that reads slowly; beyond, it gets the
# rest from the lake at its next refresh.
BACKLOG = 1000
# A comment line this often keeps proxies from closing a quiet stream.
KEEPALIVE_SECONDS = 15.0
# What a browser waits before it reconnects a lost stream (the SSE "retry" field).
RECONNECT_MS = 2000
FIELDS = ("alert_id", "sensor_id", "rule", "severity", "window_start", "detected_at")

_CLOSED = None  # put into a page's queue: the server stops


def sse(event: str, data: Any) -> str:
    """One Server-Sent Event with a JSON payload."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class LiveAlerts:
    """The alerts of ``alerts_topic`` since the dashboard started, for its pages."""

    def __init__(
        self, settings: DashboardSettings, log: Callable[[str], None], warn: Callable[[str], None]
    ) -> None:
        self.settings = settings
        self._warn = warn
        self._reader = TopicReader(
            settings,
            prefix="ops.dashboard",
            # Its own group: every dashboard sees every alert, from the end, each start.
            group_id=f"sensorwatch-dashboard-{uuid.uuid4().hex[:12]}",
            log=log,
            warn=warn,
            meanwhile="the page shows alerts from the lake only",
        )
        self._recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._pages: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Follow the topic on a thread of its own."""
        self._thread = threading.Thread(
            target=self._reader.follow, args=(self.add, self._stop), name="live-alerts", daemon=True
        )
        self._thread.start()

    def add(self, value: bytes) -> bool:
        """One message of the topic; True when it is an alert not seen before (then every
        page gets it). A message that is not an alert is said and skipped."""
        try:
            alert = json.loads(value)
            if not isinstance(alert, dict) or not all(
                isinstance(alert.get(name), str) for name in FIELDS
            ):
                raise ValueError(f"not an alert (needs {', '.join(FIELDS)})")
        except ValueError as exc:
            self._warn(f"ops.dashboard: skipped a message of {self.settings.alerts_topic}: {exc}")
            return False
        with self._lock:
            if alert["alert_id"] in self._recent:
                return False
            self._recent[alert["alert_id"]] = alert
            if len(self._recent) > KEEP:
                self._recent.popitem(last=False)
            pages = list(self._pages)
        for loop, queue in pages:
            self._send(loop, queue, alert)
        return True

    def pages(self) -> int:
        """How many pages follow the stream now."""
        with self._lock:
            return len(self._pages)

    def recent(self) -> list[dict[str, Any]]:
        """The alerts kept, oldest first."""
        with self._lock:
            return list(self._recent.values())

    @staticmethod
    def _send(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, item: Any) -> None:
        def offer() -> None:
            # A page that reads this slowly gets the rest from the lake.
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(item)

        with contextlib.suppress(RuntimeError):  # that page's server loop has ended
            loop.call_soon_threadsafe(offer)

    async def events(self) -> AsyncIterator[str]:
        """One page's stream: the alerts kept, then each new one, until the server stops
        or the page goes away."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue(BACKLOG)
        page = (loop, queue)
        with self._lock:
            self._pages.add(page)
            kept = list(self._recent.values())
        try:
            yield f"retry: {RECONNECT_MS}\n\n"
            yield sse("hello", {"topic": self.settings.alerts_topic, "alerts": kept})
            while not self._stop.is_set():
                try:
                    alert = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": still here\n\n"
                    continue
                if alert is _CLOSED:
                    break
                yield sse("alert", alert)
        finally:
            with self._lock:
                self._pages.discard(page)

    def close(self) -> None:
        """End every page's stream and stop following the topic (the server stops: it
        waits for open streams to end before it exits)."""
        self._stop.set()
        with self._lock:
            pages = list(self._pages)
        for loop, queue in pages:
            self._send(loop, queue, _CLOSED)

    def join(self, timeout: float) -> None:
        """Wait for the consumer to close."""
        if self._thread is not None:
            self._thread.join(timeout)
