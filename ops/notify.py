"""``python -m ops.notify``: keeps a Prometheus Alertmanager in sync with ``incidents``.

Each sync reads the firing incidents and those resolved recently (``updated_at`` within
``resolved_lookback``; the reader skips every other data file of the table) and posts
them to Alertmanager's ``/api/v2/alerts`` (critical ones first): a firing incident with an
``endsAt`` well ahead (re-posted every sync, long before it runs out), a resolved one with
its ``endsAt`` in the past, for as long as Alertmanager has not taken that end (so it never
rides along again in a later notification of its group). Alertmanager deduplicates by
labels and remembers what it notified (its notification log), so a restart resends
nothing to a person, and an Alertmanager outage only delays notifications (the next sync
that gets through posts the current state, resolutions included).

An episode that began and ended before any sync could post it firing (the notifier,
Alertmanager or the lake was out, or it opened and ended between two updates of the
table) is reported late, never dropped and never paged as live: posted firing for
``late_firing`` seconds with the label ``late="true"`` and annotations saying when it
ended and why it comes late, then ended (:func:`late_alert`). To know which episodes those
are after a restart, the notifier keeps one instant in a small file
(ops/notifier/state.py): up to which change of the table Alertmanager was told everything.

No JVM and no Spark: the table is read with the ``deltalake`` package. Exit status: 0
(also with ``--once`` when there is no lake or table yet: nothing to send, said on
stdout); 1 with ``--once`` when Alertmanager did not answer in time or the table could
not be read; 2 for a bad flag or setting, and with ``--once`` at once when Alertmanager
refuses this client (basic auth, an untrusted certificate).

Alertmanager behind basic auth or TLS (its ``--web.config.file``): ``alertmanager_user``
with ``SENSORWATCH_ALERTMANAGER_PASSWORD`` (or ``_FILE``; never a flag), and
``alertmanager_ca_location`` for a certificate the system does not trust.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from types import FrameType

from common.stop_signal import StopEvent
from conf.cli import read_command_line as command_line
from conf.cli import whole_lines
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from conf.settings.notifier import NotifierSettings
from ops.notifier.alert_stream import AlertStream, Episodes, rule_holds
from ops.notifier.loop import Notifier
from ops.notifier.metrics import NotifierMetrics
from telemetry.endpoint import EndpointError, serve_metrics

PROG = "python -m ops.notify"


# --- command line ------------------------------------------------------------------------


# Flags named otherwise than their setting (conf/cli.py: one flag per setting).
FLAGS = {"notify_interval": "--interval", "notify_once": "--once"}


def read_command_line(argv: Sequence[str] | None) -> dict[str, object]:
    """The flags of ``python -m ops.notify``: one per setting of NotifierSettings."""
    flags, _ = command_line(
        NotifierSettings,
        argv,
        prog=PROG,
        description="Keeps a Prometheus Alertmanager in sync with the incidents table: "
        "posts every firing incident and each resolution to its API (no JVM). Settings: "
        "defaults, conf/pipeline.toml, SENSORWATCH_<NAME> variables, then flags. Exit "
        "status: 0; with --once 1 when Alertmanager did not answer in time; 2 for a bad "
        "flag, and with --once when Alertmanager refuses this client (credentials, "
        "certificate).",
        flags=FLAGS,
    )
    return flags


class _Stop:
    """SIGTERM and SIGINT end the loop cleanly at its next wait (no traceback)."""

    def __init__(self) -> None:
        self.event = StopEvent()  # not threading.Event: its set() may hang in a handler

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.event.is_set():
            # A second signal: the user means it. Exit now, without unwinding: an
            # exception raised here could land in an exit handler and print a traceback.
            sys.stdout.flush()
            os._exit(0)
        self.event.set()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the notifier; returns the exit status."""
    whole_lines()  # run-local runs this program beside others on one terminal
    try:
        settings = load_settings(
            NotifierSettings, read_command_line(argv), SHARED_FILE, flags=FLAGS
        )
    except SettingsError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    stop = _Stop()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    metrics = NotifierMetrics()
    endpoint = None
    if not settings.notify_once:  # a one-shot sync is gone before any scrape
        try:
            endpoint = serve_metrics(settings, metrics.registry)
        except EndpointError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    notifier = Notifier(settings, metrics=metrics)
    if endpoint is not None:
        notifier.log(f"notify: metrics at {endpoint.url}")
    stream = None
    if settings.realtime_alerts and not settings.notify_once:
        notifier.episodes = Episodes(timedelta(minutes=5), rule_holds(notifier.rules()))
        fast = AlertStream(
            settings, notifier.episodes, notifier.now, notifier.log, notifier.warn,
            notifier.dashboard_url, metrics=metrics, rules=notifier.rules,
        )  # fmt: skip
        metrics.lane(False)  # until it reads: the series exists from the start
        stream = threading.Thread(target=fast.run, args=(stop.event,), name="alert-stream")
        stream.start()
    try:
        if settings.notify_once:
            return notifier.run_once(stop.event)
        code = notifier.run(stop.event)
        if stream is not None:
            stream.join(timeout=10)
        print("notify: stopped", flush=True)
        return code
    except KeyboardInterrupt:
        return 0
    finally:
        if endpoint is not None:
            endpoint.close()


if __name__ == "__main__":
    sys.exit(main())
