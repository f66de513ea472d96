"""Settings of the notifier, ``python -m ops.notify`` (docs/alerting.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from conf.paths import VAR_DIR
from conf.settings.alertmanager_client import AlertmanagerSettings
from conf.settings.kafka_connection import RealtimeAlertsSettings
from conf.settings.lake import LakeReaderSettings
from conf.settings.metrics_endpoint import MetricsSettings, metrics_port
from conf.settings.rules_file import RulesSettings


class NotifierSettings(
    LakeReaderSettings,
    AlertmanagerSettings,
    RealtimeAlertsSettings,
    RulesSettings,
    MetricsSettings,
):
    """Settings of ``python -m ops.notify``: keeps Alertmanager in sync with ``incidents``,
    and posts the real-time path's alerts as they arrive."""

    metrics_port: int = metrics_port(9109)
    notify_interval: float = Field(
        10.0, gt=0, le=3600, description="seconds between two syncs with Alertmanager"
    )
    notify_once: bool = Field(False, description="sync once, then exit")
    dashboard_url: str | None = Field(
        "http://127.0.0.1:8080",
        description="the dashboard's URL, linked from every notification (empty: no link)",
    )
    resolved_lookback: float = Field(
        3600.0,
        gt=0,
        description="seconds a resolved incident keeps being posted as resolved: covers an "
        "Alertmanager outage that long (after it, Alertmanager ends the alert on its own)",
    )
    notifier_state_dir: Path = Field(
        VAR_DIR / "notifier",
        description="folder of the notifier's one small file per lake and Alertmanager: up "
        "to which change of the incidents table Alertmanager has been told everything, so "
        "that an episode that began and ended while the notifier, Alertmanager or the lake "
        "was out is reported late after a restart, not lost",
    )
    late_firing: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="seconds an episode reported late (it ended before it could be notified) "
        'shows as firing, labelled late="true", before it ends: long enough for '
        "Alertmanager to notify it (group_wait, group_interval)",
    )
