"""Silencing an incident from the dashboard, against a real Prometheus Alertmanager.

The dashboard runs as ``python -m ops.dashboard`` (a real uvicorn) with two Alertmanager
addresses, as in compose: the browser's (``--alertmanager-url``, only for links) and its
own (``--alertmanager-api-url``, for the API). ``POST /api/silences`` must create the
silence in Alertmanager, refuse bad input without creating anything, and say plainly
when Alertmanager is down; ``GET /api/incidents`` marks the incidents that an active
silence covers, and still answers without Alertmanager.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from contract.alerts import incident_labels
from local_stack.alertmanager import AlertmanagerInfo
from local_stack.server import free_port
from ops.alertmanager_api import Alertmanager
from ops.dashboard.queries import silence_url
from ops.dashboard.silences import InvalidSilence, parse_request, silencing
from ops.notifier.incident_alerts import incident_alert
from tests.support.alertmanager import (
    Webhook,
    active_alerts,
    alertmanager,
    incident,
    require_alertmanager,
    sensor,
    wait_until,
)
from tests.support.ops_lake import dashboard, get_json, post_json, write_incidents

BROWSER_URL = "http://alertmanager.example:9093"  # only ever put in links


def am_silences(am: AlertmanagerInfo) -> list[dict[str, Any]]:
    """Every silence Alertmanager knows (active, pending and expired)."""
    with urllib.request.urlopen(am.url + "/api/v2/silences", timeout=10) as response:
        return json.loads(response.read())


def am_silence(am: AlertmanagerInfo, silence_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{am.url}/api/v2/silence/{silence_id}", timeout=10) as response:
        return json.loads(response.read())


def expire(am: AlertmanagerInfo, silence_id: str) -> None:
    request = urllib.request.Request(f"{am.url}/api/v2/silence/{silence_id}", method="DELETE")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def am_post_silence(am: AlertmanagerInfo, matchers: list[dict[str, Any]]) -> str:
    """A silence made in Alertmanager directly (as its UI or amtool would)."""
    now = datetime.now(UTC)
    body = {
        "matchers": matchers,
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(hours=2)).isoformat(),
        "createdBy": "amtool",
        "comment": "made elsewhere",
    }
    request = urllib.request.Request(
        am.url + "/api/v2/silences",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["silenceID"]


def matcher(name: str, value: str, regex: bool = False, equal: bool = True) -> dict[str, Any]:
    return {"name": name, "value": value, "isRegex": regex, "isEqual": equal}


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerInfo]:
    require_alertmanager()
    hook = Webhook()
    try:
        with alertmanager(tmp_path_factory.mktemp("alertmanager"), hook) as info:
            yield info
    finally:
        hook.close()


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, Any]]:
    """Firing incidents on sensors of their own, and a resolved one."""
    return {
        "hot": incident(sensor(), "overheat_reading"),
        "warm": incident(sensor(), "sustained_high"),
        "quiet": incident(sensor(), "sensor_silent", site="site-south"),
        "other_rule": incident(sensor(), "sustained_high"),
        "done": incident(
            sensor(), "overheat_reading", status="resolved", resolved_at=datetime.now(UTC)
        ),
    }


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory, rows: dict[str, dict[str, Any]]) -> Path:
    root = tmp_path_factory.mktemp("silence") / "lake"
    write_incidents(root, list(rows.values()))
    return root


@pytest.fixture(scope="module")
def api(am: AlertmanagerInfo, lake: Path) -> Iterator[str]:
    """The dashboard, reaching Alertmanager by an address of its own."""
    args = ("--lake", lake, "--alertmanager-url", BROWSER_URL, "--alertmanager-api-url", am.url)
    with dashboard(*args) as url:
        yield url


@pytest.fixture(scope="module")
def api_without_alertmanager(lake: Path) -> Iterator[str]:
    """The dashboard, with nothing listening where it looks for Alertmanager."""
    gone = f"http://127.0.0.1:{free_port()}"
    with dashboard("--lake", lake, "--alertmanager-url", gone) as url:
        yield url


def incidents_by_sensor(api: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    status, body = get_json(api + "/api/incidents")
    assert status == 200, body
    return body, {i["sensor_id"]: i for i in body["incidents"]}


def test_a_silence_posted_to_the_dashboard_is_active_in_alertmanager(
    api: str, am: AlertmanagerInfo
) -> None:
    sensor_id = sensor()
    before = datetime.now(UTC)
    status, body = post_json(
        api + "/api/silences",
        {"sensor_id": sensor_id, "rule": "sustained_high", "hours": 4, "comment": "on it: Ana"},
    )

    assert status == 200, body
    assert body["sensor_id"] == sensor_id and body["rule"] == "sustained_high"
    silence = am_silence(am, body["silence_id"])
    assert silence["status"]["state"] == "active"
    assert sorted(silence["matchers"], key=lambda m: m["name"]) == [
        matcher("alertname", "sustained_high"),
        matcher("sensor_id", sensor_id),
    ]
    assert (silence["createdBy"], silence["comment"]) == ("sensorwatch dashboard", "on it: Ana")
    starts, ends = parse_iso(silence["startsAt"]), parse_iso(silence["endsAt"])
    assert before - timedelta(seconds=5) <= starts <= datetime.now(UTC)
    assert abs((ends - starts) - timedelta(hours=4)) < timedelta(seconds=5)

    # It silences the alert the notifier posts for such an incident, and only that one.
    row = incident(sensor_id, "sustained_high")
    other = incident(sensor_id, "overheat_reading")
    now = datetime.now(UTC)
    Alertmanager(am.url).post_alerts([incident_alert(row, now, 10), incident_alert(other, now, 10)])

    def states() -> dict[str, list[str]] | None:
        found = {
            a["labels"]["alertname"]: a["status"]
            for a in active_alerts(am.url, sensor_id=sensor_id)
        }
        if len(found) < 2:
            return None
        return {name: s["silencedBy"] for name, s in found.items()}

    silenced_by = wait_until(states, 60, "both alerts in Alertmanager")
    assert silenced_by == {"sustained_high": [body["silence_id"]], "overheat_reading": []}


def test_no_comment_means_the_default_comment(api: str, am: AlertmanagerInfo) -> None:
    status, body = post_json(
        api + "/api/silences", {"sensor_id": sensor(), "rule": "sensor_silent", "hours": 1}
    )

    assert status == 200, body
    assert am_silence(am, body["silence_id"])["comment"] == (
        "acknowledged from the SensorWatch dashboard"
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"sensor_id": "s-1", "rule": "too_hot", "hours": 1}, "rule"),
        ({"sensor_id": "s-1", "hours": 1}, "rule"),
        ({"sensor_id": "", "rule": "sensor_silent", "hours": 1}, "sensor_id"),
        ({"sensor_id": "  ", "rule": "sensor_silent", "hours": 1}, "sensor_id"),
        ({"sensor_id": "x" * 129, "rule": "sensor_silent", "hours": 1}, "sensor_id"),
        ({"sensor_id": "s-1\n", "rule": "sensor_silent", "hours": 1}, "sensor_id"),
        ({"sensor_id": 7, "rule": "sensor_silent", "hours": 1}, "sensor_id"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": 0}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": -1}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": 169}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": "1"}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": True}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent"}, "hours"),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": 1, "comment": 5}, "comment"),
        (
            {"sensor_id": "s-1", "rule": "sensor_silent", "hours": 1, "comment": "c" * 501},
            "comment",
        ),
        ({"sensor_id": "s-1", "rule": "sensor_silent", "hours": 1, "until": "5pm"}, "unknown"),
        (["s-1", "sensor_silent", 1], "expected a JSON object"),
        (b"{not json", "body"),
        (b"x" * 5000, "body"),
    ],
)
def test_bad_input_is_400_and_creates_nothing(
    api: str, am: AlertmanagerInfo, body: Any, field: str
) -> None:
    before = [s["id"] for s in am_silences(am)]
    status, answer = post_json(api + "/api/silences", body)

    assert status == 400
    assert answer["error"].startswith(field), answer
    assert [s["id"] for s in am_silences(am)] == before


def test_only_json_is_accepted(api: str, am: AlertmanagerInfo) -> None:
    # A form or text/plain POST is what another site's page could send without asking.
    before = len(am_silences(am))
    body = json.dumps({"sensor_id": "s-1", "rule": "sensor_silent", "hours": 1}).encode()
    status, answer = post_json(api + "/api/silences", body, content_type="text/plain")

    assert status == 415 and "application/json" in answer["error"]
    assert len(am_silences(am)) == before
    with pytest.raises(urllib.error.HTTPError) as got:
        urllib.request.urlopen(api + "/api/silences", timeout=10)  # a GET
    assert got.value.code == 405


def test_alertmanager_down_is_502_saying_so(api_without_alertmanager: str) -> None:
    status, body = post_json(
        api_without_alertmanager + "/api/silences",
        {"sensor_id": "s-1", "rule": "overheat_reading", "hours": 1},
    )

    assert status == 502
    assert body["error"].startswith("Alertmanager at http://127.0.0.1:")
    assert "not reachable" in body["error"]


def test_without_alertmanager_the_incidents_still_show(
    api_without_alertmanager: str, rows: dict[str, dict[str, Any]]
) -> None:
    body, by_sensor = incidents_by_sensor(api_without_alertmanager)

    assert set(by_sensor) == {r["sensor_id"] for r in rows.values()}
    assert body["open"]["total"] == 4
    assert body["silences_known"] is False and "not reachable" in body["silences_error"]
    assert all(i["silenced"] is None for i in body["incidents"])


def test_incidents_are_marked_by_the_active_silences(
    api: str, am: AlertmanagerInfo, rows: dict[str, dict[str, Any]]
) -> None:
    hot, warm, quiet = rows["hot"], rows["warm"], rows["quiet"]
    # One from the dashboard; one made elsewhere on other labels (a regex on the site);
    # one for another rule on warm's sensor (no match); one expired.
    status, made = post_json(
        api + "/api/silences", {"sensor_id": hot["sensor_id"], "rule": hot["rule"], "hours": 1}
    )
    assert status == 200, made
    elsewhere = am_post_silence(
        am, [matcher("alertname", "sensor_silent"), matcher("site", "site-s.*", regex=True)]
    )
    am_post_silence(
        am, [matcher("alertname", "overheat_reading"), matcher("sensor_id", warm["sensor_id"])]
    )
    expired = am_post_silence(am, [matcher("sensor_id", rows["other_rule"]["sensor_id"])])
    expire(am, expired)

    body, by_sensor = incidents_by_sensor(api)

    assert body["silences_known"] is True and body["silences_error"] is None
    assert body["alertmanager_url"] == BROWSER_URL  # links keep the browser's address
    marked = by_sensor[hot["sensor_id"]]["silenced"]
    assert marked["id"] == made["silence_id"]
    assert marked["created_by"] == "sensorwatch dashboard"
    assert parse_iso(marked["ends_at"]) > datetime.now(UTC) + timedelta(minutes=55)
    assert by_sensor[quiet["sensor_id"]]["silenced"]["id"] == elsewhere
    assert by_sensor[warm["sensor_id"]]["silenced"] is None
    assert by_sensor[rows["other_rule"]["sensor_id"]]["silenced"] is None
    assert by_sensor[hot["sensor_id"]]["silence_url"].startswith(BROWSER_URL + "/#/silences/new")

    # Expired from Alertmanager: no longer marked.
    expire(am, made["silence_id"])
    _, after = incidents_by_sensor(api)
    assert after[hot["sensor_id"]]["silenced"] is None
    assert after[quiet["sensor_id"]]["silenced"]["id"] == elsewhere


def test_the_api_address_defaults_to_the_browser_one(am: AlertmanagerInfo, lake: Path) -> None:
    # scripts/run-local gives only --alertmanager-url: the server uses it for the API too.
    with dashboard("--lake", lake, "--alertmanager-url", am.url) as url:
        status, body = post_json(
            url + "/api/silences", {"sensor_id": sensor(), "rule": "sensor_silent", "hours": 1}
        )
        config = get_json(url + "/api/config")[1]

    assert status == 200, body
    assert am_silence(am, body["silence_id"])["status"]["state"] == "active"
    assert config["alertmanager_url"] == am.url


# --- pure parts: validation and matching ---------------------------------------------------


def test_a_valid_request_and_its_body() -> None:
    wanted = parse_request({"sensor_id": "sensor-0001", "rule": "overheat_reading", "hours": 0.5})
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    assert wanted.body(now) == {
        "matchers": [matcher("alertname", "overheat_reading"), matcher("sensor_id", "sensor-0001")],
        "startsAt": "2026-01-01T12:00:00.000Z",
        "endsAt": "2026-01-01T12:30:00.000Z",
        "createdBy": "sensorwatch dashboard",
        "comment": "acknowledged from the SensorWatch dashboard",
    }
    with pytest.raises(InvalidSilence, match=r"^hours"):
        parse_request({"sensor_id": "s", "rule": "sensor_silent", "hours": float("nan")})


def test_the_labels_are_those_the_notifier_posts() -> None:
    row = incident(sensor(), "sensor_silent")
    no_site = incident(sensor(), "overheat_reading", site=None)
    now = datetime.now(UTC)

    assert incident_labels(row) == incident_alert(row, now, 10)["labels"]
    assert incident_labels(no_site) == incident_alert(no_site, now, 10)["labels"]


@pytest.mark.parametrize(
    ("matchers", "silenced"),
    [
        ([matcher("alertname", "overheat_reading")], True),
        ([matcher("alertname", "overheat_reading"), matcher("sensor_id", "s-2")], False),
        ([matcher("sensor_id", "s-.", regex=True)], True),
        ([matcher("sensor_id", "s-", regex=True)], False),  # anchored at both ends
        ([matcher("severity", "warning", equal=False)], True),  # !=
        ([matcher("site", "north.*", regex=True, equal=False)], False),  # !~
        ([matcher("site", "")], False),
        ([matcher("team", "")], True),  # a missing label is ""
        ([matcher("sensor_id", "(", regex=True)], False),  # unreadable: not silenced
        ([], False),
    ],
)
def test_matchers_as_alertmanager_applies_them(
    matchers: list[dict[str, Any]], silenced: bool
) -> None:
    labels = {
        "alertname": "overheat_reading",
        "severity": "critical",
        "sensor_id": "s-1",
        "site": "north hall",
    }
    silence = {"id": "x", "endsAt": "2026-01-01T00:00:00.000Z", "matchers": matchers}

    assert (silencing([silence], labels) is not None) is silenced


def test_the_longest_matching_silence_is_shown() -> None:
    labels = {"alertname": "overheat_reading", "sensor_id": "s-1"}
    silences = [
        {
            "id": "short",
            "endsAt": "2026-01-01T01:00:00.000Z",
            "matchers": [matcher("sensor_id", "s-1")],
        },
        {
            "id": "long",
            "endsAt": "2026-01-02T01:00:00.000Z",
            "matchers": [matcher("sensor_id", "s-1")],
        },
        {
            "id": "other",
            "endsAt": "2026-01-03T01:00:00.000Z",
            "matchers": [matcher("sensor_id", "s-2")],
        },
    ]

    found = silencing(silences, labels)
    assert found is not None and (found["id"], found["count"]) == ("long", 2)


def test_silence_quoting_matches_the_link() -> None:
    # The link's filter and the API's matchers name the same labels.
    wanted = parse_request({"sensor_id": 'odd "id"', "rule": "sensor_silent", "hours": 1})
    link = urllib.parse.unquote(
        silence_url(BROWSER_URL, wanted.rule, wanted.sensor_id).partition("filter=")[2]
    )

    assert link == '{alertname="sensor_silent",sensor_id="odd \\"id\\""}'
    assert [m["value"] for m in wanted.matchers()] == ["sensor_silent", 'odd "id"']
