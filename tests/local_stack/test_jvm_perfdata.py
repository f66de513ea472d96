"""The clean-up of HotSpot's performance-data folder (local_stack/jvm_perfdata.py)."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import threading
import time

from local_stack.jvm_perfdata import USAGE, clean, main, perfdata_dir


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_a_folder_the_run_made_goes_with_its_dead_jvms_files(tmp_path) -> None:
    folder, since = tmp_path / "hsperfdata_someone", int(time.time())  # as scripts/test
    folder.mkdir()
    (folder / str(dead_pid())).write_bytes(b"\0" * 32)  # a JVM killed with SIGKILL

    clean(folder, since, existed=False, linger=0)

    assert not folder.exists()


def test_a_folder_that_was_there_stays_and_live_or_older_files_stay(tmp_path) -> None:
    folder = tmp_path / "hsperfdata_someone"
    folder.mkdir()
    older = folder / str(dead_pid())
    older.write_bytes(b"old")
    os.utime(older, (1, 1))  # from before the run: not the run's to remove
    since = int(time.time())  # whole seconds, as scripts/test notes it
    live = folder / str(os.getpid())  # a JVM still running (here: this process)
    live.write_bytes(b"live")
    gone = folder / str(dead_pid())
    gone.write_bytes(b"gone")
    other = folder / "notes"
    other.write_text("not a JVM's")

    removed = clean(folder, since, existed=True, linger=0.5)

    assert removed == [gone.name]
    assert sorted(p.name for p in folder.iterdir()) == sorted([older.name, live.name, "notes"])


def test_a_run_s_live_jvm_keeps_the_folder_it_made(tmp_path) -> None:
    folder, since = tmp_path / "hsperfdata_someone", int(time.time())  # as scripts/test
    folder.mkdir()
    (folder / str(os.getpid())).write_bytes(b"live")

    assert clean(folder, since, existed=False, linger=0.5) == []
    assert folder.is_dir()


def test_the_clean_up_waits_for_a_jvm_that_is_ending(tmp_path) -> None:
    folder, since = tmp_path / "hsperfdata_someone", int(time.time())  # as scripts/test
    folder.mkdir()
    ending = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)  # fmt: skip
    (folder / str(ending.pid)).write_bytes(b"ending")
    ending.stdin.close()  # it ends on its own, as the session's JVM does
    reaper = threading.Thread(target=ending.wait)
    reaper.start()

    clean(folder, since, existed=False, linger=30)

    reaper.join()
    assert not folder.exists()


def test_a_bad_command_line_says_how_to_call_it(capsys) -> None:
    assert main(["soon", "yes", "30"]) == 2
    assert USAGE in capsys.readouterr().err


def test_the_note_names_the_folder_of_the_jvms_own_user(capsys) -> None:
    """HotSpot names the folder after the effective user (getpwuid), not $USER."""
    assert perfdata_dir().name == f"hsperfdata_{pwd.getpwuid(os.geteuid()).pw_name}"
    assert main(["note"]) == 0
    since, existed = capsys.readouterr().out.split()
    assert abs(int(since) - time.time()) < 5
    assert existed == ("yes" if perfdata_dir().is_dir() else "no")
