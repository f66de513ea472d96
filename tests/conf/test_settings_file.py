"""The settings file (TOML), read by pydantic-settings' TOML source (conf/settings/base.py):
its tables group settings, it ranks below the environment and flags, and each mistake it
can hold is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.dashboard import DashboardSettings
from conf.settings.job import JobSettings


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_tables_group_settings_and_the_file_ranks_below_environment_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = written(
        tmp_path,
        'topic = "plant-a"\n[stream]\nwatermark_delay = "5 minutes"\n'
        '[maintenance]\ncompact_min_files = 8\nvacuum_retention = "2 hours"\n',
    )
    settings = load_settings(JobSettings, {}, SettingsFile(path))
    assert (settings.topic, settings.compact_min_files) == ("plant-a", 8)
    assert settings.watermark_delay == "5 minutes"
    assert settings.vacuum_retention_seconds == 7200

    monkeypatch.setenv("SENSORWATCH_COMPACT_MIN_FILES", "16")
    settings = load_settings(JobSettings, {"topic": "plant-b"}, SettingsFile(path))
    assert (settings.topic, settings.compact_min_files) == ("plant-b", 16)
    assert settings.watermark_delay == "5 minutes"


def test_a_bad_value_in_the_file_names_the_setting(tmp_path: Path) -> None:
    path = written(tmp_path, "[maintenance]\ncompact_min_files = 0\n")
    with pytest.raises(SettingsError, match=r"^--compact-min-files \(SENSORWATCH_COMPACT_MIN"):
        load_settings(JobSettings, {}, SettingsFile(path))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('topic = "a"\ntopic = "b"\n', r"pipeline.toml is not valid TOML: Cannot overwrite"),
        ("[stream]\nwatermark = 1\n", r"^settings file: unknown setting\(s\) watermark$"),
        ('kafka_sasl_password = "hunter2"\n', r"kafka_sasl_password is a secret: set "
         r"SENSORWATCH_KAFKA_SASL_PASSWORD or SENSORWATCH_KAFKA_SASL_PASSWORD_FILE"),
        ("warning_temp_c = 30.0\n", r"^settings file: warning_temp_c is now sustained_high's "
         r"threshold in the rules file"),
    ],
    ids=["not-toml", "unknown", "secret", "moved"],
)  # fmt: skip
def test_the_jobs_file_refuses_each_mistake_in_one_line(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as failure:
        load_settings(JobSettings, {}, SettingsFile(written(tmp_path, text)))
    assert "hunter2" not in str(failure.value)
    assert "\n" not in str(failure.value)


def test_the_jobs_file_must_exist_another_programs_take_what_they_share(
    tmp_path: Path,
) -> None:
    with pytest.raises(SettingsError, match=r"^--config: cannot read .*missing.toml: No such"):
        load_settings(JobSettings, {}, SettingsFile(tmp_path / "missing.toml"))
    shared = SettingsFile(tmp_path / "missing.toml", shared=True)
    assert load_settings(DashboardSettings, {}, shared) == load_settings(DashboardSettings, {})

    # The job's settings the dashboard does not have are the job's business.
    path = written(tmp_path, 'lake = "/srv/lake"\n[stream]\ntrigger = "5 seconds"\n')
    dashboard = load_settings(DashboardSettings, {}, SettingsFile(path, shared=True))
    assert dashboard.lake == "/srv/lake"
    with pytest.raises(SettingsError, match="unknown setting"):
        load_settings(DashboardSettings, {}, SettingsFile(path))
