"""A program's /metrics endpoint and the credentials it and the dashboard ask for
(telemetry/endpoint.py, telemetry/credentials.py)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field, SecretStr, model_validator

from conf.settings.base import ProgramSettings
from conf.settings.values import EmptyIsUnset, is_loopback


class WhoIsThereSettings(ProgramSettings):
    """The credentials the dashboard and every /metrics endpoint ask for (one secret for
    both: the people and the Prometheus that read the pipeline)."""

    dashboard_user: Annotated[str | None, EmptyIsUnset] = Field(
        None, min_length=1, description="user for basic auth of the dashboard and /metrics"
    )
    dashboard_password: Annotated[SecretStr | None, EmptyIsUnset] = Field(
        None, description="basic auth password: environment or _FILE only, never a flag"
    )
    dashboard_token: Annotated[SecretStr | None, EmptyIsUnset] = Field(
        None,
        description="a token API clients send as 'Authorization: Bearer <token>': "
        "environment or _FILE only",
    )

    GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
        "basic auth": ("dashboard_user", "dashboard_password")
    }

    @property
    def asks_who_is_there(self) -> bool:
        """True when credentials are required (a token or basic auth)."""
        return self.dashboard_token is not None or self.dashboard_user is not None

    def credentials(self) -> tuple[str | None, str | None, str | None]:
        """(token, user, password) as plain strings, for the credentials check."""
        return (
            self.dashboard_token.get_secret_value() if self.dashboard_token else None,
            self.dashboard_user,
            self.dashboard_password.get_secret_value() if self.dashboard_password else None,
        )


def metrics_port(default: int) -> Any:
    """The ``metrics_port`` field of a program whose /metrics listens on ``default``."""
    return Field(
        default,
        ge=0,
        le=65535,
        description="port of its /metrics (Prometheus text format); 0: a free port, said at start",
    )


class MetricsSettings(WhoIsThereSettings):
    """A program's own /metrics endpoint for Prometheus (each program sets its port)."""

    metrics: bool = Field(True, description="serve /metrics for Prometheus")
    metrics_host: str = Field("127.0.0.1", min_length=1, description="address /metrics listens on")
    metrics_port: int = metrics_port(0)
    metrics_private_network: bool = Field(
        False,
        description="metrics_host is reached only on a private network this program shares "
        "with Prometheus (compose's), not published: no credentials asked",
    )

    @model_validator(mode="after")
    def _metrics_guarded_beyond_loopback(self) -> MetricsSettings:
        if (
            self.metrics
            and not is_loopback(self.metrics_host)
            and not self.metrics_private_network
            and not self.asks_who_is_there
        ):
            raise ValueError(
                f"/metrics would answer at {self.metrics_host}, beyond loopback, without "
                "asking who is there: set SENSORWATCH_DASHBOARD_TOKEN (or _FILE), or "
                "dashboard_user with SENSORWATCH_DASHBOARD_PASSWORD (or _FILE); or, on a "
                "network only Prometheus shares, metrics_private_network"
            )
        return self
