"""Terminal programs whose output may be piped into ``head``: exit quietly when the reader
goes away, instead of a BrokenPipeError trace."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable


def run_quietly_piped(main: Callable[[], int]) -> None:
    """Run ``main`` and exit with its status; 0 without a word when stdout's reader left."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would complain when it flushes stdout at exit: point it at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)
