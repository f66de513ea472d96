"""What the programs' settings share: one lake and one rules file for all, settings that
moved to the rules file refused naming their place, a bad rules file named, settings that
go together refused alone."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from conf.settings.alertmanager_client import AlertmanagerSettings
from conf.settings.base import ProgramSettings, SettingsError, SettingsFile, load_settings
from conf.settings.dashboard import DashboardSettings
from conf.settings.job import JobSettings
from conf.settings.kafka_connection import KafkaSettings
from conf.settings.mqtt_connection import MqttSettings
from conf.settings.notifier import NotifierSettings
from conf.settings.producer import ProducerSettings
from local_stack.settings import PrometheusLocalSettings


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


@pytest.mark.parametrize(
    ("settings", "given", "message"),
    [
        (KafkaSettings,
         {"kafka_security_protocol": "SSL", "kafka_ssl_certificate_location": "{pem}"},
         "mutual TLS needs both kafka_ssl_certificate_location and kafka_ssl_key_location"),
        # A certificate alone over plaintext: its key is asked for first, then the protocol.
        (KafkaSettings, {"kafka_ssl_certificate_location": "{pem}"},
         "mutual TLS needs both kafka_ssl_certificate_location and kafka_ssl_key_location"),
        (MqttSettings, {"mqtt_tls": True, "mqtt_key_location": "{pem}"},
         "a client certificate needs both mqtt_certificate_location and mqtt_key_location"),
        (AlertmanagerSettings, {"alertmanager_user": "pager"},
         "Alertmanager's basic auth needs both alertmanager_user and "
         "SENSORWATCH_ALERTMANAGER_PASSWORD (or _FILE)"),
        (PrometheusLocalSettings, {"prometheus_scrape_password_file": "{pem}"},
         "basic auth for scraping needs both prometheus_scrape_user and "
         "prometheus_scrape_password_file"),
    ],
)  # fmt: skip
def test_settings_that_go_together_are_refused_alone_naming_both(
    settings: type, given: dict[str, object], message: str, tmp_path: Path
) -> None:
    """A certificate without its key, a user without a password: refused at start, the
    message naming what is missing (ProgramSettings.GIVEN_TOGETHER)."""
    pem = tmp_path / "half.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n", encoding="utf-8")
    given = {k: str(pem) if v == "{pem}" else v for k, v in given.items()}

    with pytest.raises(SettingsError) as failure:
        load_settings(settings, given)

    assert message in str(failure.value)


def test_a_group_of_settings_given_together_must_name_settings_unset_by_default() -> None:
    """A misspelt name, or a setting with a default, fails when the class is written, not
    at some user's start."""
    with pytest.raises(TypeError, match="tls_kye is not a setting of Half unset by default"):

        class Half(ProgramSettings):
            tls_cert: str | None = None
            tls_key: str | None = None
            GIVEN_TOGETHER: ClassVar[dict[str, tuple[str, ...]]] = {
                "mutual TLS": ("tls_cert", "tls_kye")
            }
