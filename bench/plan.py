"""What a benchmark run measures: the sizes of a quick and of a full run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from conf.settings.job import JobSettings
from contract.times import interval_seconds

# The simulated event clock of every backlog: fixed, so runs with one seed repeat exactly.
START_TIME = "2026-01-01T00:00:00Z"
SEED = 9


@dataclass(frozen=True)
class Plan:
    """Sizes of one benchmark run."""

    mode: str
    backlog: int  # readings in the main topic (producer, consumer, job figures)
    sensors: int = 1000
    interval_s: float = 5.0  # event seconds between two readings of one sensor
    partitions: int = 6
    warmup: int = 5_000  # a first, uncounted job run: Spark's code generation, class loading
    latency_rate: int = 5_000  # readings per wall-clock second while latency is measured
    latency_seconds: float = 60.0
    latency_spike_rate: float = 6.0  # spikes per sensor per hour: ~8 overheat alerts/s
    latency_drain_seconds: float = 120.0  # after sending: how long ingest may take to catch up
    # The burst: the job idle, then latency_rate readings/s, long enough for two real-time
    # batch boundaries of the shipped realtime_checkpoint_interval (full_plan). Idle more
    # than a minute, and not a whole interval: a boundary then does not fall in the first
    # seconds of load, which are told apart from the boundaries.
    burst_idle_seconds: float = 75.0
    burst_seconds: float = 150.0
    small_batch_rate: int = 200  # readings/s: a few hundred per 2-second micro-batch
    small_batch_seconds: float = 60.0
    steady_rates: tuple[int, ...] = (5_000, 10_000, 20_000, 40_000)  # readings/s, every query on
    rule_counts: tuple[int, ...] = (3, 20, 100)  # the rules part's rules files, in run order
    steady_seconds: float = 180.0  # how long each must stay bounded
    scaling_backlog: int = 200_000
    scaling_partitions: tuple[int, ...] = (1, 3, 6)
    scaling_sensors: tuple[int, ...] = (100, 1_000, 10_000)
    # What the driver receives per micro-batch: the job on a topic of results_backlog
    # readings, once per maxOffsetsPerTrigger in results_batch_sizes.
    results_backlog: int = 200_000
    results_batch_sizes: tuple[int, ...] = (2_000, 20_000, 200_000)
    # The job's rows/s with one and two executor cores (the main topic), also on a
    # standalone cluster of one and of two one-core workers.
    cores_cluster: bool = True
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The plan as plain JSON values."""
        return asdict(self)


def full_plan() -> Plan:
    """Every figure at the sizes issue 9 asks for (several minutes)."""
    return Plan(mode="full", backlog=1_000_000, burst_seconds=two_boundaries(75.0))


def two_boundaries(idle_s: float) -> float:
    """Seconds of load after ``idle_s`` idle that hold the real-time path's second batch
    boundary (one per shipped ``realtime_checkpoint_interval`` from the job's start), and
    half a minute after it."""
    shipped = JobSettings.model_fields["realtime_checkpoint_interval"].default
    return max(150.0, 2 * interval_seconds(shipped) - idle_s + 30.0)


def quick_plan() -> Plan:
    """Every headline figure, scaled down to finish in about 9 minutes on 2 cores."""
    return Plan(
        mode="quick",
        backlog=100_000,
        warmup=5_000,
        latency_seconds=30.0,
        latency_drain_seconds=20.0,
        burst_idle_seconds=30.0,
        burst_seconds=40.0,
        small_batch_seconds=30.0,
        steady_rates=(10_000, 20_000, 30_000),
        steady_seconds=30.0,
        scaling_backlog=20_000,
        scaling_partitions=(1, 6),
        scaling_sensors=(),
        results_backlog=30_000,
        results_batch_sizes=(1_000, 10_000, 30_000),
        notes=[
            "quick mode: backlog 100,000 readings instead of 1,000,000; latency over 30 s "
            "instead of 60 s, with 20 s to catch up; steady rates 10,000 to 30,000/s for "
            "30 s each instead of 5,000 to 40,000 for 3 minutes; scaling only with "
            "partitions (1 and 6) on 20,000-reading topics, where the job's fixed cost per "
            "run dominates; sensors scaling only in the full run"
        ],
    )
