"""A real Apache Kafka broker on loopback, without Docker: ``scripts/kafka-local``.

One single-node KRaft broker (broker and controller in one JVM) per data directory,
listening on 127.0.0.1 only. Several can run side by side on different ports and data
directories. The data directory holds everything of one broker:

    server.properties   generated on each start (ports may change between starts)
    data/               the Kafka log directories, formatted once on first start
    broker.log          the broker's log (log4j2, rolled at 20 MB)
    broker.out          the JVM's own stdout/stderr (crashes before logging starts)
    broker.json         pid and ports of the running broker
    security/           with --sasl-ssl-port: the CA (ca.pem: what clients trust), the
                        broker's keystore, the SASL user's password (made once, 0600)

Usage::

    scripts/kafka-local start [--data-dir DIR] [--port N]   # prints bootstrap=127.0.0.1:N
    scripts/kafka-local start --sasl-ssl-port M ...         # also a SASL_SSL listener
    scripts/kafka-local start --ssl-port K ...              # also a mutual-TLS listener
    scripts/kafka-local client-env [--mtls] [--data-dir DIR]   # SENSORWATCH_* lines for them
    scripts/kafka-local status [--data-dir DIR]
    scripts/kafka-local stop [--data-dir DIR]

The broker's JVM takes more options from ``KAFKA_OPTS``, as Kafka's own start scripts do.

With ``--sasl-ssl-port`` the broker also listens with TLS (a certificate for 127.0.0.1
and localhost from a CA made for this data directory) and SASL: the user ``sensorwatch``
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. The plaintext port stays, on loopback, for
the broker itself and administration. With ``--ssl-port`` it also listens with TLS and
requires a client certificate (mutual TLS): ``security/client.pem`` and ``client.key``,
made for the data directory by the same CA.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from common.waiting import poll_until
from conf.paths import KAFKA_JARS_DIR, KAFKA_LOG4J2, VAR_DIR
from local_stack.server import (
    LOOPBACK,
    LocalServer,
    LocalServerError,
    RunningServer,
    entry_point,
    free_port,
    print_exports,
    write_private,
)
from local_stack.tls import export_pem, make_authority, make_server_keystore

DEFAULT_DATA_DIR = VAR_DIR / "kafka"
DEFAULT_PORT = 9092
READY_PROBE_TOPIC = "__sensorwatch_ready_probe"
# A broker whose heartbeat to its own controller lags by more than this is fenced: it
# leads no partition, and a topic cannot be created ("All brokers are currently fenced").
# Kafka's 9 s was outrun on a 2-core machine at a load average of 49 (a CI run); a
# single node has no other broker to fail over to, so a longer session loses nothing.
BROKER_SESSION_TIMEOUT_MS = 60_000
SASL_USER = "sensorwatch"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class BrokerError(LocalServerError):
    """A LocalServerError of Kafka broker (scripts/kafka-local)."""


@dataclass(frozen=True)
class BrokerInfo(RunningServer):
    """A running local broker: its listeners are ``bootstrap``, the mutual-TLS ``ssl``
    and ``sasl_ssl`` (those two when it was started with them)."""

    controller_port: int
    sasl_ssl_port: int | None = None
    ssl_port: int | None = None

    LISTENERS: ClassVar[dict[str, str]] = {
        "bootstrap": "port",
        "ssl": "ssl_port",
        "sasl_ssl": "sasl_ssl_port",
    }

    @property
    def bootstrap(self) -> str:
        """The bootstrap address clients connect to."""
        return f"{LOOPBACK}:{self.port}"


# The JVM's log folder names the data directory on its command line; the broker's own
# log is broker.log there, its console output broker.out. A clean stop may take a minute:
# the broker flushes its logs and writes its clean-shutdown marker, which spares the next
# start a log recovery.
SERVER = LocalServer(
    "kafka-local", "broker.json", "broker.out", BrokerError,
    marker=lambda data_dir: f"-Dkafka.logs.dir={data_dir}",
    kind=BrokerInfo, default_data_dir=DEFAULT_DATA_DIR, stop_timeout=60.0,
)  # fmt: skip


@dataclass(frozen=True)
class Security:
    """What the TLS listeners need: made once per data directory (security/). Besides
    the broker's keystore, a client certificate and key (PEM) for the mutual-TLS one."""

    folder: Path
    keystore: Path
    keystore_password: str
    password: str  # the SASL user's

    @property
    def ca(self) -> Path:
        """The CA certificate (PEM) clients trust."""
        return self.folder / "ca.pem"

    @property
    def password_file(self) -> Path:
        """The SASL user's password alone (for SENSORWATCH_KAFKA_SASL_PASSWORD_FILE)."""
        return self.folder / "sasl-password"

    @property
    def client_certificate(self) -> Path:
        """A client certificate (PEM) the mutual-TLS listener accepts."""
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        """Its private key (PEM, PKCS#8, unencrypted, 0600)."""
        return self.folder / "client.key"


