"""The learned baselines as ops read them from the lake: each deviation rule's newest
baseline of a sensor, as the job will judge its next pane by (the dashboard's band, the
notifier's "its own normal").

The job starts each windows batch from each (sensor, rule)'s newest row of ``_baselines``
written by its windows query's current checkpoint (jobs/alerting/learned_rules.py
newest_baselines), learned with the rule's present field and horizon. While a sensor is
out of its band the baseline learns nothing, so during an incident this is the normal
the incident's alerts were compared with.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import pyarrow as pa
from deltalake.exceptions import DeltaError

from contract.alerts import FIRING
from contract.rules.model import DeviationRule
from contract.times import as_utc
from jobs.alerting.baseline import Baseline, BaselineParams, band, learned_with, params_of
from lake.layout import BASELINES, Lake
from lake.reader import AllOf, LakeReader, OneOf, read_table

# The query whose micro-batches write _baselines, and so name its writer
# (jobs/queries/windows.py QUERY; jobs/writer/delta_io.BatchWriter.app_id).
WINDOWS_QUERY = "windows"
COLUMNS = [
    "sensor_id", "rule", "params", "writer", "batch_id", "mean", "var", "learned_s",
    "taught", "last_pane", "breach_since",
]  # fmt: skip


@dataclass(frozen=True)
class Learned:
    """A sensor's newest baseline for one deviation rule, with the rule's parameters."""

    rule: DeviationRule
    params: BaselineParams
    baseline: Baseline

    @property
    def band(self) -> tuple[float, float]:
        """(low, high): mean -/+ deviations x sd (at least min_sd)."""
        return band(self.baseline, self.params)

    @property
    def warm(self) -> bool:
        """Whether the rule may fire on it yet."""
        return self.baseline.warm(self.params)


def current_writer(reader: LakeReader) -> str | None:
    """The writer id of the windows query's current checkpoint, whose baselines the job
    starts each batch from; None before the job made the checkpoint."""
    try:
        return Lake(reader.root).writer_id(WINDOWS_QUERY)
    except FileNotFoundError:
        return None


def newest_baselines(
    reader: LakeReader, sensor_ids: Collection[str], rules: Iterable[DeviationRule]
) -> dict[tuple[str, str], Learned]:
    """Each (sensor, rule name)'s newest baseline among ``sensor_ids`` and ``rules``
    (none for a pair that has not learned yet)."""
    wanted = {rule.name: (rule, params_of(rule)) for rule in rules}
    table = reader.open(BASELINES) if wanted and sensor_ids else None
    if table is None:
        return {}
    where = AllOf([OneOf("sensor_id", tuple(sensor_ids)), OneOf("rule", tuple(wanted))])
    rows = read_table(table, COLUMNS, where).to_pylist()
    writer = current_writer(reader)
    # One writer's batch ids count up; without a checkpoint to name the writer (a lake
    # written otherwise), the baseline that learned the newest pane.
    order = "batch_id" if writer is not None else "last_pane"
    newest: dict[tuple[str, str], Mapping] = {}
    for row in rows:
        if writer is not None and row["writer"] != writer:
            continue  # an earlier checkpoint's
        key = (row["sensor_id"], row["rule"])
        if key not in newest or row[order] > newest[key][order]:
            newest[key] = row
    # As the job: the newest row, unless it was learned with another field or horizon
    # (the rule was edited since): then the rule has learned nothing yet.
    newest = {
        key: row
        for key, row in newest.items()
        if row["params"] == learned_with(wanted[key[1]][0].field, wanted[key[1]][1])
    }
    found = {}
    for key, row in newest.items():
        rule, params = wanted[key[1]]
        last_pane = as_utc(row["last_pane"])
        assert last_pane is not None  # the job writes every baseline with its pane
        state = Baseline(
            mean=row["mean"],
            var=row["var"],
            learned=timedelta(seconds=row["learned_s"]),
            taught=row["taught"],
            last_pane=last_pane,
            breach_since=as_utc(row["breach_since"]),
        )
        found[key] = Learned(rule, params, state)
    return found


def describe(learned: Learned) -> str:
    """The baseline in words, for people: its mean, deviation and band."""
    unit = learned.rule.unit
    low, high = learned.band
    state = learned.baseline
    return (
        f"mean {state.mean:.2f} {unit}, deviation {state.sd:.2f} {unit}, band {low:.2f} to "
        f"{high:.2f} {unit} ({learned.rule.deviations:g} deviations), learned from "
        f"{state.taught:,} panes"
    )


def baseline_notes(
    reader: LakeReader, rows: Iterable[Mapping], rules: Iterable[object]
) -> dict[tuple[str, str], str]:
    """For the firing incidents among ``rows`` of deviation rules, each (sensor, rule)'s
    baseline in words (:func:`describe`) while its sensor is still out of band: only then
    is it the baseline the alerts were compared with (it learns again once the sensor is
    back). Empty when there are none or ``_baselines`` cannot be read (the incidents are
    notified without it)."""
    deviation = {r.name: r for r in rules if isinstance(r, DeviationRule)}
    pairs = [
        (row["sensor_id"], row["rule"])
        for row in rows
        if row["rule"] in deviation and row["status"] == FIRING
    ]
    if not pairs:
        return {}
    try:
        learned = newest_baselines(
            reader, {s for s, _ in pairs}, [deviation[r] for r in {r for _, r in pairs}]
        )
    except (OSError, ValueError, DeltaError, pa.ArrowException):  # unreadable: without it
        return {}
    return {
        key: describe(found)
        for key, found in learned.items()
        if key in set(pairs) and found.baseline.breach_since is not None
    }
