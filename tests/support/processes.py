"""Long-running programs under test: read their output with deadlines, stop them."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping

from jobs.spark.scratch import SCRATCH_ENV

SPARK_CONF_ENV = "SENSORWATCH_SPARK_CONF"  # the job's spark_conf setting (conf/settings/job.py)
# The test run's own SENSORWATCH_* variables (tests/conftest.py, scripts/test): where
# Spark's scratch goes and the JIT of the jobs it starts. A test that runs a program "as
# its defaults make it" drops every other SENSORWATCH_* setting, never these.
RUN_SETTINGS = frozenset({SCRATCH_ENV, SPARK_CONF_ENV})


def with_spark_conf(environ: Mapping[str, str], *properties: str) -> dict[str, str]:
    """``environ`` with Spark ``properties`` ("KEY=VALUE") added to the run's own
    ``SENSORWATCH_SPARK_CONF``. Given as ``--spark-conf`` they would replace it (a flag
    wins over the environment), and with it the JIT options the run gives every job:
    a cluster run's driver and executors then compiled with C2 too."""
    run_own = environ.get(SPARK_CONF_ENV, "")
    return {**environ, SPARK_CONF_ENV: ",".join(filter(None, (run_own, *properties)))}


def without_frames(output: str) -> str:
    """A program's output without JVM stack frames (``\tat ...``, ``... N more``): what
    is left of a Java exception is its message and its causes, for a failure message."""
    return "\n".join(
        line
        for line in output.splitlines()
        if not line.startswith("\tat ") and not line.lstrip().startswith("... ")
    )


def without_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without SENSORWATCH_* settings, except the test run's own."""
    return {
        k: v for k, v in environ.items() if not k.startswith("SENSORWATCH_") or k in RUN_SETTINGS
    }


class Running:
    """A started process whose merged stdout/stderr is collected line by line."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd=None) -> None:
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for_line(
        self, matches: Callable[[str], bool], timeout: float, what: str = "a matching line"
    ) -> str:
        """The first new output line for which ``matches`` is true; fails at the deadline
        saying ``what`` it waited for."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("process ended first:\n" + "\n".join(self.lines[-40:]))
            self.lines.append(line)
            if matches(line):
                return line
        raise AssertionError(
            f"not within {timeout:.0f}s: {what}; the last lines:\n" + "\n".join(self.lines[-40:])
        )

    def output(self) -> list[str]:
        """Every line printed so far, also those no ``wait_for_line`` has read yet: for
        failure messages of tests that poll something else."""
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return self.lines
            if line is None:
                self._queue.put(None)  # keep the end mark for finish() and wait_for_line
                return self.lines
            self.lines.append(line)

    def interrupt_group(self, sig: int = signal.SIGINT) -> None:
        """Send ``sig`` to the whole process group, as Ctrl-C in a terminal does."""
        os.killpg(self.proc.pid, sig)

    def terminate(self) -> None:
        """SIGTERM to the process only, as `docker stop` or Kubernetes send it."""
        self.proc.send_signal(signal.SIGTERM)

    def finish(self, timeout: float) -> int:
        """Wait for the exit status; collect the remaining output."""
        code = self.proc.wait(timeout=timeout)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return code

    def kill(self) -> None:
        """Last resort for a test that failed half-way."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