def security(data_dir: Path) -> Security:
    """The data directory's CA, broker keystore and SASL password, made on first use."""
    folder = data_dir / "security"
    state = folder / "security.json"
    try:
        stored = json.loads(state.read_text(encoding="utf-8"))
        return Security(
            folder, Path(stored["keystore"]), stored["keystore_password"], stored["password"]
        )
    except (OSError, ValueError, KeyError):
        pass
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    authority = make_authority(folder)
    keystore, keystore_password = make_server_keystore(folder, authority)
    client, client_password = make_server_keystore(
        folder, authority, (SASL_USER,), name="client", usage="clientAuth"
    )
    export_pem(client, client_password, folder, "client")
    made = Security(folder, keystore, keystore_password, secrets.token_urlsafe(18))
    write_private(made.password_file, made.password)
    write_private(
        state,
        json.dumps(
            {"keystore": str(keystore), "keystore_password": keystore_password,
             "password": made.password}
        ),
    )  # fmt: skip
    return made


def sasl_ssl_client(info: BrokerInfo, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """The SENSORWATCH_* settings that point the producer and the job at the broker's
    SASL_SSL listener (the password as a file, never its value)."""
    address = info.listener("sasl_ssl")
    if address is None:
        raise BrokerError(f"the broker on {info.data_dir} has no SASL_SSL listener")
    made = security(info.data_dir)
    return {
        "SENSORWATCH_BOOTSTRAP_SERVERS": address,
        "SENSORWATCH_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "SENSORWATCH_KAFKA_SASL_MECHANISM": mechanism,
        "SENSORWATCH_KAFKA_SASL_USERNAME": SASL_USER,
        "SENSORWATCH_KAFKA_SASL_PASSWORD_FILE": str(made.password_file),
        "SENSORWATCH_KAFKA_SSL_CA_LOCATION": str(made.ca),
    }


def mtls_client(info: BrokerInfo) -> dict[str, str]:
    """The SENSORWATCH_* settings for the broker's mutual-TLS listener (SSL, a client
    certificate)."""
    address = info.listener("ssl")
    if address is None:
        raise BrokerError(f"the broker on {info.data_dir} has no mutual-TLS listener")
    made = security(info.data_dir)
    return {
        "SENSORWATCH_BOOTSTRAP_SERVERS": address,
        "SENSORWATCH_KAFKA_SECURITY_PROTOCOL": "SSL",
        "SENSORWATCH_KAFKA_SSL_CA_LOCATION": str(made.ca),
        "SENSORWATCH_KAFKA_SSL_CERTIFICATE_LOCATION": str(made.client_certificate),
        "SENSORWATCH_KAFKA_SSL_KEY_LOCATION": str(made.client_key),
    }


def _server_properties(
    data_dir: Path,
    port: int,
    controller_port: int,
    sasl_ssl_port: int | None = None,
    ssl_port: int | None = None,
) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        # A static voter set: the controller port may differ from one start to the next.
        "controller.quorum.voters": f"1@{LOOPBACK}:{controller_port}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{port},CONTROLLER://{LOOPBACK}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir / "data"),
        "num.partitions": "6",
        # A mistyped topic must fail loudly, not appear as a new empty topic.
        "auto.create.topics.enable": "false",
        # Single node: every internal topic has one replica; few partitions start faster.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
        # Simulated event clocks put message timestamps far in the past; time-based
        # retention would delete them at once and break every exactly-once check.
        "log.retention.ms": "-1",
    }
    if sasl_ssl_port is not None:
        settings.update(_sasl_ssl_properties(security(data_dir), sasl_ssl_port))
        for key in ("listeners", "advertised.listeners"):
            settings[key] += f",SASL_SSL://{LOOPBACK}:{sasl_ssl_port}"
        settings["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
    if ssl_port is not None:
        made = security(data_dir)
        settings.update(_keystore_properties("listener.name.ssl.", made))
        settings.update({
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(made.ca),
            "listener.name.ssl.ssl.client.auth": "required",
        })  # fmt: skip
        for key in ("listeners", "advertised.listeners"):
            settings[key] += f",SSL://{LOOPBACK}:{ssl_port}"
        settings["listener.security.protocol.map"] += ",SSL:SSL"
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def _sasl_ssl_properties(made: Security, port: int) -> dict[str, str]:
    """The SASL_SSL listener: TLS with the data directory's keystore; SASL PLAIN (its one
    user in the JAAS line) and SCRAM (credentials stored in the cluster's metadata, set
    after start through the plaintext port: :func:`_add_scram_credentials`)."""
    listener = "listener.name.sasl_ssl."
    plain = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SASL_USER}="{made.password}";'
    )
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    return {
        "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        f"{listener}plain.sasl.jaas.config": plain,
        f"{listener}scram-sha-256.sasl.jaas.config": scram,
        f"{listener}scram-sha-512.sasl.jaas.config": scram,
        **_keystore_properties(listener, made),
        f"{listener}ssl.client.auth": "none",
    }


