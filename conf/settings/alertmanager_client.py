"""Where the Prometheus Alertmanager that pages people answers, and how to log in to it."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from conf.settings.base import ProgramSettings
from conf.settings.values import PemFile

# Where Alertmanager answers on a laptop (scripts/alertmanager-local's port).
ALERTMANAGER_URL = "http://127.0.0.1:9093"


class AlertmanagerSettings(ProgramSettings):
    """Where the Prometheus Alertmanager that pages people answers."""

    alertmanager_url: str = Field(
        ALERTMANAGER_URL,
        pattern=r"^https?://",
        description="base URL of the Prometheus Alertmanager (its API and web UI)",
    )
    alertmanager_user: str | None = Field(
        None, min_length=1, description="user for Alertmanager's basic auth, if it asks"
    )
    alertmanager_password: SecretStr | None = Field(
        None, description="basic auth password: environment or _FILE only, never a flag"
    )
    alertmanager_ca_location: PemFile = Field(
        None, description="CA certificates (PEM) to trust for an https Alertmanager"
    )

    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
        "Alertmanager's basic auth": ("alertmanager_user", "alertmanager_password")
    }
