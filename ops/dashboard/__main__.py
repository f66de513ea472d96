"""``python -m ops.dashboard``: serve the dashboard with uvicorn.

Settings: defaults, then ``conf/pipeline.toml`` (the lake and thresholds it shares with
the job), then ``SENSORWATCH_*`` variables, then flags. Exit status 2 for a bad setting.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from types import FrameType

import uvicorn

from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from conf.settings.dashboard import DashboardSettings
from contract.registry import RegistryError
from ops.dashboard.app import create_app
from ops.dashboard.live import LiveAlerts

# Flags that are not simply --<setting>.
FLAGS = {"dashboard_host": "--host", "dashboard_port": "--port"}


class Server(uvicorn.Server):
    """uvicorn's server, which also ends the pages' live streams when told to stop: it
    waits for open responses to finish, and a stream never does on its own."""

    def __init__(self, config: uvicorn.Config, live: LiveAlerts | None) -> None:
        super().__init__(config)
        self.live = live

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """SIGINT/SIGTERM: end the streams, then stop as uvicorn does."""
        if self.live is not None:
            self.live.close()
        super().handle_exit(sig, frame)


def read_command_line(argv: Sequence[str] | None) -> dict[str, object]:
    """The flags: one per setting of DashboardSettings (also --host and --port for the
    address)."""
    flags, _ = command_line(
        DashboardSettings,
        argv,
        prog="python -m ops.dashboard",
        description="SensorWatch dashboard: open incidents (with buttons that silence them in "
        "Alertmanager), alerts, temperatures and pipeline health from the lake's Delta "
        "tables (read only). Settings: defaults, conf/pipeline.toml, "
        "SENSORWATCH_<NAME> variables, then flags.",
        flags=FLAGS,
    )
    return flags


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit status."""
    whole_lines()  # run-local runs this program beside others on one terminal
    try:
        settings = load_settings(
            DashboardSettings, read_command_line(argv), SHARED_FILE, flags=FLAGS
        )
        app = create_app(settings)
    except (SettingsError, RegistryError) as exc:
        print(f"ops.dashboard: {exc}", file=sys.stderr)
        return 2
    asks = (
        "basic auth" if settings.dashboard_user else "a token" if settings.dashboard_token else ""
    )
    print(
        f"ops.dashboard: lake {settings.lake}, "
        f"http://{settings.dashboard_host}:{settings.dashboard_port}/"
        + (f" (asks for {asks})" if asks else ""),
        file=sys.stderr,
        flush=True,
    )
    serving = [False]

    def stop(signum: int, frame: FrameType | None) -> None:
        # uvicorn stops serving on SIGINT/SIGTERM, restores this handler and raises the
        # signal again "to trigger the expected behaviour": a clean stop, exit status 0.
        # Before it serves, a signal simply ends the program.
        if not serving[0]:
            raise SystemExit(0)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    serving[0] = True
    config = uvicorn.Config(
        app,
        host=settings.dashboard_host,
        port=settings.dashboard_port,
        log_level="warning",
        access_log=False,
    )
    Server(config, app.state.live).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
