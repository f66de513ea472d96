"""The pipeline's own alerting rules and the Prometheus that runs them, for real.

- conf/prometheus/alerts.yml passes ``promtool check rules``, and every rule has a case
  that must page and one that must not in tests/conf/prometheus/*.yml, which pass
  ``promtool test rules`` (Prometheus' own rule tester: no PromQL of ours is emulated);
- conf/prometheus/prometheus.yml, rendered as scripts/prometheus-local and compose render
  it, passes ``promtool check config``;
- scripts/prometheus-local starts Debian's Prometheus, which scrapes stand-ins for the
  five programs' /metrics (prometheus_client's own server, in this process) and loads
  every rule group; a rule that fires reaches a real Alertmanager's webhook.

Skipped, saying why, only where Debian's prometheus package (prometheus, promtool) or
Alertmanager is not installed (scripts/setup installs both).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge

from conf.paths import PROJECT_ROOT
from local_stack import prometheus as prometheus_local
from local_stack.prometheus import (
    JOB_NAMES,
    PROMTOOLS,
    RULES,
    TEMPLATE,
    PrometheusError,
    ScrapeAuth,
    Targets,
    find_binary,
    read_template,
    render_config,
    stop,
)
from local_stack.server import free_port
from tests.support.alertmanager import Webhook, alertmanager, require_alertmanager
from tests.support.polling import wait_until
from tests.support.prometheus import (
    FAST,
    StandIn,
    api,
    fast_rules,
    local_prometheus,
    require_prometheus,
    shipped_rules,
)

UNIT_TESTS = sorted((PROJECT_ROOT / "tests" / "conf" / "prometheus").glob("*.yml"))
CLI = str(PROJECT_ROOT / "scripts" / "prometheus-local")
SEVERITIES = {"critical", "warning"}
COMPONENTS = {"job", "notifier", "lake", "bridge"}


def require_promtool() -> str:
    """promtool's path; skips the calling test, saying why, when it is not installed."""
    try:
        return find_binary(PROMTOOLS)
    except PrometheusError:
        pytest.skip(
            "needs promtool (/usr/bin/promtool, Debian's prometheus package): run "
            "scripts/setup (apt-get install prometheus)"
        )


def promtool(*args: str | Path) -> str:
    """Run promtool; fail with everything it said unless it succeeds. Its output."""
    command = [require_promtool(), *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{output}"
    return output


def prometheus_cli(*args: str | Path, wrapper: bool = False) -> subprocess.CompletedProcess:
    """Run scripts/prometheus-local: through its bash wrapper (which runs scripts/setup
    first, a second or so) or straight through the venv's Python."""
    command = [CLI] if wrapper else [sys.executable, "-m", "local_stack.prometheus"]
    # Its defaults, not the settings of whoever runs the tests.
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("SENSORWATCH_PROMETHEUS_", "SENSORWATCH_ALERTMANAGER_"))
    }  # fmt: skip
    return subprocess.run(
        [*command, *map(str, args)], capture_output=True, text=True, timeout=120,
        cwd=PROJECT_ROOT, env=env,
    )  # fmt: skip


# --- the rules, with promtool ---------------------------------------------------------


def test_the_rules_pass_promtool_check() -> None:
    output = promtool("check", "rules", RULES)

    assert f"SUCCESS: {len(shipped_rules())} rules found" in output, output


def test_every_rule_says_who_acts_how_urgently_and_where_the_runbook_is() -> None:
    anchors = []
    for rule in shipped_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert rule["labels"]["component"] in COMPONENTS, name
        assert re.fullmatch(r"\d+m", rule["for"]), f"{name}: for {rule['for']}"
        assert "{{" in rule["annotations"]["summary"], f"{name}: summary without a value"
        runbook = re.fullmatch(
            r"docs/runbooks\.md#([a-z0-9-]+)", rule["annotations"]["runbook_url"]
        )
        assert runbook, f"{name}: runbook_url {rule['annotations']['runbook_url']}"
        anchors.append(runbook.group(1))
    assert len(set(anchors)) == len(anchors), f"two rules share a runbook anchor: {anchors}"


def test_every_rule_has_a_case_that_pages_and_one_that_must_not() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for path in UNIT_TESTS:
        suite = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert suite["rule_files"] == ["../../../conf/prometheus/alerts.yml"], path
        for test in suite["tests"]:
            assert test["input_series"], f"{path.name}: {test['name']}: no input series"
            for check in test["alert_rule_test"]:
                (fires if check["exp_alerts"] else quiet).add(check["alertname"])

    names = {rule["alert"] for rule in shipped_rules()}
    assert names - fires == set(), "rules without a case that pages"
    assert names - quiet == set(), "rules without a case that must not page"


