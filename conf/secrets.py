"""Secrets handed over as files: a variable ``<NAME>_FILE`` names a file that holds the
value of ``<NAME>`` (the way Docker and Kubernetes secrets reach a container), so the
value is in no command line, settings file or process listing."""

from __future__ import annotations

import os
from pathlib import Path


def secret_from_file(variable: str) -> str | None:
    """The stripped content of the file the environment variable ``variable`` names;
    None when the variable is unset or empty.

    Raises:
        ValueError: the file cannot be read or is empty (the message names the variable
            and the path, never the content).
    """
    path = os.environ.get(variable)
    if not path:
        return None
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ValueError(f"{variable}={path}: cannot read it ({exc.strerror})") from None
    if not value:
        raise ValueError(f"{variable}={path}: the file is empty")
    return value
