"""The bridge's engine built (bridge/engine/, Go): ``python -m local_stack.bridge_engine``
builds it where conf/paths.py says (BRIDGE_ENGINE) unless it is current; ``--check``
only says whether it is. scripts/setup and the image's build run it (the toolchain:
local_stack/go_build.py).
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from conf.cli import read_options
from conf.paths import BRIDGE_ENGINE, BRIDGE_ENGINE_SOURCE
from local_stack.go_build import BuildError, build, is_current


class EngineOptions(BaseModel):
    """The flags of ``python -m local_stack.bridge_engine``."""

    check: bool = Field(False, description="exit 1 if the engine needs building")


def main(argv: list[str] | None = None) -> int:
    """Build the engine unless current (``--check``: only say whether it is)."""
    args = read_options(
        EngineOptions, argv, prog="python -m local_stack.bridge_engine",
        description="Build the bridge's engine (bridge/engine/) unless it is current.",
        say_as="bridge engine",
    )  # fmt: skip
    if is_current(BRIDGE_ENGINE_SOURCE, BRIDGE_ENGINE):
        print("setup: bridge engine: up to date")
        return 0
    if args.check:
        print(f"setup: bridge engine: {BRIDGE_ENGINE} needs building")
        return 1
    print("setup: bridge engine: building bridge/engine (go build) ...")
    try:
        build(
            BRIDGE_ENGINE_SOURCE, BRIDGE_ENGINE, say=lambda m: print(f"setup: bridge engine: {m}")
        )
    except BuildError as exc:
        print(f"setup: bridge engine: {exc}", file=sys.stderr)
        return 1
    print(f"setup: bridge engine: built {BRIDGE_ENGINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
