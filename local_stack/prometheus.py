"""A real Prometheus on loopback, without Docker: ``scripts/prometheus-local``.

Runs Debian's ``prometheus`` (scripts/setup installs it) on 127.0.0.1 only, scraping the
``/metrics`` of the job, the notifier, the producer, the dashboard and, where devices
publish over MQTT, the bridge, evaluating the pipeline's own alerting rules
(conf/prometheus/alerts.yml) and sending what fires to the Alertmanager that pages people
about sensors. One Prometheus per data directory; several
can run side by side on different ports and data directories. The data directory holds:

    prometheus.yml    the config, rendered from conf/prometheus/prometheus.yml on each start
    data/             Prometheus' time series database (kept across restarts)
    prometheus.log    its log (logfmt)
    prometheus.json   pid, port and URL of the running Prometheus

Usage::

    scripts/prometheus-local start [--data-dir DIR] [--port N] [--job-target HOST:PORT]
        [--notifier-target ..] [--producer-target ..] [--dashboard-target ..]
        [--bridge-target ..]
        [--alertmanager-url URL] [--scrape-interval 15s] [--evaluation-interval 15s]
        [--scrape-token-file F | --scrape-user U --scrape-password-file F]
        [--rules PATH] [--config PATH]          # prints prometheus=http://127.0.0.1:N
    scripts/prometheus-local status [--data-dir DIR]
    scripts/prometheus-local stop [--data-dir DIR]
    scripts/prometheus-local render [same options as start] [--out FILE]
        # the config, printed or written to FILE; paths as given (as Prometheus sees them)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from conf.paths import PROJECT_ROOT, VAR_DIR
from conf.settings.alertmanager_client import ALERTMANAGER_URL
from conf.settings.base import SHARED_FILE, load_settings
from local_stack.prometheus_project import (
    PrometheusProjectServer,
    RenderingOptions,
)
from local_stack.server import (
    LOOPBACK,
    LocalServerError,
    RunningHttpServer,
    entry_point,
    logfmt_value,
)
from local_stack.settings import PROMETHEUS_DURATION, PrometheusLocalSettings, parse_targets

DEFAULT_DATA_DIR = VAR_DIR / "prometheus"
DEFAULT_PORT = 9090

TEMPLATE = PROJECT_ROOT / "conf" / "prometheus" / "prometheus.yml"
RULES = PROJECT_ROOT / "conf" / "prometheus" / "alerts.yml"
# Debian's package puts it in /usr/bin; an upstream release's binary on PATH does too.
BINARIES = ("/usr/bin/prometheus", "prometheus")
PROMTOOLS = ("/usr/bin/promtool", "promtool")
# The scrape jobs of conf/prometheus/prometheus.yml: the rules match on these names.
JOB_NAMES = {
    "job": "sensorwatch-job",
    "notifier": "sensorwatch-notifier",
    "producer": "sensorwatch-producer",
    "dashboard": "sensorwatch-dashboard",
    "bridge": "sensorwatch-bridge",
}


class PrometheusError(LocalServerError):
    """A LocalServerError of Prometheus (scripts/prometheus-local)."""


@dataclass(frozen=True)
class Targets:
    """host:port of each program's /metrics; an empty tuple scrapes nothing for it.

    The defaults are the programs' default metrics ports on loopback (the dashboard
    serves /metrics beside its page); the bridge only runs when devices publish over
    MQTT (``scripts/run-local --mqtt``), so none is scraped unless given."""

    job: tuple[str, ...] = ("127.0.0.1:9108",)
    notifier: tuple[str, ...] = ("127.0.0.1:9109",)
    producer: tuple[str, ...] = ("127.0.0.1:9110",)
    dashboard: tuple[str, ...] = ("127.0.0.1:8080",)
    bridge: tuple[str, ...] = ()


@dataclass(frozen=True)
class Intervals:
    """How often Prometheus scrapes and evaluates the rules (Prometheus durations)."""

    scrape: str = "15s"
    evaluation: str = "15s"

    def __post_init__(self) -> None:
        for name, value in (("scrape", self.scrape), ("evaluation", self.evaluation)):
            if not PROMETHEUS_DURATION.match(value):
                raise PrometheusError(f"{name} interval: expected a duration such as 15s, 1m")


@dataclass(frozen=True)
class ScrapeAuth:
    """How Prometheus proves who it is to /metrics behind the dashboard's credentials:
    a bearer token, or basic auth, each secret in a file Prometheus reads itself (so it
    is never in the config, a flag or a log line)."""

    token_file: Path | None = None
    user: str | None = None
    password_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.user is None) != (self.password_file is None):
            raise PrometheusError("basic auth for scraping needs both a user and a password file")
        if self.token_file is not None and self.user is not None:
            raise PrometheusError("scraping takes a token file or basic auth, not both")


@dataclass(frozen=True)
class AlertmanagerAuth:
    """How Prometheus proves who it is to an Alertmanager behind basic auth and TLS (its
    ``--web.config.file``): the user, a file holding the password, which Prometheus reads
    itself (so it is never in the config, a flag or a log line), and the CA to trust for
    https. The same user, password file and CA as the notifier's."""

    user: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.user is None) != (self.password_file is None):
            raise PrometheusError(
                "basic auth for Alertmanager needs both a user and a password file"
            )

    def absolute(self) -> AlertmanagerAuth:
        """The same, its files as absolute paths (Prometheus reads a relative one from
        the config's folder)."""
        return AlertmanagerAuth(
            self.user,
            None if self.password_file is None else self.password_file.resolve(),
            None if self.ca_file is None else self.ca_file.resolve(),
        )


