"""The few lines the job prints when it stops: what the lake holds and how to look at it.

Row counts come from the Delta log (each file's ``num_records`` statistic), alerts and
incidents from their ``rule`` and ``status`` columns alone, all read with delta-rs on the
driver: no Spark job, no full scan. A table that does not exist counts as empty.
"""

from __future__ import annotations

import shlex
from collections import Counter

from contract.alerts import FIRING, RESOLVED
from jobs.writer.tables import TABLES
from lake.layout import (
    ALERTS,
    INCIDENTS,
    PIPELINE_METRICS,
    QUARANTINE,
    READINGS,
    RULE_CHANGES,
    SENSOR_STATS_1M,
    SENSOR_STATS_5M,
    Lake,
)
from lake.reader import group_counts
from lake.storage import delta_table, is_delta_table, table_rows

# Two tables per line, in the order docs/architecture.md#tables lists them.
ROWS_LINES = (
    (READINGS, QUARANTINE),
    (SENSOR_STATS_1M, SENSOR_STATS_5M),
    (PIPELINE_METRICS, RULE_CHANGES),
)


def column_counts(path: str, columns: list[str]) -> Counter[tuple[str, ...]]:
    """How many rows hold each combination of ``columns`` (empty when no table)."""
    if not is_delta_table(path):
        return Counter()
    return Counter(group_counts(delta_table(path), columns))


def _by_rule(counts: Counter[tuple[str, ...]]) -> str:
    return ", ".join(f"{rule} {n:,}" for (rule,), n in sorted(counts.items()))


def _incidents(counts: Counter[tuple[str, ...]]) -> str:
    parts = []
    for rule in sorted({rule for rule, _ in counts}):
        states = [f"{counts[rule, s]:,} {s}" for s in (FIRING, RESOLVED) if counts[rule, s]]
        parts.append(f"{rule} {' + '.join(states)}")
    return ", ".join(parts)


def summary_lines(lake: Lake) -> list[str]:
    """The summary: rows per table, alerts by rule, incidents by rule and status, the
    lake's folder and the commands that show it."""
    rows = {name: table_rows(lake.table(name)) for name in TABLES}
    alerts = column_counts(lake.table(ALERTS), ["rule"])
    incidents = column_counts(lake.table(INCIDENTS), ["rule", "status"])
    folder = shlex.quote(lake.root)
    lines = [f"the lake {folder} holds:"]
    lines += ["  " + ", ".join(f"{t} {rows[t]:,}" for t in group) for group in ROWS_LINES]
    lines.append(f"  {ALERTS} {rows[ALERTS]:,}" + (f": {_by_rule(alerts)}" if alerts else ""))
    lines.append(
        f"  {INCIDENTS} {rows[INCIDENTS]:,}" + (f": {_incidents(incidents)}" if incidents else "")
    )
    lines.append(f"look at it: scripts/alerts --lake {folder}")
    lines.append(f"            .venv/bin/python -m ops.dashboard --lake {folder}")
    return lines
