"""Every command a user is told to run answers ``--help``: each entry point in scripts/
and each ``python -m`` program the README and docs name, with exit status 0 and a text
of its own, without starting anything."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conf.paths import PROJECT_ROOT

SCRIPTS = sorted(p.name for p in (PROJECT_ROOT / "scripts").iterdir())
DOCUMENTS = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
# Modules the documents name after `python -m` that are not SensorWatch's own programs.
NOT_OURS = {"pytest", "pip", "venv"}


def documented_modules() -> list[str]:
    named = set()
    for document in DOCUMENTS:
        named |= set(re.findall(r"python -m ([a-z_][a-z0-9_.]*)", document.read_text("utf-8")))
    return sorted(named - NOT_OURS)


def test_the_documents_name_the_programs() -> None:
    assert {"jobs.stream", "producer", "ops.notify", "ops.dashboard"} <= set(documented_modules())


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_entry_point_answers_help(script: str) -> None:
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / script), "--help"],
        capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) >= 2, done.stdout
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("module", documented_modules())
def test_each_documented_program_answers_help(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]
