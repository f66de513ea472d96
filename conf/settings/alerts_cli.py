"""Settings of ``scripts/alerts`` (``python -m ops.alerts_cli``)."""

from __future__ import annotations

from pydantic import Field

from conf.settings.lake import LakeReaderSettings
from conf.settings.rules_file import RulesSettings


class AlertsCliSettings(LakeReaderSettings, RulesSettings):
    """Settings of ``scripts/alerts`` (``python -m ops.alerts_cli``)."""

    follow_interval: float = Field(
        1.0, gt=0, le=60, description="seconds between two looks at the alerts table (--follow)"
    )
