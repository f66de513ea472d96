"""The project's tracked text files, as git lists them."""

from __future__ import annotations

import subprocess

from conf.paths import PROJECT_ROOT


def tracked_text_files() -> dict[str, str]:
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    files = {}
    for name in names:
        path = PROJECT_ROOT / name
        if path.is_file():
            try:
                files[name] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return files
