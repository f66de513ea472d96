"""Settings of the local servers whose configuration SensorWatch writes:
``scripts/alertmanager-local`` (local_stack/alertmanager.py) and ``scripts/prometheus-local``
(local_stack/prometheus.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator

from conf.settings.alertmanager_client import ALERTMANAGER_URL
from conf.settings.base import ProgramSettings, env_name
from conf.settings.values import EmptyIsUnset, PemFile, ReadableFile


class AlertmanagerLocalSettings(ProgramSettings):
    """Settings of ``scripts/alertmanager-local``: where its ``sensorwatch`` receiver posts."""

    alert_webhook_url: Annotated[str | None, EmptyIsUnset] = Field(
        None,
        pattern=r"^https?://",
        description="webhook the local Alertmanager posts notifications to (JSON, firing "
        "and resolved); none or empty: the receiver sends nothing",
    )


# host:port of a scrape target: the host a name, an IPv4 address or a bracketed IPv6 one.
_SCRAPE_TARGET = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")
# A Prometheus duration such as 15s, 1m30s, 500ms.
PROMETHEUS_DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def parse_targets(value: str | Sequence[str]) -> tuple[str, ...]:
    """``host:port[,host:port...]`` (or a list of them) as a tuple; empty: none.

    Raises:
        ValueError: an entry that is not host:port.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    targets = tuple(item.strip() for item in items if item.strip())
    for target in targets:
        if not _SCRAPE_TARGET.match(target):
            raise ValueError(f"expected host:port, got {target!r}")
    return targets


class PrometheusLocalSettings(ProgramSettings):
    """Settings of ``scripts/prometheus-local``: what it scrapes and where alerts go."""

    prometheus_job_target: str = Field(
        "127.0.0.1:9108",
        description="host:port of the job's /metrics (several: comma-separated, e.g. a "
        "job and its standby; empty: not scraped)",
    )
    prometheus_notifier_target: str = Field(
        "127.0.0.1:9109", description="host:port of the notifier's /metrics"
    )
    prometheus_producer_target: str = Field(
        "127.0.0.1:9110", description="host:port of the producer's /metrics"
    )
    prometheus_dashboard_target: str = Field(
        "127.0.0.1:8080", description="host:port of the dashboard (its /metrics)"
    )
    prometheus_bridge_target: str = Field(
        "",
        description="host:port of the MQTT bridge's /metrics (python -m bridge, default port "
        "9111; empty: not scraped, as without devices over MQTT)",
    )
    alertmanager_url: str = Field(
        ALERTMANAGER_URL,
        pattern=r"^https?://",
        description="base URL of the Alertmanager the pipeline's alerts go to (the one "
        "ops.notify posts incidents to)",
    )
    prometheus_scrape_interval: str = Field(
        "15s", pattern=PROMETHEUS_DURATION.pattern, description="how often Prometheus scrapes"
    )
    prometheus_evaluation_interval: str = Field(
        "15s", pattern=PROMETHEUS_DURATION.pattern, description="how often it evaluates the rules"
    )
    prometheus_scrape_token_file: Annotated[Path | None, EmptyIsUnset] = Field(
        None,
        description="a file holding the bearer token /metrics asks for (the dashboard's "
        "token); Prometheus reads it itself",
    )
    prometheus_scrape_user: Annotated[str | None, EmptyIsUnset] = Field(
        None, min_length=1, description="user for /metrics behind basic auth"
    )
    prometheus_scrape_password_file: Annotated[Path | None, EmptyIsUnset] = Field(
        None, description="a file holding that user's password; Prometheus reads it itself"
    )
    # Alertmanager behind basic auth and TLS: the notifier's own variables, so that one
    # set of them serves both (Prometheus takes the password's file, not its value).
    alertmanager_user: Annotated[str | None, EmptyIsUnset] = Field(
        None, min_length=1, description="user for Alertmanager's basic auth, if it asks"
    )
    alertmanager_password_file: Annotated[ReadableFile, EmptyIsUnset] = Field(
        None,
        description="a file holding that user's password, which Prometheus reads itself "
        "(the notifier reads the same file)",
    )
    alertmanager_ca_location: Annotated[PemFile, EmptyIsUnset] = Field(
        None, description="CA certificates (PEM) to trust for an https Alertmanager"
    )

    @field_validator(
        "prometheus_job_target", "prometheus_notifier_target",
        "prometheus_producer_target", "prometheus_dashboard_target",
        "prometheus_bridge_target",
    )  # fmt: skip
    @classmethod
    def _targets(cls, value: str) -> str:
        try:
            parse_targets(value)
        except ValueError:
            raise ValueError("expected host:port[,host:port...], no scheme or path") from None
        return value

    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
        "basic auth for scraping": ("prometheus_scrape_user", "prometheus_scrape_password_file")
    }

    @model_validator(mode="after")
    def _auth_is_whole(self) -> PrometheusLocalSettings:
        if self.prometheus_scrape_token_file is not None and self.prometheus_scrape_user:
            raise ValueError("scraping takes a token file or basic auth, not both")
        # Not in GIVEN_TOGETHER: a user who set the notifier's password variable is told
        # that Prometheus takes it from a file.
        if (self.alertmanager_user is None) != (self.alertmanager_password_file is None):
            value_only = self.alertmanager_password_file is None and os.environ.get(
                env_name("alertmanager_password")
            )
            raise ValueError(
                "basic auth for Alertmanager needs both alertmanager_user and "
                f"alertmanager_password_file ({env_name('alertmanager_password_file')})"
                + (
                    f"; {env_name('alertmanager_password')} is set, but Prometheus reads "
                    "the password from a file itself"
                    if value_only
                    else ""
                )
            )
        return self
