"""The JVM's stderr, copied to the job's own: known noise left out, and the failures the
job explains itself (a checkpoint conflict, a full disk) held back for a moment, to be
dropped once the job has said what happened.

A job that stalled past its lease (a pause, a partition) and wakes after a standby took
the lake over finds out from two sides at once: its lease (lake/lease.py), and Spark, whose
threads wake too and meet the new holder's files in the checkpoint (a rename onto an
existing file: ``FileAlreadyExistsException``, "Multiple streaming queries are concurrently
using ..."). Spark logs that as errors with their stack traces, while the job's one line
says what happened. The same for a full disk: every query and commit fails at once, each
with its stack trace, where one line says it all. So a log record naming such a failure
waits :data:`HOLD_S` seconds: the job calls :meth:`JvmStderr.mute` once it knows the lake
was taken or its disk is full, and stops (then the records held and everything the JVM
says afterwards are dropped), or :meth:`JvmStderr.drop_held` when it handled the failure;
otherwise the record is shown, late but whole.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections.abc import Callable

from jobs.spark.checkpoints import CONCURRENT
from lake.storage import NO_SPACE, UNREACHABLE

# Spark 4's launcher starts every JVM with --add-modules=jdk.incubator.vector
# (org.apache.spark.launcher.JavaModuleOptions: added to each driver and executor command,
# no setting leaves it out), and the JVM's module system then prints this line to its
# stderr as it boots: it is no log message, so no log4j setting reaches it, and no JVM flag
# silences it. SensorWatch uses nothing from that module.
JVM_NOISE = (b"WARNING: Using incubator modules:",)
# How long a record naming a checkpoint conflict waits for the job to learn whether its
# lake was taken over (the job looks at its queries every second).
HOLD_S = 10.0
# A log record's first line (conf/log4j2.properties: "%d{HH:mm:ss} %p %c{1}: %m").
RECORD_START = re.compile(rb"^\d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
# What the job explains in its own words, said somewhere in a record: a checkpoint
# conflict, a full disk (the job stops saying so) and an object store that does not answer
# (the job waits for it: jobs/driver/job.py), in the words the job itself knows them by
# (jobs/spark/checkpoints.py, lake/storage.py): a failure the job handles shows no stack trace.
EXPLAINED = re.compile(
    CONCURRENT.pattern.encode() + rb"|" + re.escape(NO_SPACE.encode())
    + rb"|" + UNREACHABLE.pattern.encode()
    # Spark's own line as a task's failure fails its query: the cause comes in its own
    # record, and the query's failure is what the job looks at.
    + rb"|Task \d+ in stage [\d.]+ failed \d+ times?; aborting job"
)  # fmt: skip
# A record still being written ends after this long without a line.
QUIET_S = 0.2


class JvmStderr:
    """Copies the lines written to a pipe (the JVM's stderr) to ``target``, a record at a
    time: see the module's docstring."""

    def __init__(
        self,
        target: int,
        skip: tuple[bytes, ...] = JVM_NOISE,
        hold_s: float = HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._target, self._skip, self._hold_s, self._clock = target, skip, hold_s, clock
        self._record: list[bytes] = []  # the record being read
        self._held: list[tuple[float, bytes]] = []  # (shown after, text)
        self._muted = False
        self._lock = threading.Lock()

    def mute(self) -> None:
        """Drop what is held and everything from now on (the lake was taken over)."""
        with self._lock:
            self._muted, self._held, self._record = True, [], []

    def drop_held(self) -> None:
        """Drop the records held now: the conflict they report was handled."""
        with self._lock:
            self._held = []

    def line(self, line: bytes) -> None:
        """One line of the JVM's stderr, without its newline."""
        if line.startswith(self._skip):
            return
        if RECORD_START.match(line):
            self.end_record()
        with self._lock:
            self._record.append(line + b"\n")

    def end_record(self) -> None:
        """The record being read is whole: show it, or hold a conflict back."""
        with self._lock:
            text, self._record = b"".join(self._record), []
            if not text or self._muted:
                return
            if EXPLAINED.search(text):
                self._held.append((self._clock() + self._hold_s, text))
                return
        self._write(text)

    def show_due(self) -> None:
        """Show the held records whose time is up (no takeover was found meanwhile)."""
        with self._lock:
            now = self._clock()
            due = [text for when, text in self._held if when <= now]
            self._held = [(when, text) for when, text in self._held if when > now]
        for text in due:
            self._write(text)

    def _write(self, text: bytes) -> None:
        if not self._muted:
            os.write(self._target, text)

    def copy(self, source: int) -> None:
        """Copy from the pipe ``source`` until it closes (a thread's loop)."""
        with os.fdopen(source, "rb", buffering=0) as pipe:
            pending = b""
            while True:
                ready, _, _ = select.select([pipe], [], [], QUIET_S)
                if not ready:  # quiet: the record is whole, and held ones may be due
                    self.end_record()
                    self.show_due()
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    break
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self.line(line)
            if pending:
                self.line(pending)
            self.end_record()
            with self._lock:
                self._hold_s = 0.0
                self._held = [(0.0, text) for _, text in self._held]
            self.show_due()  # the JVM ended: nothing more is to be learnt
