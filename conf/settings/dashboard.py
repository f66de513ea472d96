"""Settings of the dashboard, ``python -m ops.dashboard`` (docs/ops-view.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from conf.settings.alertmanager_client import AlertmanagerSettings
from conf.settings.kafka_connection import RealtimeAlertsSettings
from conf.settings.lake import LakeReaderSettings
from conf.settings.metrics_endpoint import WhoIsThereSettings
from conf.settings.rules_file import RulesSettings
from conf.settings.values import is_loopback


class DashboardSettings(
    LakeReaderSettings,
    RulesSettings,
    AlertmanagerSettings,
    RealtimeAlertsSettings,
    WhoIsThereSettings,
):
    """Settings of the dashboard (``python -m ops.dashboard``)."""

    dashboard_host: str = Field("127.0.0.1", min_length=1, description="address to listen on")
    dashboard_port: int = Field(8080, ge=1, le=65535, description="port to listen on")
    registry: Path | None = Field(
        None, description="device registry (JSON lines): per-sensor max_temp_c thresholds"
    )
    refresh_seconds: float = Field(
        5.0, ge=1, le=3600, description="how often the page refreshes itself"
    )
    open_minutes: float = Field(
        60.0, gt=0, description="an alert detected this recently counts as open"
    )
    alertmanager_api_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="base URL the dashboard server itself uses for Alertmanager's API "
        "(silences) where it differs from the browser's alertmanager_url, as in compose "
        "(http://alertmanager:9093); unset: alertmanager_url",
    )
    prometheus_url: str | None = Field(
        "http://127.0.0.1:9090",
        pattern=r"^https?://",
        description="base URL the dashboard server reads the pipeline's metrics from "
        "(Prometheus' HTTP API) for its pipeline view; empty: no such view",
    )
    prometheus_browser_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="Prometheus' address for the browser's links, where it differs from "
        "prometheus_url (compose: the published port); unset: prometheus_url",
    )
    dashboard_published_address: str | None = Field(
        None,
        description="the address others reach the dashboard at when it differs from "
        "dashboard_host (compose: the host address its port is published on); "
        "credentials are required unless that address is loopback",
    )

    @field_validator("prometheus_url", "prometheus_browser_url", mode="before")
    @classmethod
    def _no_prometheus(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _guarded_beyond_loopback(self) -> DashboardSettings:
        reachable = self.dashboard_published_address or self.dashboard_host
        if not is_loopback(reachable) and not self.asks_who_is_there:
            raise ValueError(
                f"the dashboard would answer at {reachable}, beyond loopback, without "
                "asking who is there (it can silence alerts): set "
                "SENSORWATCH_DASHBOARD_TOKEN (or _FILE), or dashboard_user with "
                "SENSORWATCH_DASHBOARD_PASSWORD (or _FILE)"
            )
        return self
