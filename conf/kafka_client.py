"""Every Kafka client of the project, configured from one place
(docs/architecture.md#connections-and-security).

``KafkaSettings`` (bootstrap servers, security protocol, TLS, SASL, pass-through
properties) become the configuration of each kind of client:

- librdkafka's (confluent-kafka): the producer, the admin clients, the job's topic check;
- Kafka's Java client's, as options of Spark's Kafka source (``kafka.*``): the job.

Certificates go to the Java client inline (PEM text, not a path), so a cluster's
executors need no copy of the files; secrets go only into these in-memory
configurations, which Spark redacts from plans and its UI (jobs/spark/spark_session.py).
"""

from __future__ import annotations

from pathlib import Path

from conf.settings.kafka_connection import KafkaSettings

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def librdkafka_config(settings: KafkaSettings) -> dict[str, str]:
    """confluent-kafka configuration: connection and security (add the client's own)."""
    config = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.kafka_security_protocol.lower(),
    }
    if settings.kafka_sasl_mechanism:
        config["sasl.mechanism"] = settings.kafka_sasl_mechanism
        config["sasl.username"] = settings.kafka_sasl_username or ""
        config["sasl.password"] = _secret(settings.kafka_sasl_password)
    if settings.kafka_ssl_ca_location:
        config["ssl.ca.location"] = str(settings.kafka_ssl_ca_location)
    if settings.kafka_ssl_certificate_location and settings.kafka_ssl_key_location:
        config["ssl.certificate.location"] = str(settings.kafka_ssl_certificate_location)
        config["ssl.key.location"] = str(settings.kafka_ssl_key_location)
        if settings.kafka_ssl_key_password:
            config["ssl.key.password"] = _secret(settings.kafka_ssl_key_password)
    return {**config, **settings.kafka_properties}


def spark_options(settings: KafkaSettings) -> dict[str, str]:
    """Options of Spark's Kafka source (the Java client's properties, ``kafka.``-prefixed)."""
    options = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_sasl_mechanism:
        options["sasl.mechanism"] = settings.kafka_sasl_mechanism
        options["sasl.jaas.config"] = (
            f"{_JAAS_MODULES[settings.kafka_sasl_mechanism]} required "
            f'username="{_jaas_quoted(settings.kafka_sasl_username or "")}" '
            f'password="{_jaas_quoted(_secret(settings.kafka_sasl_password))}";'
        )
    if settings.kafka_ssl_ca_location:
        options["ssl.truststore.type"] = "PEM"
        options["ssl.truststore.certificates"] = _pem(settings.kafka_ssl_ca_location)
    if settings.kafka_ssl_certificate_location and settings.kafka_ssl_key_location:
        options["ssl.keystore.type"] = "PEM"
        options["ssl.keystore.certificate.chain"] = _pem(settings.kafka_ssl_certificate_location)
        options["ssl.keystore.key"] = _pem(settings.kafka_ssl_key_location)
        if settings.kafka_ssl_key_password:
            options["ssl.key.password"] = _secret(settings.kafka_ssl_key_password)
    options.update(settings.kafka_properties)
    return {f"kafka.{key}": value for key, value in options.items()}


def describe(settings: KafkaSettings) -> str:
    """Where and how a client connects, for start-up lines (never a secret)."""
    how = settings.kafka_security_protocol
    if settings.kafka_sasl_mechanism:
        how += f", {settings.kafka_sasl_mechanism} as {settings.kafka_sasl_username}"
    if settings.kafka_ssl_certificate_location:
        how += ", client certificate"
    return f"{settings.bootstrap_servers} ({how})"


def _secret(value) -> str:  # type: ignore[no-untyped-def]
    return value.get_secret_value() if value is not None else ""


def _jaas_quoted(text: str) -> str:
    """A value inside a JAAS option's double quotes."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _pem(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()
