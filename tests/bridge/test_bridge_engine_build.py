"""The bridge's engine as Go code: its own tests, vet and format pass, and set-up rebuilds
it when its sources change (local_stack/bridge_engine.py, go_build.py)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conf.paths import BRIDGE_ENGINE, BRIDGE_ENGINE_SOURCE
from local_stack import go_build


def test_the_engine_s_go_tests_and_vet_pass() -> None:
    tested = go_build.run_go(BRIDGE_ENGINE_SOURCE, "test", "-count=1", "./...")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    vetted = go_build.run_go(BRIDGE_ENGINE_SOURCE, "vet", "./...")
    assert vetted.returncode == 0, vetted.stderr


def test_the_engine_s_go_code_is_formatted() -> None:
    assert go_build.unformatted(BRIDGE_ENGINE_SOURCE) == []


def test_the_built_engine_is_current_and_a_source_change_makes_it_stale(tmp_path: Path) -> None:
    assert go_build.is_current(BRIDGE_ENGINE_SOURCE, BRIDGE_ENGINE), (
        f"{BRIDGE_ENGINE} is older than bridge/engine/"
    )
    source = tmp_path / "engine"
    shutil.copytree(BRIDGE_ENGINE_SOURCE, source)
    before = go_build.source_digest(source)
    (source / "book_test.go").write_text("package main\n")  # tests do not count
    assert go_build.source_digest(source) == before
    (source / "book.go").write_text((source / "book.go").read_text() + "\n// changed\n")
    assert go_build.source_digest(source) != before


@pytest.mark.parametrize(
    ("machine", "expected"), [("x86_64", "linux-amd64"), ("aarch64", "linux-arm64")]
)
def test_the_pinned_toolchain_covers_the_image_s_platforms(
    machine: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(go_build.platform, "system", lambda: "Linux")
    monkeypatch.setattr(go_build.platform, "machine", lambda: machine)
    assert go_build._platform() == expected
    assert expected in go_build.TOOLCHAIN_SHA256


def test_the_engine_counts_errors_by_the_kinds_metrics_export() -> None:
    # Go cannot import bridge/metrics.py: the kinds are written twice, so they are compared.
    from bridge.metrics import ERROR_KINDS

    stats = (BRIDGE_ENGINE_SOURCE / "stats.go").read_text(encoding="utf-8")
    kinds = re.findall(r'^\s*err\w+\s*=\s*"(\w+)"', stats, flags=re.MULTILINE)
    assert sorted(kinds) == sorted(ERROR_KINDS)
