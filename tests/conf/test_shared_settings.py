"""What the programs' settings share: one lake and one rules file for all, settings that
moved to the rules file refused naming their place, a bad rules file named."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.dashboard import DashboardSettings
from conf.settings.job import JobSettings
from conf.settings.notifier import NotifierSettings
from conf.settings.producer import ProducerSettings


def test_the_ops_view_shares_the_jobs_lake_and_thresholds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Set once for the job, in its settings file or the environment, and the dashboard
    reads the same lake and rules."""
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "hot"\nkind = "reading"\nfield = "temperature_c"\nop = ">="\n'
        'threshold = 50.0\nseverity = "critical"\n',
        encoding="utf-8",
    )
    config = tmp_path / "pipeline.toml"
    config.write_text('lake = "/srv/lake"\n', encoding="utf-8")
    monkeypatch.setenv("SENSORWATCH_RULES", str(rules))

    dashboard = load_settings(DashboardSettings, {}, SettingsFile(config, shared=True))
    job = load_settings(JobSettings, {}, SettingsFile(config, shared=True))

    assert dashboard.lake == job.lake == "/srv/lake"
    assert dashboard.alert_rules == job.alert_rules
    assert [r.threshold for r in job.alert_rules.rules] == [50.0]
    with pytest.raises(SettingsError, match=r"--host \(SENSORWATCH_DASHBOARD_HOST\)"):
        load_settings(DashboardSettings, {"dashboard_host": ""}, flags={"dashboard_host": "--host"})


def test_a_threshold_setting_that_moved_to_the_rules_file_is_refused_naming_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text("critical_temp_c = 50.0\n", encoding="utf-8")
    with pytest.raises(SettingsError, match=r"settings file: critical_temp_c is now "
                       r"overheat_reading's threshold in the rules file"):  # fmt: skip
        load_settings(JobSettings, {}, SettingsFile(config, shared=True))

    monkeypatch.setenv("SENSORWATCH_INCIDENT_HOLD", "10 minutes")
    with pytest.raises(SettingsError, match=r"SENSORWATCH_INCIDENT_HOLD: incident_hold is now "
                       r"each rule's resolve_after"):  # fmt: skip
        load_settings(NotifierSettings, {})


def test_a_bad_rules_file_stops_a_program_naming_the_file_the_rule_and_the_problem(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "hot"\nkind = "reading"\nfield = "pressure"\n')
    with pytest.raises(SettingsError) as caught:
        load_settings(ProducerSettings, {"rules": str(rules)})

    assert str(caught.value).startswith(f"--rules (SENSORWATCH_RULES): rules file {rules}: ")
    assert "rule 'hot': field: " in str(caught.value)
