"""Settings of the streaming job, ``python -m jobs.stream`` (docs/streaming-job.md#settings);
an installation's changes go in conf/pipeline.toml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from conf.settings.kafka_connection import AlertsTopicSettings, KafkaSettings
from conf.settings.lake import DEFAULT_LAKE, LakeLocation
from conf.settings.metrics_endpoint import MetricsSettings, metrics_port
from conf.settings.rules_file import RulesSettings
from conf.settings.values import SparkInterval, parse_pairs
from contract.times import interval_seconds, parse_interval


def _at_least(interval: str, seconds: float, shown: str) -> str:
    """``interval`` if it lasts ``seconds`` or more; else a ValueError saying ``shown``."""
    if interval_seconds(interval) < seconds:
        raise ValueError(f"must be at least '{shown}'")
    return interval


class JobSettings(KafkaSettings, RulesSettings, AlertsTopicSettings, MetricsSettings):
    """Settings of ``python -m jobs.stream`` (docs/architecture.md#command-line-names);
    the defaults here, an installation's changes in conf/pipeline.toml."""

    metrics_port: int = metrics_port(9108)
    lake: LakeLocation = Field(
        DEFAULT_LAKE,
        validate_default=True,
        description="where the Delta tables and their checkpoints live: a folder, or "
        "s3a://bucket/prefix (endpoint, region and credentials from the AWS_* variables)",
    )
    registry: Path | None = Field(None, description="device registry, JSON lines")
    trigger: str = Field(
        "5 seconds",
        description="'availableNow' (process what is there, then exit) or an interval",
    )
    readers_trigger: SparkInterval = Field(
        "60 seconds",
        description="interval of the windows query, which reads the readings table "
        "(statistics, sustained_high, sensor_silent): its results wait for the watermark "
        "anyway, and a slower pace leaves the cores to ingest and its overheat alerts",
    )
    readers: bool = Field(
        True,
        description="run the windows query, which reads the readings table (statistics, "
        "sustained_high, sensor_silent); false runs ingest alone (readings, quarantine, "
        "overheat_reading), e.g. to measure what the windows cost",
    )
    starting_offsets: Literal["earliest", "latest"] = Field(
        "earliest", description="where a new checkpoint starts reading the topic"
    )
    max_offsets_per_trigger: int | None = Field(
        250_000,
        ge=1,
        description="cap on Kafka records per micro-batch: a backlog is worked off in "
        "bounded, committed steps, and new overheat alerts do not wait behind one long batch; "
        "'off' reads all there is in each",
    )
    fail_on_data_loss: bool = Field(
        True,
        description="fail when offsets vanished from Kafka (retention, a recreated topic) "
        "instead of skipping them silently",
    )
    watermark_delay: SparkInterval = Field(
        "2 minutes", description="how late a reading may be and still count in the statistics"
    )
    shuffle_partitions: int = Field(
        4, ge=1, le=512, description="partitions of the stateful operators (fixed per checkpoint)"
    )
    master: str = Field(
        "local[2]",
        min_length=1,
        description="Spark master URL; in local mode (local[N]) N task slots for the lake "
        "path, to which the job adds one per topic partition for the real-time path",
    )
    realtime: bool = Field(
        True,
        description="run the real-time alert path: overheat_reading on every hot reading, "
        "on the Kafka topic alerts_topic within milliseconds (jobs/queries/realtime.py); it holds "
        "one task slot per partition of the readings topic while it runs",
    )
    # Spark's own default. Each commit pauses the path for 0.4 to 1.3 s (its tasks end,
    # the logs are written, the next batch is planned): at 1 minute those pauses were the
    # path's p99 (docs/benchmarks.md). A replay after a failure is alerts sent again,
    # which consumers drop by alert_id; an edit does not judge it again (realtime/path.py).
    realtime_checkpoint_interval: SparkInterval = Field(
        "5 minutes",
        description="how often the real-time query commits its progress (not a latency): "
        "after a failure at most this much is sent again, and each commit pauses the path "
        "for a moment (at least 5 seconds)",
    )
    realtime_topic_check: SparkInterval = Field(
        "30 seconds",
        description="how often the job looks at the readings topic's partitions (a new one "
        "needs a task slot of the real-time path: the slots are counted again) and at the "
        "alerts topic (made again if deleted)",
    )
    rules_settle: SparkInterval = Field(
        "15 seconds",
        description="how long the rules file must stay unchanged before the job takes an "
        "edit of it: a file written in place is never taken half-written (renaming a "
        "finished file over it is atomic; docs/alerting.md)",
    )
    lease_expiry: float = Field(
        15.0,
        ge=3,
        le=600,
        description="seconds the job's lease on its lake lasts without a renewal (it renews "
        "every quarter of this): a job killed or cut off is replaced after this long; a "
        "clean stop hands the lake over at once (lake/lease.py)",
    )
    standby: bool = Field(
        False,
        description="when another job holds the lake: wait, and take over when it stops "
        "renewing, instead of exiting",
    )
    # 1g ran out of heap after 11 to 12 minutes at 5,000 readings/s on a real clock
    # (docs/benchmarks.md#memory): what the soak's compressed clock had not shown.
    driver_memory: str = Field(
        "2g",
        description="the heap of Spark's JVM (in local mode driver and executors): the "
        "windows query's state grows with readings/s times the watermark; 2g holds 5,000 "
        "readings/s at a 2-minute watermark; raise it for more "
        "(docs/streaming-job.md#memory)",
    )
    metrics_flush_seconds: float = Field(
        10.0, gt=0, description="how often pipeline_metrics is written while running"
    )
    registry_refresh_batches: int = Field(
        10, ge=1, description="check the registry file for changes every this many batches"
    )
    spark_ui: bool = Field(False, description="serve Spark's web UI (port 4040)")
    spark_conf: Annotated[dict[str, str], NoDecode] = Field(
        {},
        description="any other Spark property, as KEY=VALUE,KEY=VALUE (e.g. "
        "spark.driver.maxResultSize=64m); it wins over SensorWatch's own",
    )
    maintenance: bool = Field(
        True,
        description="keep the tables healthy while running: compaction, log checkpoints, "
        "VACUUM and log expiry, raw_retention (jobs/writer/maintenance.py); false leaves that to "
        "another tool, which must then be the only one compacting",
    )
    maintenance_interval: SparkInterval = Field(
        "15 seconds", description="how often maintenance looks at the tables"
    )
    compact_min_files: int = Field(
        20,
        ge=2,
        description="compact a table once it holds this many files smaller than "
        "compact_small_mb (at a 1 s trigger: every 20 s or so)",
    )
    compact_small_mb: int = Field(
        8,
        ge=1,
        le=1024,
        description="the frequent compaction turns small files into files of about this "
        "size; a file under it is rewritten with newer ones, so a larger size rewrites more",
    )
    compact_target_mb: int = Field(
        128,
        ge=1,
        le=4096,
        description="once an hour, files under this size are compacted into files of about "
        "this size: fewer files for readers of a long-running table",
    )
    vacuum_retention: SparkInterval = Field(
        "1 hour",
        description="how long the files compaction and retention replaced, and the log "
        "entries of old commits, are kept. It bounds how long a Delta stream reading a "
        "table (other than the job's own windows query, which maintenance waits for) may be "
        "stopped, and how far back time travel reaches. Longer costs every commit: "
        "delta-rs lists the whole log on each (docs/streaming-job.md)",
    )
    raw_retention: SparkInterval | None = Field(
        None,
        description="delete readings and quarantine rows ingested longer ago than this "
        "(e.g. '30 days'); empty or 'off' (the default) keeps them for ever. Statistics, "
        "alerts and incidents are kept either way",
    )
    log_level: Literal["error", "warn", "info", "debug"] = Field(
        "warn",
        description="level of Spark's own log lines (stderr): 'warn' shows real problems and "
        "hides the known-harmless ones (conf/log4j2.properties); 'info' or 'debug' show "
        "everything Spark says, for troubleshooting",
    )

    _parse_spark_conf = field_validator("spark_conf", mode="before")(parse_pairs)

    @field_validator("spark_conf")
    @classmethod
    def _spark_properties(cls, value: dict[str, str]) -> dict[str, str]:
        wrong = [key for key in value if not key.startswith("spark.")]
        if wrong:
            raise ValueError(f"not a Spark property (spark.*): {', '.join(wrong)}")
        return value

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, value: str) -> str:
        if value.strip().lower() == "availablenow":
            return "availableNow"
        return parse_interval(value)

    @field_validator("raw_retention", "max_offsets_per_trigger", mode="before")
    @classmethod
    def _off_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("", "off", "none"):
            return None
        return value

    @field_validator("vacuum_retention")
    @classmethod
    def _retention_long_enough(cls, value: str) -> str:
        # A reader's snapshot must outlive the files it is reading.
        return _at_least(value, 30, "30 seconds")

    @model_validator(mode="after")
    def _small_below_target(self) -> JobSettings:
        if self.compact_small_mb > self.compact_target_mb:
            raise ValueError(
                f"--compact-small-mb ({self.compact_small_mb}) must not exceed "
                f"--compact-target-mb ({self.compact_target_mb}); environment "
                "SENSORWATCH_COMPACT_SMALL_MB and SENSORWATCH_COMPACT_TARGET_MB"
            )
        return self

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("realtime_checkpoint_interval")
    @classmethod
    def _realtime_interval(cls, value: str) -> str:
        # Spark's floor (spark.sql.streaming.realTimeMode.minBatchDuration).
        return _at_least(value, 5, "5 seconds")

    @field_validator("realtime_topic_check", "rules_settle")
    @classmethod
    def _a_second_to_an_hour(cls, value: str) -> str:
        # Below a second the file or the broker would be asked all the time; above an
        # hour an edit or a new partition would wait longer than anyone expects.
        if interval_seconds(value) > 3600:
            raise ValueError("must be at most '1 hour'")
        return _at_least(value, 1, "1 second")

    @property
    def realtime_topic_check_seconds(self) -> float:
        """realtime_topic_check in seconds."""
        return interval_seconds(self.realtime_topic_check)

    @property
    def rules_settle_seconds(self) -> float:
        """rules_settle in seconds."""
        return interval_seconds(self.rules_settle)

    @property
    def available_now(self) -> bool:
        """True for the run-what-is-there-then-exit trigger."""
        return self.trigger == "availableNow"

    @property
    def maintenance_interval_seconds(self) -> float:
        """maintenance_interval in seconds."""
        return interval_seconds(self.maintenance_interval)

    @property
    def vacuum_retention_seconds(self) -> float:
        """vacuum_retention in seconds."""
        return interval_seconds(self.vacuum_retention)

    @property
    def raw_retention_seconds(self) -> float | None:
        """raw_retention in seconds (None: off)."""
        return None if self.raw_retention is None else interval_seconds(self.raw_retention)
