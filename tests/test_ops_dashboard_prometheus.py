"""The dashboard's pipeline view from Prometheus (ops/dashboard/prometheus_view.py):
range results as chart lines, and the line the page shows when no Prometheus answers.
The view against a real Prometheus, in Chromium: tests/test_prometheus_stack.py."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

from ops.dashboard.prometheus_view import PrometheusView, lines


def test_a_range_result_becomes_one_time_axis_and_a_line_per_label() -> None:
    found = [
        {"metric": {"query": "ingest"}, "values": [[10, "1"], [25, "2"], [40, "NaN"]]},
        {"metric": {"query": "windows"}, "values": [[25, "0.5"]]},
    ]
    assert lines(found, "query") == {
        "t": [10.0, 25.0, 40.0],
        "lines": {"ingest": [1.0, 2.0, None], "windows": [None, 0.5, None]},
    }


def test_no_prometheus_is_one_line_naming_where_it_was_looked_for() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    got = PrometheusView(url).charts(datetime(2026, 11, 26, tzinfo=UTC))
    assert got["charts"] == {}
    assert got["error"].startswith(f"no Prometheus answers at {url}")
