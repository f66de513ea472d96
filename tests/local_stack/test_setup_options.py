"""scripts/setup's options."""

from __future__ import annotations

import subprocess

from conf.paths import PROJECT_ROOT


def test_setup_rejects_an_unknown_option() -> None:
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup"), "--quiet", "--no-such-option"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert done.returncode == 2
    assert "--no-browser" in done.stderr


def test_setup_no_browser_skips_the_browser_step() -> None:
    done = subprocess.run(
        [str(PROJECT_ROOT / "scripts" / "setup"), "--no-browser"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "browser: skipped (--no-browser)" in done.stdout
