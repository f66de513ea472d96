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

    python -m local_stack.jvm_perfdata SINCE EXISTED LINGER
      (epoch seconds; yes or no; seconds)
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

import psutil

from contract.waiting import poll_until


def perfdata_dir() -> Path:
    """This user's HotSpot performance-data folder (the JVM puts it in /tmp on Linux)."""
    return Path("/tmp") / f"hsperfdata_{getpass.getuser()}"


def _runs_files(folder: Path, since: float) -> list[Path]:
    """The JVMs' files in ``folder`` written since ``since`` (a JVM's own name: its pid)."""
    return [f for f in folder.iterdir() if f.name.isdigit() and f.stat().st_mtime >= since]


def clean(folder: Path, since: float, existed: bool, linger: float) -> list[str]:
    """Remove the files in ``folder`` of JVMs that started at ``since`` or later and are no
    longer running (waiting up to ``linger`` seconds for those still ending), then
    ``folder`` itself unless it ``existed`` before, if it is empty. Returns the names
    removed."""
    removed: list[str] = []
    if not folder.is_dir():
        return removed

    def running() -> list[Path]:
        return [f for f in _runs_files(folder, since) if psutil.pid_exists(int(f.name))]

    poll_until(running, linger, 0.2, done=lambda live: not live)
    for file in _runs_files(folder, since):
        if not psutil.pid_exists(int(file.name)):  # a killed JVM's: its own exit removes it
            file.unlink(missing_ok=True)
            removed.append(file.name)
    if not existed and not any(folder.iterdir()):
        folder.rmdir()
        removed.append(folder.name)
    return removed


def main(argv: list[str]) -> int:
    """``SINCE EXISTED LINGER``: clean up after a run that started at SINCE (epoch
    seconds), when the folder was there (yes) or not (no), waiting up to LINGER seconds
    for the run's JVMs still ending."""
    if (
        len(argv) != 3
        or not (argv[0].isdigit() and argv[2].isdigit())
        or argv[1]
        not in (
            "yes",
            "no",
        )
    ):
        print("usage: python -m local_stack.jvm_perfdata SINCE yes|no LINGER", file=sys.stderr)
        return 2
    clean(perfdata_dir(), float(argv[0]), argv[1] == "yes", float(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