@dataclass(frozen=True)
class PrometheusInfo(RunningHttpServer):
    """A running local Prometheus: ``url`` is its API and web page."""

    URL_NAME: ClassVar[str] = "prometheus"


SERVER = PrometheusProjectServer.named(
    "prometheus", "Prometheus", PrometheusError, PrometheusInfo, TEMPLATE,
    ("prometheus", DEFAULT_PORT, DEFAULT_DATA_DIR), "--storage.tsdb.path",
)  # fmt: skip


def find_binary(names: Sequence[str] | None = None) -> str:
    """The Prometheus executable (``names``: ``BINARIES``), or with ``PROMTOOLS`` its
    rule tester.

    Raises:
        PrometheusError: none is installed, with how to install it.
    """
    return SERVER.find_binary(BINARIES if names is None else names, SERVER.package)


def alertmanager_endpoint(url: str) -> tuple[str, str, str]:
    """(scheme, host:port, path prefix) of an Alertmanager base URL, as Prometheus'
    ``alertmanagers`` config takes it.

    Raises:
        PrometheusError: not an http(s) URL of a host, or one that carries credentials.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(f"Alertmanager URL: expected http(s)://host[:port], got {url!r}")
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in flags, configs and logs.
        raise PrometheusError("Alertmanager URL: no credentials in the URL, please")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise PrometheusError(f"Alertmanager URL: bad port in {url!r}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return parts.scheme, f"{host}:{port}", parts.path.rstrip("/") or "/"


def render_config(
    template: str,
    targets: Targets = Targets(),
    *,
    alertmanager_url: str = ALERTMANAGER_URL,
    rules: Sequence[str | Path] = (RULES,),
    intervals: Intervals = Intervals(),
    scrape_auth: ScrapeAuth = ScrapeAuth(),
    alertmanager_auth: AlertmanagerAuth = AlertmanagerAuth(),
) -> str:
    """The config with its ``${NAME}`` placeholders filled in.

    Addresses and paths are written as given: compose passes service names and the
    paths inside the Prometheus container. Comment lines are left as they are.

    Raises:
        PrometheusError: a placeholder this program does not know, or a bad address.
    """
    scheme, alertmanager, prefix = alertmanager_endpoint(alertmanager_url)
    authorization = (
        {"type": "Bearer", "credentials_file": str(scrape_auth.token_file)}
        if scrape_auth.token_file is not None
        else None
    )
    basic_auth = (
        {"username": scrape_auth.user, "password_file": str(scrape_auth.password_file)}
        if scrape_auth.user is not None
        else None
    )
    am = alertmanager_auth
    am_basic_auth = (
        {"username": am.user, "password_file": str(am.password_file)}
        if am.user is not None
        else None
    )
    am_tls = {"ca_file": str(am.ca_file)} if am.ca_file is not None else None
    try:
        per_job = {
            f"{name.upper()}_TARGETS": list(parse_targets(getattr(targets, name)))
            for name in JOB_NAMES
        }
    except ValueError as exc:
        raise PrometheusError(f"scrape target: {exc}") from None
    # JSON is YAML (flow style), quotes every string safely, and null is "not set".
    values = {
        key: json.dumps(value)
        for key, value in {
            "SCRAPE_INTERVAL": intervals.scrape,
            "EVALUATION_INTERVAL": intervals.evaluation,
            "RULE_FILES": [str(path) for path in rules],
            "ALERTMANAGER_SCHEME": scheme,
            "ALERTMANAGER_PATH_PREFIX": prefix,
            "ALERTMANAGER_TARGETS": [alertmanager],
            "ALERTMANAGER_BASIC_AUTH": am_basic_auth,
            "ALERTMANAGER_TLS_CONFIG": am_tls,
            "SCRAPE_AUTHORIZATION": authorization,
            "SCRAPE_BASIC_AUTH": basic_auth,
            **per_job,
        }.items()
    }

    return SERVER.fill(template, values)


# The text of a config template (its own by default; the server's error: unreadable).
read_template = SERVER.read_template


# The Prometheus running on a data directory, or None (LocalServer.running).
running = SERVER.running


def wait_until_ready(
    url: str, timeout: float = 60.0, alive: Callable[[], bool] | None = None
) -> None:
    """Block until Prometheus answers ``/-/ready``.

    Raises:
        PrometheusError: when ``timeout`` passes first or ``alive`` reports it died.
    """
    SERVER.wait_until_ready(url, timeout, alive)


def startup_error(log: str) -> str | None:
    """What the log of a failed start says went wrong, in plain words, if it says."""
    for line in log.splitlines():
        if "level=error" not in line:
            continue
        if 'msg="loading groups failed"' in line:  # before the config error it causes
            return f"rules invalid: {logfmt_value(line, 'err')}"
        if 'msg="Error loading config' in line:
            return f"config invalid: {logfmt_value(line, 'err')}"
        if "address already in use" in line:
            return f"port in use: {logfmt_value(line, 'err')}"
    return None


def start(
    data_dir: Path = DEFAULT_DATA_DIR,
    port: int = DEFAULT_PORT,
    *,
    targets: Targets = Targets(),
    alertmanager_url: str = ALERTMANAGER_URL,
    rules: Sequence[Path] = (RULES,),
    intervals: Intervals = Intervals(),
    scrape_auth: ScrapeAuth = ScrapeAuth(),
    alertmanager_auth: AlertmanagerAuth = AlertmanagerAuth(),
    config: Path = TEMPLATE,
    timeout: float = 60.0,
) -> PrometheusInfo:
    """Start a Prometheus on ``data_dir`` and return once it is ready (idempotent).

    Renders ``config`` into the data dir first, with ``rules`` and the credentials'
    files (scraping, Alertmanager) as absolute paths (Prometheus reads a relative one from the
    config's folder). When one already runs on ``data_dir`` at ``port``, it is left as
    it is (a changed config is applied by stop and start).

    Raises:
        PrometheusError: no binary, the port is taken, it already runs on another port,
            the config or rules are invalid, or it did not come up (with its log's tail).
    """
    data_dir = data_dir.resolve()
    for rule_file in rules:
        # Prometheus takes a rule_files entry as a glob: a missing file is no error there,
        # just no rules.
        if not Path(rule_file).is_file():
            raise PrometheusError(f"no rule file {rule_file}")
    absolute = ScrapeAuth(
        None if scrape_auth.token_file is None else scrape_auth.token_file.resolve(),
        scrape_auth.user,
        None if scrape_auth.password_file is None else scrape_auth.password_file.resolve(),
    )
    rendered = render_config(
        read_template(config), targets, alertmanager_url=alertmanager_url,
        rules=[Path(r).resolve() for r in rules], intervals=intervals, scrape_auth=absolute,
        alertmanager_auth=alertmanager_auth.absolute(),
    )  # fmt: skip
    current = running(data_dir)
    if current is not None:
        SERVER.check_same(data_dir, "a Prometheus", {"--port": current.port}, {"--port": port})
        wait_until_ready(current.url, timeout)
        if SERVER.config_differs(data_dir, rendered):
            # Other targets (ports moved, the bridge added): Prometheus reads its config
            # again on SIGHUP, so the running one scrapes what this start asked for.
            SERVER.config_file(data_dir).write_text(rendered, encoding="utf-8")
            os.kill(current.pid, signal.SIGHUP)
            print("prometheus-local: reloaded with the new targets", file=sys.stderr)
        return current
    binary = find_binary()
    SERVER.prepare(data_dir, port, rendered)
    # Alerts link back to this URL (generatorURL) rather than to the machine's name.
    url = f"http://{LOOPBACK}:{port}"
    config_file = SERVER.config_file(data_dir)

    def explain(log: str) -> str | None:
        reason = startup_error(log)
        return None if reason is None else f"{reason}\n(rendered from {config} into {config_file})"

    proc = SERVER.launch(
        SERVER.command(binary, data_dir, port, url), data_dir=data_dir,
        state={"port": port, "url": url},
        wait=lambda alive: wait_until_ready(url, timeout, alive), explain=explain,
    )  # fmt: skip
    return PrometheusInfo(proc.pid, port, data_dir)


# Stop it cleanly (LocalServer.stop; True if one ran): it closes its database first,
# so the next start has no write-ahead log to replay.
stop = SERVER.stop


def options(settings: PrometheusLocalSettings) -> dict[str, Any]:
    """What ``settings`` give :func:`render_config` and :func:`start` (keywords)."""
    return {
        "targets": Targets(
            parse_targets(settings.prometheus_job_target),
            parse_targets(settings.prometheus_notifier_target),
            parse_targets(settings.prometheus_producer_target),
            parse_targets(settings.prometheus_dashboard_target),
            parse_targets(settings.prometheus_bridge_target),
        ),
        "alertmanager_url": settings.alertmanager_url,
        "intervals": Intervals(
            settings.prometheus_scrape_interval, settings.prometheus_evaluation_interval
        ),
        "scrape_auth": ScrapeAuth(
            settings.prometheus_scrape_token_file,
            settings.prometheus_scrape_user,
            settings.prometheus_scrape_password_file,
        ),
        "alertmanager_auth": AlertmanagerAuth(
            settings.alertmanager_user,
            settings.alertmanager_password_file,
            settings.alertmanager_ca_location,
        ),
    }


# Flags whose name differs from --<setting>.
FLAGS = {
    "prometheus_job_target": "--job-target",
    "prometheus_notifier_target": "--notifier-target",
    "prometheus_producer_target": "--producer-target",
    "prometheus_dashboard_target": "--dashboard-target",
    "prometheus_bridge_target": "--bridge-target",
    "prometheus_scrape_interval": "--scrape-interval",
    "prometheus_evaluation_interval": "--evaluation-interval",
    "prometheus_scrape_token_file": "--scrape-token-file",
    "prometheus_scrape_user": "--scrape-user",
    "prometheus_scrape_password_file": "--scrape-password-file",
    "alertmanager_user": "--alertmanager-user",
    "alertmanager_password_file": "--alertmanager-password-file",
    "alertmanager_ca_location": "--alertmanager-ca-location",
}


class Options(RenderingOptions):
    """The options of scripts/prometheus-local that are not settings."""

    data_dir: Path = Field(DEFAULT_DATA_DIR, description="its config, database and log")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="API and web port on 127.0.0.1")
    rules: list[Path] | None = Field(
        None,
        description=f"a rule file to load, repeatable (null: {RULES.relative_to(PROJECT_ROOT)})",
    )
    config: Path = Field(TEMPLATE, description="config template to render")


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | render."""
    return SERVER.main(
        argv, Options,
        description="A real Prometheus on 127.0.0.1 (Debian's prometheus) scraping the "
        "pipeline's /metrics, with its alerting rules, configured from "
        "conf/prometheus/prometheus.yml.",
        command=_command, settings=PrometheusLocalSettings, flags=FLAGS,
    )  # fmt: skip


def _command(given: dict[str, object], args: Options) -> int:
    """start or render (LocalServer.main answers stop and status)."""
    settings = load_settings(PrometheusLocalSettings, given, SHARED_FILE, flags=FLAGS)
    rules = args.rules or [RULES]
    if args.command == "render":
        return SERVER.print_or_write(
            render_config(read_template(args.config), rules=rules, **options(settings)), args.out
        )
    info = start(args.data_dir, args.port, rules=rules, config=args.config, **options(settings))
    return SERVER.started(info, f"alerts to {settings.alertmanager_url}")


if __name__ == "__main__":
    entry_point(main)
