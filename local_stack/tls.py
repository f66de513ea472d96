"""Certificates for the local servers' TLS (scripts/kafka-local ``--sasl-ssl-port``, and
the tests' Alertmanager behind TLS), made with the JDK's ``keytool``, which comes with
the Java the project runs on: nothing else to install. Passwords reach keytool through
its environment, never its arguments.

- :func:`make_authority`: a certificate authority (its key in a PKCS#12 keystore, its
  certificate as PEM: the file clients trust, ``kafka_ssl_ca_location``);
- :func:`make_server_keystore`: a key and a certificate for 127.0.0.1 and localhost,
  signed by that authority, in a PKCS#12 keystore (what Kafka reads; ``openssl pkcs12``
  turns it into the PEM files other servers read).
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

VALID_DAYS = "3650"


class CertificateError(RuntimeError):
    """keytool failed; the message carries its output."""


@dataclass(frozen=True)
class Authority:
    """A certificate authority made for one broker."""

    keystore: Path  # PKCS#12, its private key
    password: str
    certificate: Path  # PEM


def _keytool(*args: str, passwords: dict[str, str], stdin: str | None = None) -> str:
    done = subprocess.run(
        ["keytool", *args], input=stdin, capture_output=True, text=True,
        env={**os.environ, **passwords},
    )  # fmt: skip
    if done.returncode != 0:
        raise CertificateError(f"keytool {args[0]} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _private(path: Path) -> None:
    path.chmod(0o600)


def make_authority(folder: Path, name: str = "SensorWatch local broker CA") -> Authority:
    """A new certificate authority in ``folder`` (ca.p12 and ca.pem)."""
    folder.mkdir(parents=True, exist_ok=True)
    keystore, certificate = folder / "ca.p12", folder / "ca.pem"
    password = secrets.token_urlsafe(18)
    env = {"SW_CA_PASS": password}
    _keytool(
        "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048",
        "-dname", f"CN={name}", "-ext", "bc:c", "-validity", VALID_DAYS,
        "-keystore", str(keystore), "-storetype", "PKCS12", "-storepass:env", "SW_CA_PASS",
        passwords=env,
    )  # fmt: skip
    _keytool(
        "-exportcert", "-rfc", "-alias", "ca", "-keystore", str(keystore),
        "-storepass:env", "SW_CA_PASS", "-file", str(certificate),
        passwords=env,
    )  # fmt: skip
    _private(keystore)
    return Authority(keystore, password, certificate)


def make_server_keystore(
    folder: Path,
    authority: Authority,
    hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
    name: str = "broker",
    usage: str = "serverAuth",
) -> tuple[Path, str]:
    """A key and a certificate for ``hosts`` signed by ``authority``, with the chain, in a
    new PKCS#12 keystore ``folder/<name>.p12``; returns it and its password. ``usage``
    ``clientAuth`` makes a client's certificate (mutual TLS), its first host its name."""
    keystore, password = folder / f"{name}.p12", secrets.token_urlsafe(18)
    env = {"SW_CA_PASS": authority.password, "SW_STORE_PASS": password}
    store = ["-keystore", str(keystore), "-storetype", "PKCS12", "-storepass:env", "SW_STORE_PASS"]
    names = ",".join(f"ip:{h}" if h.replace(".", "").isdigit() else f"dns:{h}" for h in hosts)
    _keytool(
        "-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048",
        "-dname", f"CN={hosts[0]}", "-validity", VALID_DAYS, *store,
        passwords=env,
    )  # fmt: skip
    request = _keytool("-certreq", "-alias", name, *store, passwords=env)
    signed = _keytool(
        "-gencert", "-alias", "ca", "-keystore", str(authority.keystore),
        "-storepass:env", "SW_CA_PASS", "-rfc", "-validity", VALID_DAYS,
        "-ext", f"SAN={names}", "-ext", "KU=digitalSignature,keyEncipherment",
        "-ext", f"EKU={usage}",
        passwords=env, stdin=request,
    )  # fmt: skip
    _keytool(
        "-importcert", "-alias", "ca", "-file", str(authority.certificate), "-noprompt", *store,
        passwords=env,
    )  # fmt: skip
    chain = folder / f"{name}-chain.pem"
    chain.write_text(signed + authority.certificate.read_text(encoding="utf-8"), encoding="utf-8")
    _keytool("-importcert", "-alias", name, "-file", str(chain), *store, passwords=env)
    _private(keystore)
    return keystore, password


def export_pem(keystore: Path, password: str, folder: Path, name: str) -> tuple[Path, Path]:
    """The certificate and the private key (PKCS#8, unencrypted, 0600) of a PKCS#12
    keystore as PEM files ``folder/<name>.pem`` and ``<name>.key``, for the clients and
    servers that read PEM (librdkafka, Kafka's PEM keystores, Alertmanager). keytool
    cannot write a private key, so this is ``openssl pkcs12``."""
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    env = {**os.environ, "SW_STORE_PASS": password}
    for out, part in ((cert, ["-clcerts", "-nokeys"]), (key, ["-nocerts", "-nodes"])):
        done = subprocess.run(
            ["openssl", "pkcs12", "-in", str(keystore), "-passin", "env:SW_STORE_PASS",
             *part, "-out", str(out)],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            raise CertificateError(f"openssl pkcs12 failed:\n{done.stdout}{done.stderr}")
    _private(key)
    return cert, key
