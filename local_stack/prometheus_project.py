"""What the Prometheus project's two servers share as local servers (``scripts/
alertmanager-local``, ``scripts/prometheus-local``), so that each module says only what
is particular to it.

Both are Debian packages with a system service of their own on the default port, take a
config file rendered from a template of the project's into the data directory, keep
their storage in ``data/`` below it, log in logfmt, share their flag names
(``--config.file``, ``--web.listen-address``, ``--web.external-url``) and answer
``/-/ready`` once up.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from local_stack.server import (
    LOOPBACK,
    STOP_TIMEOUT,
    LocalServer,
    R,
    fill_template,
    http_ready,
    wait_for_server,
)


@dataclass(frozen=True)
class PrometheusProjectServer(LocalServer[R]):
    """A :class:`LocalServer` of the Prometheus project: ``title`` names it in messages
    (``"Alertmanager"``), ``config_name`` is its rendered config in the data directory,
    ``storage_flag`` the flag of its storage folder, and ``package`` the Debian package
    (and system service) that installs it."""

    title: str
    template: Path
    config_name: str
    storage_flag: str
    package: str
    default_port: int

    @classmethod
    def named(
        cls,
        name: str,
        title: str,
        error: type[Exception],
        kind: type[R],
        template: Path,
        where: tuple[str, int, Path],
        storage_flag: str,
    ) -> PrometheusProjectServer[R]:
        """The server ``name`` (``"prometheus"``: ``scripts/prometheus-local``, its
        ``prometheus.json``, ``.log`` and ``.yml`` in the data directory), a running one a
        ``kind``, configured from ``template``; ``where`` is its Debian package, its
        default port and its default data directory."""
        package, default_port, default_data_dir = where
        return cls(
            f"{name}-local", f"{name}.json", f"{name}.log", error, storage_marker(storage_flag),
            kind, default_data_dir, STOP_TIMEOUT,
            title, template, f"{name}.yml", storage_flag, package, default_port,
        )  # fmt: skip

    def read_template(self, path: Path | None = None) -> str:
        """The text of a config template (``path``, or its own).

        Raises:
            the server's error: it cannot be read.
        """
        return self.read_config(self.template if path is None else path)

    def fill(self, template: str, values: dict[str, str]) -> str:
        """``template`` with its placeholders filled in (:func:`fill_template`).

        Raises:
            the server's error: a placeholder ``values`` does not name.
        """
        return fill_template(template, values, self.error)

    def storage(self, data_dir: Path) -> Path:
        """Its storage folder in ``data_dir``."""
        return data_dir / "data"

    def config_file(self, data_dir: Path) -> Path:
        """The config it runs with, rendered into ``data_dir``."""
        return data_dir / self.config_name

    def wait_until_ready(
        self,
        url: str,
        timeout: float,
        alive: Callable[[], bool] | None = None,
        guarded: bool = False,
    ) -> None:
        """Block until it answers ``/-/ready`` (``guarded``: see :func:`http_ready`).

        Raises:
            the server's error: ``timeout`` passes first, or ``alive`` reports it died.
        """
        wait_for_server(
            f"{self.title} at {url}",
            lambda: http_ready(url, guarded=guarded),
            timeout,
            0.1,
            alive,
            self.error,
        )

    def config_differs(self, data_dir: Path, rendered: str) -> bool:
        """True when the one running on ``data_dir`` was started with another config."""
        in_use = self.config_file(data_dir)
        return not in_use.exists() or in_use.read_text(encoding="utf-8") != rendered

    def prepare(self, data_dir: Path, port: int, rendered: str) -> None:
        """Make ready to start on ``data_dir`` at ``port``: the port checked free, the
        storage folder made and ``rendered`` written as its config.

        Raises:
            the server's error: the port is taken (on the default port most likely by
                the Debian package's own service, which it names).
        """
        hint = (
            f" (the Debian package's system service? sudo systemctl disable --now {self.package})"
            if port == self.default_port
            else ""
        )
        self.check_free(port, hint=hint)
        self.storage(data_dir).mkdir(parents=True, exist_ok=True)
        self.config_file(data_dir).write_text(rendered, encoding="utf-8")

    def command(
        self, binary: str, data_dir: Path, port: int, url: str, extra: Sequence[str] = ()
    ) -> list[str]:
        """Its command line on ``data_dir``, listening on loopback at ``port`` and known
        to the outside as ``url`` (alerts link back to it), with ``extra`` flags."""
        return [
            binary,
            f"--config.file={self.config_file(data_dir)}",
            f"{self.storage_flag}={self.storage(data_dir)}",
            f"--web.listen-address={LOOPBACK}:{port}",
            f"--web.external-url={url}",
            *extra,
        ]

    def print_or_write(self, rendered: str, out: Path | None) -> int:
        """``render``'s output: the config printed, or written to ``out``; 0."""
        if out is None:
            sys.stdout.write(rendered)
        else:
            self.write_config(out, rendered)
        return 0


def storage_marker(storage_flag: str) -> Callable[[Path], str]:
    """A :class:`LocalServer` marker: the storage flag that names the data directory."""
    return lambda data_dir: f"{storage_flag}={data_dir / 'data'}"


class RenderingOptions(BaseModel):
    """The options both servers' command lines share (each adds its data directory, port
    and config template, whose defaults are its own)."""

    command: CliPositionalArg[Literal["start", "stop", "status", "render"]] = Field(
        description="start, stop, status; render: print the config that start would use"
    )
    out: Path | None = Field(
        None, description="render: write the config to this file instead of printing it"
    )