def _keystore_properties(listener: str, made: Security) -> dict[str, str]:
    """A TLS listener's own certificate: the data directory's broker keystore."""
    return {
        f"{listener}ssl.keystore.type": "PKCS12",
        f"{listener}ssl.keystore.location": str(made.keystore),
        f"{listener}ssl.keystore.password": made.keystore_password,
    }


def _add_scram_credentials(bootstrap: str, password: str, timeout: float = 30.0) -> None:
    """The SASL user's SCRAM-SHA-256 and -512 credentials (idempotent: an upsert)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    # One request per mechanism: Kafka refuses two alterations of one user in a request.
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(
            SASL_USER, ScramCredentialInfo(mechanism, 8192), password.encode("utf-8")
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=timeout)


def _java(*args: str, data_dir: Path, heap: str) -> list[str]:
    jars = KAFKA_JARS_DIR / "*"
    if not any(KAFKA_JARS_DIR.glob("kafka_*.jar")):
        raise BrokerError(f"no Kafka broker jars in {KAFKA_JARS_DIR}: run scripts/setup first")
    return [
        "java",
        f"-Xmx{heap}",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={KAFKA_LOG4J2}",
        f"-Dkafka.logs.dir={data_dir}",
        *shlex.split(os.environ.get("KAFKA_OPTS", "")),  # last, as kafka-run-class.sh has it
        "-cp",
        str(jars),
        *args,
    ]


def _kraft_cluster_id() -> str:
    """A random cluster id in Kafka's format (URL-safe base64 of a UUID, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _format_storage(data_dir: Path, config: Path, heap: str, cluster_id: str | None = None) -> None:
    if (data_dir / "data" / "meta.properties").exists():
        return
    # One token "--cluster-id=ID": one id in 64 starts with "-", which a separate
    # argument would make look like an option to Kafka's argument parser.
    cluster_id = cluster_id or _kraft_cluster_id()
    cmd = _java(
        "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", f"--config={config}",
        data_dir=data_dir, heap=heap,
    )  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BrokerError(f"formatting {data_dir / 'data'} failed:\n{done.stdout}{done.stderr}")


