"""Go programs built from the project's sources: the bridge's engine
(local_stack/bridge_engine.py) and the bench's devices (bench/mqtt_devices.py).

The Go toolchain is the machine's ``go`` when it is recent enough; otherwise the pinned
one, fetched once from the Go module proxy (the same archive ``GOTOOLCHAIN`` fetches),
checked against its SHA-256 and kept under .cache/go/. A binary is current while the
digest of its sources matches the one noted beside it at its build.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path

from conf.paths import CACHE_DIR

# The toolchain fetched when the machine has no Go this recent (go.mod's go line).
GO_VERSION = "1.26.8"
GO_MINIMUM = (1, 26)
TOOLCHAIN_SHA256 = {
    "linux-amd64": "30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7",
    "linux-arm64": "02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99",
    "darwin-amd64": "fe99a2009e5bb51e06d7784f1a486478673512041c2671157bd382806e2aedcf",
    "darwin-arm64": "0aad5fb52b88498885290178adc0bcfe429bc63012621af9f83282eb640bd9c7",
}
TOOLCHAINS_DIR = CACHE_DIR / "go"
# What every go command here runs with: static programs, the chosen toolchain only, and
# go.mod and go.sum as committed.
GO_ENV = {"CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}


def run_go(source: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``go ARGS`` in ``source`` (a module's folder), with GO_ENV; its output captured."""
    return subprocess.run(
        [go_command(), *args], cwd=source, env={**os.environ, **GO_ENV},
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def unformatted(source: Path) -> list[str]:
    """The Go files in ``source`` that gofmt would change."""
    gofmt = Path(go_command()).with_name("gofmt")
    listed = subprocess.run([str(gofmt), "-l", "."], cwd=source, capture_output=True, text=True)
    if listed.returncode != 0:
        raise BuildError(f"gofmt failed: {listed.stderr.strip()}")
    return listed.stdout.split()


class BuildError(RuntimeError):
    """A program could not be built (the message says why)."""


def source_digest(source: Path) -> str:
    """A digest of what a program is built from: its Go files, go.mod and go.sum."""
    digest = hashlib.sha256()
    for path in [*sorted(source.glob("*.go")), source / "go.mod", source / "go.sum"]:
        if path.name.endswith("_test.go"):
            continue
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def stamp_of(binary: Path) -> Path:
    """Where the digest of the sources a binary was built from is kept."""
    return binary.with_name(binary.name + ".source-sha256")


def is_current(source: Path, binary: Path) -> bool:
    """``binary`` is built from the sources in ``source`` as they are."""
    stamp = stamp_of(binary)
    return (
        binary.is_file() and stamp.is_file() and stamp.read_text().strip() == source_digest(source)
    )


def _platform() -> str:
    system = platform.system().lower()
    machine = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return f"{system}-{machine}"


def _recent_enough(go: str) -> bool:
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    match = re.match(r"go(\d+)\.(\d+)", out.strip())
    return bool(match) and (int(match[1]), int(match[2])) >= GO_MINIMUM


def go_command(say: Callable[[str], None] = print) -> str:
    """The ``go`` to build with: the machine's when recent enough, else the pinned one."""
    local = shutil.which("go")
    if local and _recent_enough(local):
        return local
    home = TOOLCHAINS_DIR / f"go{GO_VERSION}"
    go = home / "bin" / "go"
    if go.is_file():
        return str(go)
    where = _platform()
    if where not in TOOLCHAIN_SHA256:
        raise BuildError(
            f"no Go {GO_MINIMUM[0]}.{GO_MINIMUM[1]} on this machine, and no pinned toolchain "
            f"for {where}: install Go {GO_VERSION} (go.dev/dl) and run scripts/setup again"
        )
    proxy = _proxy()
    url = f"{proxy}/golang.org/toolchain/@v/v0.0.1-go{GO_VERSION}.{where}.zip"
    say(f"fetching Go {GO_VERSION} for {where} from {proxy} (72 MB, once) ...")
    TOOLCHAINS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=TOOLCHAINS_DIR) as scratch:
        archive = Path(scratch) / "toolchain.zip"
        try:
            with urllib.request.urlopen(url, timeout=120) as response, archive.open("wb") as out:
                shutil.copyfileobj(response, out)
        except OSError as exc:
            raise BuildError(f"could not fetch {url}: {exc}") from exc
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != TOOLCHAIN_SHA256[where]:
            raise BuildError(
                f"{url} has SHA-256 {digest}, not the pinned {TOOLCHAIN_SHA256[where]}"
            )
        unpacked = Path(scratch) / "go"
        prefix = f"golang.org/toolchain@v0.0.1-go{GO_VERSION}.{where}/"
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                if not info.filename.startswith(prefix) or info.is_dir():
                    continue
                target = unpacked / info.filename.removeprefix(prefix)
                target.parent.mkdir(parents=True, exist_ok=True)
                with zipped.open(info) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst)
                mode = (info.external_attr >> 16) & 0o777
                target.chmod(mode or 0o644)
        try:
            unpacked.rename(home)  # whole or not at all
        except OSError:
            if not go.is_file():  # not another set-up's, fetched meanwhile
                raise
    return str(go)


def _proxy() -> str:
    """The Go module proxy: GOPROXY's first URL, else the public one."""
    for entry in re.split(r"[,|]", os.environ.get("GOPROXY", "")):
        if entry.startswith(("https://", "http://")):
            return entry.rstrip("/")
    return "https://proxy.golang.org"


def build(source: Path, binary: Path, say: Callable[[str], None] = print) -> None:
    """Build the Go program in ``source`` into ``binary`` (a static program) and note its
    sources' digest."""
    go = go_command(say)
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_name(f"{binary.name}.{os.getpid()}.partial")  # set-ups may race
    env = {**os.environ, **GO_ENV}
    result = subprocess.run(
        [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."],
        cwd=source, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise BuildError(f"go build failed:\n{result.stderr.strip()}")
    partial.replace(binary)
    stamp_of(binary).write_text(source_digest(source) + "\n")
