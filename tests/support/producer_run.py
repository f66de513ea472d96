"""Run ``python -m producer`` as a user would, and read what it left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conf.paths import PROJECT_ROOT


def run_producer(
    *args: str | Path | float, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the producer CLI to completion, with ``env`` added to the environment;
    returns the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "producer", *map(str, args)],
        capture_output=True, text=True, timeout=timeout, cwd=PROJECT_ROOT,
        env=None if env is None else {**os.environ, **env},
    )  # fmt: skip


def read_jsonl(path: Path) -> list[dict]:
    """A JSON-lines file as a list of objects."""
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]