# The broker running on a data directory, or None (LocalServer.running).
running_broker = SERVER.running


def _write_once(
    bootstrap: str, topic: str, timeout: float, config: dict[str, str] | None = None
) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0,
         **(config or {})}
    )  # fmt: skip
    errors: list[KafkaError] = []
    producer.produce(topic, b"ready", on_delivery=lambda err, _msg: err and errors.append(err))
    if producer.flush(timeout) or errors:
        raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))


def wait_until_ready(
    bootstrap: str,
    timeout: float = 60.0,
    alive: Callable[[], bool] | None = None,
    config: dict[str, str] | None = None,
) -> None:
    """Block until a topic can be created through the Admin API and written idempotently.

    The idempotent write waits out the broker's coordinator loading, so the first real
    producer does not start with "coordinator load in progress" retries.

    Raises:
        BrokerError: when ``timeout`` passes first or ``alive`` reports the broker died.
    """
    # log_level 0: "connection refused" while the broker boots is expected, not news.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(config or {})})
    deadline = time.monotonic() + timeout  # the probe's write gets what is left of it
    last_error: object = "no answer yet"

    def probe() -> bool:
        nonlocal last_error
        if alive is not None and not alive():
            raise BrokerError(f"the broker at {bootstrap} exited while starting")
        try:
            topic = NewTopic(READY_PROBE_TOPIC, num_partitions=1, replication_factor=1)
            try:
                admin.create_topics([topic], operation_timeout=5, request_timeout=5)[
                    READY_PROBE_TOPIC
                ].result(timeout=10)
            except KafkaException as exc:
                # An earlier attempt created it but timed out (a loaded machine), or its
                # write failed: the probe topic is there, go on to the write.
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            _write_once(bootstrap, READY_PROBE_TOPIC, max(1.0, deadline - time.monotonic()), config)
            admin.delete_topics([READY_PROBE_TOPIC], request_timeout=5)[READY_PROBE_TOPIC].result(
                timeout=10
            )
            return True
        except KafkaException as exc:
            last_error = exc.args[0] if exc.args else exc
            return False

    if not poll_until(probe, timeout, 0.25):
        raise BrokerError(
            f"the broker at {bootstrap} did not answer within {timeout:.0f}s: {last_error}"
        )


