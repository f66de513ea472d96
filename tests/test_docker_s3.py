"""`docker compose --profile s3 up`: the same demo with its lake in a bucket of an
S3-compatible service (S3Proxy) instead of the `lake` volume (issue 25).

Needs a Docker engine with Compose v2 (a real one, or scripts/docker-lane); skipped with
the reason where none answers. The first `up` fetches Hadoop's S3 connector (550 MB from
Maven Central) into its volume before the job starts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_stack.compose_s3 import BUCKET, LAKE, SERVICE_BASEDIR
from tests.compose_stack import ComposeStack, compose_unavailable_reason
from tests.polling import STUCK, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]

LONG_RUNNING = {"kafka", "producer", "s3", "job", "dashboard", "alertmanager", "notifier"}
ONE_SHOT = {"topic-init", "alertmanager-init", "s3-init", "s3a-jars"}


@pytest.fixture(scope="module")
def stack() -> Iterator[ComposeStack]:
    """The demo's stack with the s3 profile, up; removed with its volumes afterwards."""
    reason = compose_unavailable_reason()
    if reason:
        pytest.skip(reason)
    stack = ComposeStack(profiles=("s3",))
    stack.build()
    try:
        # `up` waits for s3a-jars to fetch the S3 connector before it starts the job.
        stack.run("up", "--detach", "--no-build", timeout=1200)
        yield stack
    finally:
        stack.down()


def healthy(stack: ComposeStack) -> dict[str, str] | None:
    containers = stack.containers()  # one `ps` a poll, for the health and the exit codes
    health, codes = stack.health(containers), stack.exit_codes(containers)
    exited = {s: codes[s] for s in ONE_SHOT if codes.get(s, 0) != 0}
    assert not exited, f"one-shot steps failed: {exited}\n{stack.logs(*exited)}"
    return health if all(health.get(s) == "healthy" for s in LONG_RUNNING) else None


@pytest.fixture(scope="module")
def first_alert(stack: ComposeStack) -> dict:
    """Every service healthy, and an overheat alert in the bucket's alerts table."""
    try:
        wait_until(lambda: healthy(stack), 900, "every long-running service healthy", every=3)
    except AssertionError as failure:
        raise AssertionError(
            f"{failure}\n{stack.health_report(LONG_RUNNING)}\n{stack.logs('s3', 'job', 'notifier')}"
        ) from None
    try:
        # Read once the job has said it wrote one: each read starts a container.
        alerts = wait_until(
            lambda: stack.said("job", " overheat_reading ") and [
                row for row in stack.read_lake({"alerts": ["sensor_id", "rule"]}, LAKE)["alerts"]
                or [] if row["rule"] == "overheat_reading"
            ],
            600, "an overheat_reading alert in the bucket", every=2,
        )  # fmt: skip
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{stack.logs('s3', 'job', 'notifier')}") from None
    return alerts[0]


def test_the_job_writes_tables_and_checkpoints_to_the_bucket_only(
    stack: ComposeStack, first_alert
) -> None:
    stored = stack.run("exec", "-T", "s3", "ls", f"{SERVICE_BASEDIR}/{BUCKET}/lake").stdout.split()
    on_the_volume = stack.run("exec", "-T", "job", "ls", "-A", "/data/lake").stdout.split()

    assert {"readings", "quarantine", "alerts", "incidents", "_checkpoints"} <= set(stored)
    assert on_the_volume == [], "the lake volume must stay empty with the s3 profile"


def test_the_profile_needs_no_root(stack: ComposeStack, first_alert) -> None:
    """s3-init prepares its volumes, and s3a-jars fetches into its own, as the app's user."""
    users = stack.users()

    assert {name: users[name] for name in ("s3-init", "s3", "s3a-jars")} == {
        "s3-init": "sensorwatch", "s3": "10001:10001", "s3a-jars": "sensorwatch",
    }  # fmt: skip
    assert stack.exit_code("s3-init") == 0 and stack.exit_code("s3a-jars") == 0


def test_the_ops_views_read_the_bucket(stack: ComposeStack, first_alert) -> None:
    sensor = first_alert["sensor_id"]
    health = stack.http_json("DASHBOARD_PORT", "/healthz")
    incidents = wait_until(
        lambda: [
            row for row in stack.http_json("DASHBOARD_PORT", "/api/incidents")["incidents"]
            if row["rule"] == "overheat_reading"
        ],
        STUCK, "the overheat incident on the dashboard", every=2,
    )  # fmt: skip
    cli = stack.run("exec", "-T", "dashboard", "scripts/alerts", "--alerts", "--since", "24h")
    notified = wait_until(
        lambda: stack.http_json(
            "ALERTMANAGER_PORT", "/api/v2/alerts",
            {"active": "true", "filter": 'alertname="overheat_reading"'},
        ),
        STUCK, "the overheat incident active in Alertmanager", every=2,
    )  # fmt: skip

    assert health["lake"] == LAKE and health["lake_exists"] is True
    assert incidents
    assert sensor in cli.stdout and "overheat_reading" in cli.stdout
    assert notified and notified[0]["labels"]["severity"] == "critical"


def test_no_secret_in_the_compose_config_or_the_logs(stack: ComposeStack, first_alert) -> None:
    secret = stack.run("exec", "-T", "job", "python", "-c",
                       "from local_stack.compose_s3 import environment; "
                       "print(environment()['AWS_SECRET_ACCESS_KEY'])").stdout.strip()  # fmt: skip
    config = stack.run("config").stdout
    logs = stack.run("logs", "--no-color", check=False).stdout
    inspect = stack.run("exec", "-T", "s3", "cat", "/proc/1/cmdline").stdout

    assert len(secret) >= 24
    assert secret not in config
    assert secret not in logs
    assert secret not in inspect, "S3Proxy's command line shows in `ps`"