def test_the_rules_unit_tests_pass() -> None:
    output = promtool("test", "rules", *UNIT_TESTS)

    assert output.count("SUCCESS") == len(UNIT_TESTS), output


# --- the config, rendered ---------------------------------------------------------------


def test_the_rendered_config_passes_promtool_check(tmp_path: Path) -> None:
    out = tmp_path / "prometheus.yml"

    rendered = prometheus_cli("render", "--out", out, "--scrape-interval", "30s")

    assert rendered.returncode == 0, rendered.stderr
    assert out.stat().st_mode & 0o777 == 0o644  # Prometheus may run as another user
    output = promtool("check", "config", out)
    assert "SUCCESS: 1 rule files found" in output, output
    config = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert config["global"] == {"scrape_interval": "30s", "evaluation_interval": "15s"}
    assert config["rule_files"] == [str(RULES)]
    assert config["alerting"]["alertmanagers"][0]["static_configs"] == [
        {"targets": ["127.0.0.1:9093"]}
    ]
    scraped = {
        job["job_name"]: (job["static_configs"][0]["targets"], job["metrics_path"])
        for job in config["scrape_configs"]
    }
    assert scraped == {
        "sensorwatch-job": (["127.0.0.1:9108"], "/metrics"),
        "sensorwatch-notifier": (["127.0.0.1:9109"], "/metrics"),
        "sensorwatch-producer": (["127.0.0.1:9110"], "/metrics"),
        "sensorwatch-dashboard": (["127.0.0.1:8080"], "/metrics"),
        "sensorwatch-bridge": ([], "/metrics"),  # only where devices publish over MQTT
    }
    assert all(job["authorization"] is None for job in config["scrape_configs"])