def start(
    data_dir: Path = DEFAULT_DATA_DIR,
    port: int = DEFAULT_PORT,
    *,
    heap: str = "1g",
    timeout: float = 90.0,
    sasl_ssl_port: int | None = None,
    ssl_port: int | None = None,
) -> BrokerInfo:
    """Start a broker on ``data_dir`` and return once it answers (idempotent).

    Raises:
        BrokerError: the port is taken, the broker is already running on another port,
            or it did not come up (the message carries the tail of its log).
    """
    data_dir = data_dir.resolve()
    current = running_broker(data_dir)
    if current is not None:
        SERVER.check_same(
            data_dir, "a broker",
            {"--port": current.port, "--sasl-ssl-port": current.sasl_ssl_port,
             "--ssl-port": current.ssl_port},
            {"--port": port, "--sasl-ssl-port": sasl_ssl_port, "--ssl-port": ssl_port},
        )  # fmt: skip
        wait_until_ready(current.bootstrap, timeout)
        return current
    for wanted, flag in (
        (port, "--port"), (sasl_ssl_port, "--sasl-ssl-port"), (ssl_port, "--ssl-port")
    ):  # fmt: skip
        SERVER.check_free(wanted, flag)
    data_dir.mkdir(parents=True, exist_ok=True)
    controller_port = free_port()
    config = data_dir / "server.properties"
    # 0600: with a SASL_SSL listener it holds the keystore's and the PLAIN user's passwords.
    write_private(
        config, _server_properties(data_dir, port, controller_port, sasl_ssl_port, ssl_port)
    )
    _format_storage(data_dir, config, heap)

    bootstrap = f"{LOOPBACK}:{port}"

    def ready(alive: Callable[[], bool]) -> None:
        wait_until_ready(bootstrap, timeout, alive=alive)
        made = security(data_dir) if sasl_ssl_port or ssl_port else None
        if sasl_ssl_port is not None and made is not None:
            _add_scram_credentials(bootstrap, made.password)
            client = {
                "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": SASL_USER, "sasl.password": made.password,
                "ssl.ca.location": str(made.ca),
            }  # fmt: skip
            wait_until_ready(f"{LOOPBACK}:{sasl_ssl_port}", timeout, config=client)
        if ssl_port is not None and made is not None:
            client = {
                "security.protocol": "ssl", "ssl.ca.location": str(made.ca),
                "ssl.certificate.location": str(made.client_certificate),
                "ssl.key.location": str(made.client_key),
            }  # fmt: skip
            wait_until_ready(f"{LOOPBACK}:{ssl_port}", timeout, config=client)

    proc = SERVER.launch(
        _java("kafka.Kafka", str(config), data_dir=data_dir, heap=heap),
        data_dir=data_dir, logs=(data_dir / "broker.log",),
        state={"port": port, "controller_port": controller_port,
               "sasl_ssl_port": sasl_ssl_port, "ssl_port": ssl_port},
        wait=ready, failures=(KafkaException,),
    )  # fmt: skip
    return BrokerInfo(proc.pid, port, data_dir, controller_port, sasl_ssl_port, ssl_port)


# Stop the broker on a data directory cleanly (LocalServer.stop; True if one ran).
stop = SERVER.stop


class Options(BaseModel):
    """The options of scripts/kafka-local."""

    command: CliPositionalArg[Literal["start", "stop", "status", "client-env"]] = Field(
        description="start, stop, status; client-env: export lines for a secured listener"
    )
    data_dir: Path = Field(DEFAULT_DATA_DIR, description="the broker's data, config and log")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="client port on 127.0.0.1")
    heap: str = Field("1g", min_length=1, description="JVM heap for the broker")
    sasl_ssl_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="also a SASL_SSL listener on 127.0.0.1 at this port (TLS with a CA made "
        "for the data directory; user sensorwatch, PLAIN and SCRAM); client-env prints "
        "its settings",
    )
    ssl_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="also a mutual-TLS listener on 127.0.0.1 at this port (a client "
        "certificate required, one made for the data directory); client-env --mtls prints "
        "its settings",
    )
    mtls: bool = Field(False, description="client-env: the mutual-TLS listener's settings")


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | client-env."""
    return SERVER.main(
        argv,
        Options,
        "A real single-node Apache Kafka broker (KRaft) on 127.0.0.1.",
        lambda _given, args: _command(args),
    )


def _command(args: Options) -> int:
    """start or client-env (LocalServer.main answers stop and status)."""
    if args.command == "client-env":
        info = running_broker(args.data_dir)
        if info is None:
            raise BrokerError(f"no broker runs on {args.data_dir.resolve()}")
        print_exports(mtls_client(info) if args.mtls else sasl_ssl_client(info))
        return 0
    info = start(
        args.data_dir, args.port, heap=args.heap,
        sasl_ssl_port=args.sasl_ssl_port, ssl_port=args.ssl_port,
    )  # fmt: skip
    SERVER.started(info, log=info.data_dir / "broker.log")
    if info.listener("sasl_ssl"):
        print(
            "kafka-local: client settings for it: "
            f'eval "$(scripts/kafka-local client-env --data-dir {info.data_dir})"',
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    entry_point(main)
