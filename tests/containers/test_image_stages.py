"""The image's venv and build stages copy only the files scripts/setup runs (so that a
code change does not re-run the set-up in an image build): what they copy must be enough
for the modules those stages run. Checked without Docker, on a folder holding exactly the
copied files (the real build runs in the engine lane's compose tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT
from tests.support.compose_file import dockerfile_instructions

# The Python modules each stage runs: set-up's steps (scripts/setup), and in the build
# stage the compose profile s3's s3a-jars service.
RUN_BY_STAGE = {
    "venv": ["local_stack.jvm_perfdata", "common.waiting"],
    "build": ["local_stack.jvm_jars", "local_stack.optional_jars"],
}


def copied_up_to(stage_name: str) -> list[str]:
    """The project files the stages up to ``stage_name`` copy from the build context."""
    instructions = dockerfile_instructions()
    names = {
        i.stage: i.arguments.split()[-1]
        for i in instructions
        if i.keyword == "FROM" and " AS " in i.arguments.upper()
    }
    last = next(stage for stage, name in names.items() if name == stage_name)
    sources = []
    for instruction in instructions:
        if instruction.stage > last:
            break
        if instruction.keyword == "COPY" and "--from=" not in instruction.arguments:
            sources += instruction.arguments.split()[:-1]
    return sources


@pytest.mark.parametrize("stage", sorted(RUN_BY_STAGE))
def test_each_stage_copies_what_its_modules_import(stage: str, tmp_path: Path) -> None:
    for source in copied_up_to(stage):
        target = tmp_path / source
        if (PROJECT_ROOT / source).is_dir():
            shutil.copytree(PROJECT_ROOT / source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / source, target)
    imports = "; ".join(f"import {module}" for module in RUN_BY_STAGE[stage])
    done = subprocess.run(
        [sys.executable, "-c", imports],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSAFEPATH": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
