"""The layout shows the system: scripts/ holds entry points only,
the local stack and the benchmarks are packages of their own, and product code imports
neither them nor the tests."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from conf.paths import PROJECT_ROOT

PRODUCT = ("bridge", "conf", "contract", "jobs", "lake", "ops", "producer", "telemetry")
TOOLING = ("scripts", "local_stack", "bench", "tests")


def imported_packages(path: Path) -> set[str]:
    """The top-level packages a module imports, wherever the import sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", PRODUCT)
def test_product_code_imports_no_tooling(package: str) -> None:
    offenders = {
        str(path.relative_to(PROJECT_ROOT)): sorted(imported_packages(path) & set(TOOLING))
        for path in (PROJECT_ROOT / package).rglob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.parametrize("package", PRODUCT)
def test_product_code_builds_no_command_line_by_hand(package: str) -> None:
    # conf/cli.py makes every program's flags from its settings (pydantic-settings).
    offenders = sorted(
        str(path.relative_to(PROJECT_ROOT))
        for path in (PROJECT_ROOT / package).rglob("*.py")
        if {"argparse", "optparse", "getopt"} & imported_packages(path)
    )
    assert offenders == []


def test_scripts_holds_entry_points_only() -> None:
    entries = sorted(p.name for p in (PROJECT_ROOT / "scripts").iterdir())
    assert entries and all(
        (PROJECT_ROOT / "scripts" / name).is_file() and "." not in name for name in entries
    ), entries


def test_every_module_an_entry_point_runs_exists() -> None:
    named = set()
    for path in (PROJECT_ROOT / "scripts").iterdir():
        named |= set(re.findall(r"-m ([a-z_][a-z0-9_.]*)", path.read_text(encoding="utf-8")))
    named -= {"pip", "pytest", "venv"}
    assert named, "no module found: the pattern no longer matches the scripts"
    missing = sorted(m for m in named if importlib.util.find_spec(m) is None)
    assert missing == []


def test_each_default_is_written_once() -> None:
    # conf/settings.py holds the defaults; the shipped settings file only what an
    # installation changes (nothing, as shipped), so the two cannot drift apart.
    from conf.settings import (
        PIPELINE_CONFIG,
        JobSettings,
        SettingsFile,
        SettingsFileSource,
        load_settings,
    )  # fmt: skip

    shipped = SettingsFileSource(JobSettings, SettingsFile(PIPELINE_CONFIG))()
    repeated = {
        name: value
        for name, value in shipped.items()
        if JobSettings.model_fields[name].get_default(call_default_factory=True) == value
    }
    assert repeated == {}
    assert load_settings(JobSettings, {}, SettingsFile(PIPELINE_CONFIG)) == load_settings(
        JobSettings, {}
    )
