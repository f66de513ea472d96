"""HotSpot's performance-data files: what set-up's and the tests' JVMs would leave in /tmp.

Every JVM writes ``/tmp/hsperfdata_<user>/<pid>`` (what ``jps`` and ``jstat`` read),
whatever ``java.io.tmpdir`` says, and removes its own file as it exits. The folder stays,
and so does the file of a JVM killed on purpose (the drills' kills). ``scripts/setup`` and
``scripts/test`` note at their start, before any JVM, the time and whether the folder
was there; at their exit they remove the files of the JVMs that ran since and are gone,
then the folder if they made it and nothing else uses it. A live JVM's file is never
touched. The tests' last JVMs (the session's Spark) end a moment after the Python that
started them, so ``scripts/test`` waits for those a while (LINGER seconds); set-up's JVMs
have all ended by its exit, and it waits for none (0).

    python3 -m local_stack.jvm_perfdata note              -> "SINCE yes|no"
    python -m local_stack.jvm_perfdata SINCE yes|no LINGER   (the clean-up)

``note`` needs no package beyond Python's own: set-up runs it before the venv exists.
"""

from __future__ import annotations

import os
import pwd
import sys
import time
from pathlib import Path


def perfdata_dir() -> Path:
    """This user's HotSpot performance-data folder: the JVM names it after the effective
    user's login name (not $USER) and puts it in /tmp on Linux."""
    return Path("/tmp") / f"hsperfdata_{pwd.getpwuid(os.geteuid()).pw_name}"


def note() -> str:
    """What the clean-up needs to know, noted before a run starts any JVM: the time (whole
    seconds) and whether the folder is there (``yes``/``no``)."""
    return f"{int(time.time())} {'yes' if perfdata_dir().is_dir() else 'no'}"


def _runs_files(folder: Path, since: float) -> list[Path]:
    """The JVMs' files in ``folder`` written since ``since`` (a JVM's own name: its pid)."""
    return [f for f in folder.iterdir() if f.name.isdigit() and f.stat().st_mtime >= since]


def clean(folder: Path, since: float, existed: bool, linger: float) -> list[str]:
    """Remove the files in ``folder`` of JVMs that started at ``since`` or later and are no
    longer running (waiting up to ``linger`` seconds for those still ending), then
    ``folder`` itself unless it ``existed`` before, if it is empty. Returns the names
    removed."""
    import psutil  # here, not at the top: ``note`` runs before the venv exists

    from common.waiting import poll_until

    removed: list[str] = []
    if not folder.is_dir():
        return removed

    def running() -> list[Path]:
        return [f for f in _runs_files(folder, since) if psutil.pid_exists(int(f.name))]

    poll_until(running, linger, 0.2, done=lambda live: not live)
    for file in _runs_files(folder, since):
        if not psutil.pid_exists(int(file.name)):  # gone: killed (an exit removes its own)
            file.unlink(missing_ok=True)
            removed.append(file.name)
    if not existed and not any(folder.iterdir()):
        folder.rmdir()
        removed.append(folder.name)
    return removed


USAGE = "usage: python -m local_stack.jvm_perfdata note | SINCE yes|no LINGER"


def main(argv: list[str]) -> int:
    """``note``: print :func:`note`. ``SINCE EXISTED LINGER``: clean up after a run noted
    as SINCE and EXISTED, waiting up to LINGER seconds for its JVMs still ending."""
    if argv == ["note"]:
        print(note())
        return 0
    since, existed, linger = argv if len(argv) == 3 else ("", "", "")
    if not (since.isdigit() and linger.isdigit()) or existed not in {"yes", "no"}:
        print(USAGE, file=sys.stderr)
        return 2
    clean(perfdata_dir(), float(since), existed == "yes", float(linger))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
