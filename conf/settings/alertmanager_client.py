"""Where the Prometheus Alertmanager that pages people answers, and how to log in to it."""

from __future__ import annotations

from pydantic import Field, SecretStr, model_validator

from conf.settings.base import ProgramSettings
from conf.settings.values import PemFile, given_together

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

    @model_validator(mode="after")
    def _basic_auth_is_whole(self) -> AlertmanagerSettings:
        given_together(
            self, ("alertmanager_user", "alertmanager_password"), "Alertmanager's basic auth",
            ("alertmanager_user", "SENSORWATCH_ALERTMANAGER_PASSWORD (or _FILE)"),
        )  # fmt: skip
        return self
