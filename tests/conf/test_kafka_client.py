"""Kafka connection settings (conf/settings.KafkaSettings) and the one place that turns
them into each client's configuration (conf/kafka_client.py): librdkafka for the
producer and the admin clients, Kafka's Java client for Spark's source."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conf.kafka_client import describe, librdkafka_config, spark_options
from conf.paths import PROJECT_ROOT
from conf.settings.base import SettingsError, SettingsFile, load_settings
from conf.settings.job import JobSettings
from conf.settings.producer import ProducerSettings

SECRET = 'pa"ss\\word-42'


@pytest.fixture
def clean_env(monkeypatch) -> pytest.MonkeyPatch:
    for name in ("PASSWORD", "PASSWORD_FILE"):
        for setting in ("KAFKA_SASL", "KAFKA_SSL_KEY"):
            monkeypatch.setenv(f"SENSORWATCH_{setting}_{name}", "")
            monkeypatch.delenv(f"SENSORWATCH_{setting}_{name}")
    return monkeypatch


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for name in ("ca", "cert", "key"):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_text(
            f"-----BEGIN {name.upper()}-----\nAAAA\n-----END {name.upper()}-----\n"
        )
    return files


def sasl_ssl(pem: dict[str, Path], **more: object) -> dict[str, object]:
    return {
        "bootstrap_servers": "broker.example:9093",
        "kafka_security_protocol": "SASL_SSL",
        "kafka_sasl_mechanism": "SCRAM-SHA-512",
        "kafka_sasl_username": "sensorwatch",
        "kafka_ssl_ca_location": str(pem["ca"]),
        **more,
    }


def test_plaintext_by_default(clean_env) -> None:
    settings = load_settings(ProducerSettings, {})

    assert librdkafka_config(settings) == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "plaintext",
    }
    assert spark_options(settings) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }


def test_sasl_ssl_reaches_both_clients_with_the_secret_from_the_environment(clean_env, pem) -> None:
    clean_env.setenv("SENSORWATCH_KAFKA_SASL_PASSWORD", SECRET)
    settings = load_settings(JobSettings, sasl_ssl(pem))

    assert librdkafka_config(settings) == {
        "bootstrap.servers": "broker.example:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sensorwatch",
        "sasl.password": SECRET,
        "ssl.ca.location": str(pem["ca"]),
    }
    options = spark_options(settings)
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="sensorwatch" password="pa\\"ss\\\\word-42";'
    )
    # The CA travels inline: a cluster's executors need no copy of the file.
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.certificates"] == pem["ca"].read_text().strip()
    assert SECRET not in describe(settings) and SECRET not in repr(settings)
    assert describe(settings) == "broker.example:9093 (SASL_SSL, SCRAM-SHA-512 as sensorwatch)"


def test_the_password_can_come_from_a_file(clean_env, pem, tmp_path: Path) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text(SECRET + "\n")
    clean_env.setenv("SENSORWATCH_KAFKA_SASL_PASSWORD_FILE", str(secret_file))

    settings = load_settings(JobSettings, sasl_ssl(pem, kafka_sasl_mechanism="PLAIN"))

    assert librdkafka_config(settings)["sasl.password"] == SECRET
    assert spark_options(settings)["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
    )


def test_mutual_tls_gives_paths_to_librdkafka_and_pem_text_to_java(clean_env, pem) -> None:
    clean_env.setenv("SENSORWATCH_KAFKA_SSL_KEY_PASSWORD", "key-secret")
    settings = load_settings(
        JobSettings,
        {
            "kafka_security_protocol": "SSL",
            "kafka_ssl_ca_location": str(pem["ca"]),
            "kafka_ssl_certificate_location": str(pem["cert"]),
            "kafka_ssl_key_location": str(pem["key"]),
        },
    )

    config, options = librdkafka_config(settings), spark_options(settings)
    assert (config["ssl.certificate.location"], config["ssl.key.location"]) == (
        str(pem["cert"]),
        str(pem["key"]),
    )
    assert config["ssl.key.password"] == "key-secret"
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == pem["cert"].read_text().strip()
    assert options["kafka.ssl.keystore.key"] == pem["key"].read_text().strip()
    assert options["kafka.ssl.key.password"] == "key-secret"
    assert describe(settings) == "127.0.0.1:9092 (SSL, client certificate)"


def test_other_properties_pass_through_to_both_clients(clean_env) -> None:
    settings = load_settings(
        JobSettings, {"kafka_properties": "client.id=sw,ssl.endpoint.identification.algorithm=none"}
    )

    assert librdkafka_config(settings)["client.id"] == "sw"
    assert spark_options(settings)["kafka.ssl.endpoint.identification.algorithm"] == "none"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"kafka_security_protocol": "SASL_SSL"},
         "kafka_security_protocol SASL_SSL needs kafka_sasl_mechanism, kafka_sasl_password, "
         "kafka_sasl_username"),
        ({"kafka_sasl_username": "u"}, "kafka_sasl_username need kafka_security_protocol SASL_SSL"),
        ({"kafka_security_protocol": "SASL_PLAINTEXT", "kafka_sasl_mechanism": "GSSAPI"},
         "Input should be 'PLAIN', 'SCRAM-SHA-256' or 'SCRAM-SHA-512'"),
        ({"kafka_security_protocol": "SSL", "kafka_ssl_ca_location": "/nonexistent/ca.pem"},
         "no such file: /nonexistent/ca.pem"),
        ({"kafka_properties": "sasl.password=x"}, "sasl.password has a setting of its own"),
        ({"kafka_properties": "sasl.oauthbearer.client.secret=x"}, "would put a secret"),
        ({"kafka_properties": "Bad Key=x"}, "is not a Kafka client property name"),
    ],
)  # fmt: skip
def test_an_incomplete_or_unsafe_connection_is_refused_by_name(
    clean_env, given: dict, message: str
) -> None:
    with pytest.raises(SettingsError) as failure:
        load_settings(JobSettings, given)

    assert message in str(failure.value)


def test_a_secret_is_never_a_flag_nor_in_a_settings_file(clean_env, tmp_path: Path) -> None:
    helps = [
        subprocess.run(
            [sys.executable, "-m", module, "--help"], capture_output=True, text=True,
            cwd=PROJECT_ROOT, timeout=120,
        ).stdout
        for module in ("producer", "jobs.stream")
    ]  # fmt: skip
    config = tmp_path / "pipeline.toml"
    config.write_text('[kafka]\nkafka_sasl_password = "in-a-file"\n', encoding="utf-8")
    with pytest.raises(SettingsError) as failure:
        load_settings(JobSettings, {}, SettingsFile(config))

    for text in helps:
        assert "--kafka-security-protocol" in text and "--kafka-sasl-username" in text
        assert "--kafka-sasl-password" not in text and "--kafka-ssl-key-password" not in text
    assert "SENSORWATCH_KAFKA_SASL_PASSWORD_FILE" in str(failure.value)
    assert "in-a-file" not in str(failure.value)


def test_an_unreadable_password_file_is_one_line_naming_the_variable(clean_env, pem) -> None:
    clean_env.setenv("SENSORWATCH_KAFKA_SASL_PASSWORD_FILE", "/nonexistent/password")

    with pytest.raises(SettingsError) as failure:
        load_settings(JobSettings, sasl_ssl(pem))

    assert str(failure.value) == (
        "SENSORWATCH_KAFKA_SASL_PASSWORD_FILE=/nonexistent/password: cannot read it "
        "(No such file or directory)"
    )


def test_the_job_s_micro_batches_do_not_wait_on_fetches_and_real_time_reads_do(clean_env) -> None:
    """A micro-batch reads a known offset range: Kafka's 500-ms fetch wait cost half a
    second per wave of tasks on a topic nobody writes to (jobs/ingest/source.py). Real-time
    mode's open-ended reads keep Kafka's default; a user's own setting wins over both."""
    from jobs.ingest.source import RANGE_FETCH_WAIT_MS, kafka_source_options

    settings = load_settings(JobSettings, {"topic": "readings"})
    tuned = load_settings(JobSettings, {"kafka_properties": {"fetch.max.wait.ms": "200"}})

    ranged = kafka_source_options(settings)
    assert ranged["kafka.fetch.max.wait.ms"] == str(RANGE_FETCH_WAIT_MS) == "10"
    assert ranged["subscribe"] == "readings"
    assert spark_options(settings).items() <= ranged.items()
    assert "kafka.fetch.max.wait.ms" not in kafka_source_options(settings, ranged=False)
    assert kafka_source_options(tuned)["kafka.fetch.max.wait.ms"] == "200"
    assert kafka_source_options(tuned, ranged=False)["kafka.fetch.max.wait.ms"] == "200"