@pytest.mark.parametrize("auth", ["token", "basic"])
def test_compose_can_render_it_with_service_names_and_credentials_files(
    auth: str, tmp_path: Path
) -> None:
    secret = tmp_path / "dashboard_secret"
    secret.write_text("not-in-the-config\n")
    scrape_auth = (
        ScrapeAuth(token_file=secret) if auth == "token"
        else ScrapeAuth(user="prometheus", password_file=secret)
    )  # fmt: skip
    out = tmp_path / "prometheus.yml"

    out.write_text(
        render_config(
            read_template(TEMPLATE),
            Targets(
                job=("job:9108", "job-standby:9108"),
                notifier=("notifier:9109",),
                producer=(),
                dashboard=("dashboard:8080",),
                bridge=("bridge:9111",),
            ),
            alertmanager_url="https://alertmanager:9093/am/",
            rules=[RULES],
            scrape_auth=scrape_auth,
        )
    )

    promtool("check", "config", out)
    text = out.read_text()
    assert "not-in-the-config" not in text
    config = yaml.safe_load(text)
    alertmanagers = config["alerting"]["alertmanagers"][0]
    assert (alertmanagers["scheme"], alertmanagers["path_prefix"]) == ("https", "/am")
    assert alertmanagers["static_configs"] == [{"targets": ["alertmanager:9093"]}]
    job, _, producer, _, bridge = config["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["job:9108", "job-standby:9108"]}]
    assert producer["static_configs"] == [{"targets": []}]
    assert bridge["job_name"] == "sensorwatch-bridge"
    assert bridge["static_configs"] == [{"targets": ["bridge:9111"]}]
    for scrape in config["scrape_configs"]:
        if auth == "token":
            assert scrape["authorization"] == {"type": "Bearer", "credentials_file": str(secret)}
            assert scrape["basic_auth"] is None
        else:
            assert scrape["basic_auth"] == {"username": "prometheus", "password_file": str(secret)}
            assert scrape["authorization"] is None


def test_a_bad_setting_is_one_line_naming_its_flag_and_variable() -> None:
    result = prometheus_cli("render", "--job-target", "http://job:9108/metrics")

    assert result.returncode == 2
    assert "--job-target (SENSORWATCH_PROMETHEUS_JOB_TARGET): expected host:port" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_binary_says_to_run_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(prometheus_local, "BINARIES", ("/nonexistent/prometheus",))

    status = prometheus_local.main(["start", "--data-dir", str(tmp_path / "p"), "--port",
                                    str(free_port())])  # fmt: skip

    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "run scripts/setup" in err, err


# --- a real Prometheus --------------------------------------------------------------------


def test_prometheus_scrapes_the_five_programs_and_loads_every_rule_group(tmp_path: Path) -> None:
    require_prometheus()
    registries = {name: CollectorRegistry() for name in JOB_NAMES}
    Gauge("sensorwatch_seconds_since_progress", "stand-in", ["query"],
          registry=registries["job"]).labels("ingest").set(4.5)  # fmt: skip
    Gauge("sensorwatch_alertmanager_up", "stand-in", registry=registries["notifier"]).set(1)
    Counter("sensorwatch_producer_messages_sent", "stand-in",
            registry=registries["producer"]).inc(7)  # fmt: skip
    Gauge("sensorwatch_bridge_messages_in_flight", "stand-in",
          registry=registries["bridge"]).set(3)  # fmt: skip
    data_dir, port = tmp_path / "prometheus", free_port()
    with (
        StandIn(registries["job"]) as job_stand_in,
        StandIn(registries["notifier"]) as notifier_stand_in,
        StandIn(registries["producer"]) as producer_stand_in,
        StandIn(registries["dashboard"]) as dashboard_stand_in,
        StandIn(registries["bridge"]) as bridge_stand_in,
    ):
        job, notifier = job_stand_in.address, notifier_stand_in.address
        producer, dashboard = producer_stand_in.address, dashboard_stand_in.address
        bridge = bridge_stand_in.address
        try:
            started = prometheus_cli(
                "start", "--data-dir", data_dir, "--port", port, "--job-target", job,
                "--notifier-target", notifier, "--producer-target", producer,
                "--dashboard-target", dashboard, "--bridge-target", bridge,
                "--scrape-interval", "1s",
                "--evaluation-interval", "1s", wrapper=True,
            )  # fmt: skip

            assert started.returncode == 0, started.stderr
            url = f"http://127.0.0.1:{port}"
            assert started.stdout.strip().splitlines()[-1] == f"prometheus={url}"
            pid = json.loads((data_dir / "prometheus.json").read_text())["pid"]
            listening = [
                c.laddr for c in psutil.Process(pid).net_connections("all")
                if c.status == "LISTEN"
            ]  # fmt: skip
            assert [(a.ip, a.port) for a in listening] == [("127.0.0.1", port)], listening

            def scraped() -> list[dict[str, Any]]:
                return api(url, "/api/v1/query", query="sensorwatch_seconds_since_progress")[
                    "result"
                ]

            [series] = wait_until(scraped, 30, "the job's stand-in scraped")
            assert series["metric"] == {
                "__name__": "sensorwatch_seconds_since_progress",
                "job": "sensorwatch-job", "instance": job, "query": "ingest",
            }  # fmt: skip
            assert series["value"][1] == "4.5"

            def up() -> dict[str, str]:
                result = api(url, "/api/v1/query", query="up == 1")["result"]
                return {s["metric"]["job"]: s["metric"]["instance"] for s in result}

            wait_until(lambda: len(up()) == 5, 30, f"all five stand-ins up; got {up()}")
            assert up() == {
                "sensorwatch-job": job, "sensorwatch-notifier": notifier,
                "sensorwatch-producer": producer, "sensorwatch-dashboard": dashboard,
                "sensorwatch-bridge": bridge,
            }  # fmt: skip
            sent = api(url, "/api/v1/query", query="sensorwatch_producer_messages_sent_total")
            assert [s["value"][1] for s in sent["result"]] == ["7"]
            held = api(url, "/api/v1/query", query="sensorwatch_bridge_messages_in_flight")
            assert [s["value"][1] for s in held["result"]] == ["3"]

            groups = api(url, "/api/v1/rules")["groups"]
            shipped = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
            assert {g["name"]: [r["name"] for r in g["rules"]] for g in groups} == {
                g["name"]: [r["alert"] for r in g["rules"]] for g in shipped
            }
            assert {g["file"] for g in groups} == {str(RULES)}
            assert all(r["health"] != "err" for g in groups for r in g["rules"]), groups
            log = (data_dir / "prometheus.log").read_text()
            assert "level=error" not in log, log

            status = prometheus_cli("status", "--data-dir", data_dir)
            assert status.returncode == 0 and f"prometheus={url}" in status.stdout
            other_port = prometheus_cli("start", "--data-dir", data_dir, "--port", free_port())
            assert other_port.returncode == 2 and f"at port {port}" in other_port.stderr

            stopped = prometheus_cli("stop", "--data-dir", data_dir)

            assert stopped.returncode == 0 and "stopped" in stopped.stdout
            assert (
                not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            )
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0, "port still open after stop"
            assert prometheus_cli("status", "--data-dir", data_dir).returncode == 1
            assert "See you next time!" in (data_dir / "prometheus.log").read_text()
        finally:
            stop(data_dir)


def test_invalid_or_missing_rules_fail_with_the_reason(tmp_path: Path) -> None:
    require_prometheus()
    bad = tmp_path / "alerts.yml"
    bad.write_text("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up ==\n")
    data_dir = tmp_path / "prometheus"

    result = prometheus_cli("start", "--data-dir", data_dir, "--port", free_port(),
                            "--rules", bad)  # fmt: skip

    assert result.returncode == 2
    assert "rules invalid" in result.stderr and "could not parse expression" in result.stderr
    assert str(bad) in result.stderr and "Traceback" not in result.stderr
    assert prometheus_cli("status", "--data-dir", data_dir).returncode == 1
    # A missing one too: Prometheus itself would take the path as a glob and load nothing.
    missing = prometheus_cli("start", "--data-dir", data_dir, "--port", free_port(),
                             "--rules", tmp_path / "typo.yml")  # fmt: skip
    assert missing.returncode == 2
    assert missing.stderr == f"prometheus-local: no rule file {tmp_path / 'typo.yml'}\n"


def test_a_taken_port_fails_clearly(tmp_path: Path) -> None:
    require_prometheus()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = prometheus_cli("start", "--data-dir", tmp_path / "p", "--port", port)

    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_stalled_then_stopped_job_pages_through_alertmanager(tmp_path: Path) -> None:
    require_prometheus()
    require_alertmanager()
    registry = CollectorRegistry()
    # A job whose ingest query has not reported for 20 minutes on a 5-second trigger.
    Gauge("sensorwatch_trigger_interval_seconds", "stand-in", ["query"],
          registry=registry).labels("ingest").set(5)  # fmt: skip
    Gauge("sensorwatch_seconds_since_progress", "stand-in", ["query"],
          registry=registry).labels("ingest").set(1200)  # fmt: skip
    webhook = Webhook()
    try:
        with (
            alertmanager(tmp_path / "am", webhook) as am,
            StandIn(registry) as stand_in,
        ):
            job = stand_in.address
            with local_prometheus(
                tmp_path / "prometheus",
                targets=Targets(job=(job,), notifier=(), producer=(), dashboard=()),
                alertmanager_url=am.url,
                rules=[fast_rules(tmp_path / "alerts.yml")],
            ) as prometheus:
                webhook.wait_for("firing", timeout=60, alertname="SensorWatchJobStalled")
                _, stalled = webhook.notified(alertname="SensorWatchJobStalled")[0]
                assert stalled["labels"] == {
                    "alertname": "SensorWatchJobStalled", "severity": "critical",
                    "component": "job", "job": "sensorwatch-job", "instance": job,
                    "query": "ingest",
                }  # fmt: skip
                assert stalled["annotations"] == {
                    "summary": f"Query ingest of the SensorWatch job {job} has reported no "
                    "progress for 20m 0s",
                    "runbook_url": "docs/runbooks.md#job-stalled",
                }
                assert stalled["generatorURL"].startswith(prometheus.url)

                # The job stopped on purpose: its target stops answering.
                stand_in.stop()

                webhook.wait_for("firing", timeout=60, alertname="SensorWatchJobDown")
                _, down = webhook.notified(alertname="SensorWatchJobDown")[0]
                assert down["labels"]["instance"] == job
                assert down["labels"]["severity"] == "critical"
                # Its stalled query went with it: resolved, not left firing.
                webhook.wait_for("resolved", timeout=60, alertname="SensorWatchJobStalled")
    finally:
        webhook.close()


def test_a_running_prometheus_started_again_with_other_targets_scrapes_those(
    tmp_path: Path,
) -> None:
    """run-local on a laptop where its Prometheus still runs, with ports moved or the
    bridge added: the running Prometheus reloads its config and scrapes the new targets."""
    require_prometheus()
    data = tmp_path / "prometheus"
    with local_prometheus(data, targets=Targets()) as info:
        moved = Targets(job=("127.0.0.1:19108",), bridge=("127.0.0.1:19111",))
        again = prometheus_local.start(data, info.port, targets=moved, intervals=FAST)
        assert again.pid == info.pid  # the same process, not a new one

        def scraped() -> set[str]:
            url = f"{info.url}/api/v1/targets"
            with urllib.request.urlopen(url, timeout=5) as page:
                active = json.load(page)["data"]["activeTargets"]
            return {t["labels"]["instance"] for t in active}

        wanted = {"127.0.0.1:19108", "127.0.0.1:19111"}
        wait_until(
            lambda: wanted <= scraped(), 30, "the new targets", detail=lambda: str(scraped())
        )
        assert "127.0.0.1:9108" not in scraped()
