"""A real MQTT broker on loopback, without Docker: ``scripts/mqtt-local``.

Runs Debian's Eclipse Mosquitto (scripts/setup installs it) on 127.0.0.1 only, the way
devices reach SensorWatch (docs/devices.md): every client logs in, a device (a site's
gateway) may only publish its own sensors' readings, the bridge may read them all, and
what the broker holds for a client survives a restart. One broker per data directory;
several can run side by side on different ports and data directories. It holds:

    mosquitto.conf      the config, written on each start
    passwd              every user's password, hashed (Mosquitto's PBKDF2-SHA512), 0600
    acl                 who may publish and read what, from the topic layout
    credentials/        one file per user holding its password alone (0600, folder 0700):
                        the bridge's (sensorwatch-bridge) and each device's, made once
    data/mosquitto.db   the persistence: sessions and the QoS 1 messages queued for them
    tls/                with --tls-port: a CA (ca.pem: what clients trust) and the
                        broker's certificate, made once (local_stack/tls.py)
    mosquitto.log       the broker's log
    mosquitto.json      pid and ports of the running broker

Usage::

    scripts/mqtt-local start [--data-dir DIR] [--port N] [--tls-port M]
                             [--device NAME ...] [--registry FILE]   # prints mqtt=127.0.0.1:N
    scripts/mqtt-local add-device NAME ... [--data-dir DIR]   # credentials, live
    scripts/mqtt-local client-env [--device NAME] [--tls] [--data-dir DIR]  # export lines
    scripts/mqtt-local status [--data-dir DIR]
    scripts/mqtt-local stop [--data-dir DIR]

Passwords are made with Python's ``secrets`` and go only into their 0600 files: never
onto a command line, into the config or a log. ``client-env`` prints the file's path
(``SENSORWATCH_MQTT_PASSWORD_FILE``), not the password.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import secrets
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from pydantic import BaseModel, Field, model_validator
from pydantic_settings import CliPositionalArg

from conf.paths import VAR_DIR
from conf.settings.base import SHARED_FILE, load_settings
from conf.settings.mqtt_connection import TopicLayoutSettings
from contract.devices import TopicLayout, check_device_name, device_name
from contract.registry import RegistryError, read_registry
from local_stack.server import (
    LOOPBACK,
    LocalServer,
    LocalServerError,
    RunningServer,
    entry_point,
    print_exports,
    wait_for_server,
    write_private,
)
from local_stack.tls import export_pem, make_authority, make_server_keystore

DEFAULT_DATA_DIR = VAR_DIR / "mosquitto"
DEFAULT_PORT = 1883
LOCALHOST = "localhost"
BRIDGE_USER = "sensorwatch-bridge"
# Debian's package puts the broker in /usr/sbin, which a user's PATH may not hold.
BINARIES = ("/usr/sbin/mosquitto", "mosquitto")
# Mosquitto's own default for its PBKDF2-SHA512 hashes (mosquitto_passwd). The passwords
# are 24 random bytes each: more rounds would only slow every login down.
HASH_ITERATIONS = 101
# What a persistent session (the bridge's) may have queued while it is away or does not
# acknowledge: Mosquitto's default of 1000 would drop readings after a fifth of a second
# at 5,000/s. A bound, not 0 (no limit): 0 stopped delivery in Mosquitto 2.0.16.
MAX_QUEUED_MESSAGES = 10_000_000
# Seconds between two saves of the in-memory state to data/mosquitto.db (Mosquitto's
# default: 30 minutes). A stop always saves; a crash loses what arrived since the last save.
AUTOSAVE_SECONDS = 5
# A reading is a few hundred bytes; anything far larger is refused at the broker, before
# it could exceed what Kafka takes in one message (1 MB by default).
MAX_PACKET_BYTES = 256 * 1024


class MosquittoError(LocalServerError):
    """A LocalServerError of Mosquitto (scripts/mqtt-local)."""


@dataclass(frozen=True)
class Credential:
    """A user and the file holding its password (the password itself stays there)."""

    username: str
    password_file: Path

    @property
    def password(self) -> str:
        """The password, for a client that takes it as a value (paho)."""
        return self.password_file.read_text(encoding="utf-8").strip()

    def __repr__(self) -> str:
        return f"Credential({self.username!r}, {str(self.password_file)!r})"


@dataclass(frozen=True)
class MosquittoInfo(RunningServer):
    """A running local Mosquitto: its listeners are ``mqtt`` and the TLS ``mqtts`` (when
    it was started with one)."""

    tls_port: int | None = None

    LISTENERS: ClassVar[dict[str, str]] = {"mqtt": "port", "mqtts": "tls_port"}

    @property
    def ca(self) -> Path:
        """The CA certificate (PEM) TLS clients trust."""
        return tls_folder(self.data_dir) / "ca.pem"


# Its config file names the data directory on its command line.
SERVER = LocalServer.of(
    "mqtt-local", "mosquitto", MosquittoError, lambda data_dir: str(data_dir / "mosquitto.conf"),
    MosquittoInfo, DEFAULT_DATA_DIR,
)  # fmt: skip


def find_binary() -> str:
    """The Mosquitto executable (MosquittoError: none is installed)."""
    return SERVER.find_binary(BINARIES, "mosquitto")


def installed() -> bool:
    """True when Mosquitto can be started here."""
    try:
        find_binary()
    except MosquittoError:
        return False
    return True


# --- credentials ---------------------------------------------------------------------


def _credentials_dir(data_dir: Path) -> Path:
    return data_dir / "credentials"


def credential(data_dir: Path, username: str) -> Credential:
    """The credential of ``username`` on the broker of ``data_dir``.

    Raises:
        MosquittoError: no such user there.
    """
    made = Credential(username, _credentials_dir(data_dir.resolve()) / username)
    if not made.password_file.is_file():
        raise MosquittoError(
            f"no user {username!r} on {data_dir.resolve()}: "
            f"scripts/mqtt-local add-device {username}"
        )
    return made


def devices(data_dir: Path) -> list[str]:
    """The names of the devices that have a credential on ``data_dir``, sorted."""
    folder = _credentials_dir(data_dir.resolve())
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name != BRIDGE_USER)


def password_hash(password: str, salt: bytes | None = None) -> str:
    """``password`` as Mosquitto's password file holds it: ``$7$`` (PBKDF2-SHA512),
    the rounds, the salt and the hash in base64, as ``mosquitto_passwd`` writes it."""
    salt = salt if salt is not None else secrets.token_bytes(12)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, HASH_ITERATIONS)
    encode = base64.b64encode
    return f"$7${HASH_ITERATIONS}${encode(salt).decode()}${encode(digest).decode()}"


def write_password_file(credentials: Path, passwd: Path) -> None:
    """``passwd`` from the folder ``credentials``: every user with a fresh salt (0600)."""
    lines = [
        f"{path.name}:{password_hash(path.read_text(encoding='utf-8').strip())}\n"
        for path in sorted(credentials.iterdir())
    ]
    write_private(passwd, "".join(lines))


def ensure_credentials(credentials: Path, names: Iterable[str]) -> list[str]:
    """A password file (0600, in the folder ``credentials``, 0700) for each of ``names``
    that has none yet. Returns the names that are new."""
    credentials.mkdir(parents=True, exist_ok=True)
    credentials.chmod(0o700)
    new = []
    for name in names:
        path = credentials / name
        if not path.exists():
            write_private(path, secrets.token_urlsafe(24))
            new.append(name)
    return new


def _ensure_users(data_dir: Path, names: Iterable[str]) -> list[str]:
    """Credentials for ``names`` (the bridge's always) where there are none yet; the
    password file rewritten. Returns the names that are new."""
    folder = _credentials_dir(data_dir)
    new = ensure_credentials(folder, (BRIDGE_USER, *names))
    write_password_file(folder, data_dir / "passwd")
    return new


def _device_names(names: Iterable[str]) -> list[str]:
    checked = []
    for name in names:
        try:
            check_device_name(name)
        except ValueError as exc:
            raise MosquittoError(str(exc)) from None
        if name == BRIDGE_USER:
            raise MosquittoError(f"{BRIDGE_USER!r} is the bridge's user, not a device's")
        checked.append(name)
    return checked


def sites_of(registry: Path) -> list[str]:
    """The device names of the sites in a registry file (one device per site).

    Raises:
        MosquittoError: the registry cannot be read.
    """
    try:
        entries = read_registry(registry)
    except RegistryError as exc:
        raise MosquittoError(str(exc)) from None
    return sorted({device_name(e.site) for e in entries.values() if e.site})


def add_devices(data_dir: Path, names: Iterable[str], timeout: float = 30.0) -> list[Credential]:
    """Credentials for devices ``names`` (kept where they exist). A running broker reloads
    its password file (SIGHUP) and this returns once each new device can log in.

    Raises:
        MosquittoError: a name cannot name a device, or the broker did not take them.
    """
    data_dir = data_dir.resolve()
    wanted = _device_names(names)
    new = _ensure_users(data_dir, wanted)
    info = running(data_dir)
    if info is not None and new:
        os.kill(info.pid, signal.SIGHUP)
        for name in new:
            made = credential(data_dir, name)
            wait_for_server(
                f"Mosquitto at {info.listener('mqtt')} (login of {name} after a reload)",
                lambda made=made: _login(info.port, made) is True,
                timeout, 0.1, None, MosquittoError,
            )  # fmt: skip
    return [credential(data_dir, name) for name in wanted]


# --- config --------------------------------------------------------------------------


def tls_folder(data_dir: Path) -> Path:
    """Where the TLS listener's CA and certificate are."""
    return data_dir / "tls"


def _tls_material(data_dir: Path, hosts: tuple[str, ...]) -> tuple[Path, Path, Path]:
    """The CA (PEM), the broker's certificate for ``hosts`` and its key (PEM): made on
    first use, kept after."""
    folder = tls_folder(data_dir)
    cert, key, ca = folder / "broker.pem", folder / "broker.key", folder / "ca.pem"
    if not (cert.exists() and key.exists() and ca.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)
        authority = make_authority(folder, "SensorWatch local MQTT broker CA")
        keystore, password = make_server_keystore(folder, authority, hosts)
        export_pem(keystore, password, folder, "broker")
    return ca, cert, key


def render_acl(layout: TopicLayout) -> str:
    """The ACL: a device publishes under its own level only; the bridge reads all."""
    return (
        f"# Made by local_stack/mosquitto.py on each start from the topic layout\n"
        f"# {layout.template}; edits are lost.\n"
        "# Every device may publish its own readings, nothing else: its user name fills\n"
        f"# the {layout.device_level} level. No other topic, no subscription.\n"
        f"pattern write {layout.acl_pattern}\n"
        "\n"
        "# The bridge reads every device's readings.\n"
        f"user {BRIDGE_USER}\n"
        f"topic read {layout.subscription}\n"
    )


def _user_line() -> list[str]:
    """Started as root, Mosquitto switches to the user "mosquitto", which cannot read the
    data dir: it stays this user instead. As any other user the line changes nothing (and
    a user without a name, as in some containers, gets none)."""
    try:
        return [f"user {getpass.getuser()}"]
    except (KeyError, OSError):
        return []


def render_config(
    data_dir: Path,
    port: int,
    tls_port: int | None = None,
    *,
    host: str = LOOPBACK,
    as_this_user: bool = True,
    tls_hosts: tuple[str, ...] = (LOCALHOST, LOOPBACK),
) -> str:
    """mosquitto.conf for ``data_dir``: listeners on ``host`` (loopback), logins, the ACL,
    persistence, and queues long enough that a bridge's absence loses nothing.
    ``as_this_user``: a broker started as root stays this user (see _user_line); a
    container's broker, which never starts as root, needs no such line. With
    ``tls_port``, a TLS listener whose certificate names ``tls_hosts`` (the names
    clients reach the broker by)."""
    lines = [
        "# Made by local_stack/mosquitto.py on each start; edits are lost.",
        *(_user_line() if as_this_user else []),
        "per_listener_settings false",
        "allow_anonymous false",
        f"password_file {data_dir / 'passwd'}",
        f"acl_file {data_dir / 'acl'}",
        "persistence true",
        f"persistence_location {data_dir / 'data'}/",
        f"autosave_interval {AUTOSAVE_SECONDS}",
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",
        # Unacknowledged QoS 1 messages in flight per client where the client does not
        # say (MQTT 3.1.1; an MQTT 5 client's Receive Maximum wins): Mosquitto's 20 holds
        # a bridge to a few thousand a second.
        "max_inflight_messages 1000",
        # A 3.1.1 client's persistent session (MQTT 5 clients give their own expiry).
        "persistent_client_expiration 14d",
        # A device's QoS 0 readings still reach the bridge at QoS 1: queued while it is away.
        "upgrade_outgoing_qos true",
        f"max_packet_size {MAX_PACKET_BYTES}",
        "set_tcp_nodelay true",
        "log_dest stderr",
        "log_timestamp_format %Y-%m-%dT%H:%M:%S",
        "",
        f"listener {port} {host}",
    ]
    if tls_port is not None:
        ca, cert, key = _tls_material(data_dir, tls_hosts)
        lines += [
            "",
            f"listener {tls_port} {host}",
            f"certfile {cert}",
            f"keyfile {key}",
            f"cafile {ca}",
        ]
    return "\n".join(lines) + "\n"


# --- the process ---------------------------------------------------------------------


def _config_file(data_dir: Path) -> Path:
    return data_dir / "mosquitto.conf"


# The broker running on a data directory, or None (LocalServer.running).
running = SERVER.running


def _login(port: int, user: Credential, ca: Path | None = None, timeout: float = 5.0) -> bool | str:
    """True when ``user`` logs in at ``port`` (with TLS against ``ca``); False when
    nothing answers yet; else the broker's refusal (a reason code's name)."""
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"sensorwatch-probe-{uuid.uuid4().hex[:8]}",
        protocol=mqtt.MQTTv5,
    )  # fmt: skip
    client.username_pw_set(user.username, user.password)
    if ca is not None:
        client.tls_set(ca_certs=str(ca))
    answer: list[object] = []
    client.on_connect = lambda _c, _u, _f, reason, _p: answer.append(reason)
    try:
        client.connect(LOOPBACK, port, keepalive=10)
        deadline = time.monotonic() + timeout
        while not answer and time.monotonic() < deadline:
            client.loop(0.1)
    except OSError:
        return False
    finally:
        client.disconnect()
        client.loop(0.05)  # sends the DISCONNECT and closes the socket
    if not answer:
        return False
    reason = answer[0]
    return True if not getattr(reason, "is_failure", True) else str(reason)


def wait_until_ready(
    info: MosquittoInfo, timeout: float = 30.0, alive: Callable[[], bool] | None = None
) -> None:
    """Block until the bridge's user logs in on every listener of the broker.

    Raises:
        MosquittoError: the timeout passed first, the broker died, or it refused the login.
    """
    bridge = credential(info.data_dir, BRIDGE_USER)
    listeners = [(info.port, None)]
    if info.tls_port is not None:
        listeners.append((info.tls_port, info.ca))

    for port, ca in listeners:

        def answers(port: int = port, ca: Path | None = ca) -> bool:
            result = _login(port, bridge, ca)
            if isinstance(result, str):
                raise MosquittoError(f"Mosquitto at {LOOPBACK}:{port} refused a login: {result}")
            return result

        wait_for_server(
            f"Mosquitto at {LOOPBACK}:{port}", answers, timeout, 0.1, alive, MosquittoError
        )


def start(
    data_dir: Path = DEFAULT_DATA_DIR,
    port: int = DEFAULT_PORT,
    *,
    tls_port: int | None = None,
    device_names: Iterable[str] = (),
    layout: TopicLayout | None = None,
    timeout: float = 30.0,
) -> MosquittoInfo:
    """Start a broker on ``data_dir`` and return once the bridge's user can log in
    (idempotent: a running one on the same ports is kept, given devices added to it).
    ``layout`` (default: contract/devices.py's) is what the ACL is made from.

    Raises:
        MosquittoError: no binary, a port is taken, it already runs on other ports, a
            device name is bad, or it did not come up (with the tail of its log).
    """
    data_dir = data_dir.resolve()
    names = _device_names(device_names)
    layout = layout or TopicLayout()
    current = running(data_dir)
    if current is not None:
        SERVER.check_same(
            data_dir, "a broker", {"--port": current.port, "--tls-port": current.tls_port},
            {"--port": port, "--tls-port": tls_port},
        )  # fmt: skip
        wait_until_ready(current, timeout)
        add_devices(data_dir, names, timeout)
        return current
    binary = find_binary()
    for wanted, flag in ((port, "--port"), (tls_port, "--tls-port")):
        hint = (
            " (the Debian package's system service? sudo systemctl disable --now mosquitto)"
            if wanted == DEFAULT_PORT
            else ""
        )
        SERVER.check_free(wanted, flag, hint)
    (data_dir / "data").mkdir(parents=True, exist_ok=True)
    _ensure_users(data_dir, names)
    (data_dir / "acl").write_text(render_acl(layout), encoding="utf-8")
    config = _config_file(data_dir)
    config.write_text(render_config(data_dir, port, tls_port), encoding="utf-8")
    info = MosquittoInfo(0, port, data_dir, tls_port)
    proc = SERVER.launch(
        [binary, "-c", str(config)], data_dir=data_dir,
        state={"port": port, "tls_port": tls_port},
        wait=lambda alive: wait_until_ready(info, timeout, alive),
    )  # fmt: skip
    return MosquittoInfo(proc.pid, port, data_dir, tls_port)


# Stop the broker on a data directory cleanly (LocalServer.stop: SIGTERM, on which it
# saves its sessions and queued messages to data/ first). True if one was running.
stop = SERVER.stop


def client_env(info: MosquittoInfo, username: str = BRIDGE_USER, tls: bool = False) -> dict:
    """The SENSORWATCH_MQTT_* settings that connect ``username`` (the bridge, or a device)
    to the broker: its password as a file, never its value."""
    if tls and info.tls_port is None:
        raise MosquittoError(f"the broker on {info.data_dir} has no TLS listener")
    user = credential(info.data_dir, username)
    env = {
        "SENSORWATCH_MQTT_HOST": LOOPBACK,
        "SENSORWATCH_MQTT_PORT": str(info.tls_port if tls else info.port),
        "SENSORWATCH_MQTT_USERNAME": user.username,
        "SENSORWATCH_MQTT_PASSWORD_FILE": str(user.password_file),
    }
    if tls:
        env["SENSORWATCH_MQTT_TLS"] = "true"
        env["SENSORWATCH_MQTT_CA_LOCATION"] = str(info.ca)
    return env


class Options(BaseModel):
    """The options of scripts/mqtt-local."""

    command: CliPositionalArg[Literal["start", "stop", "status", "add-device", "client-env"]] = (
        Field(description="start, stop, status, add-device NAME..., client-env")
    )
    names: CliPositionalArg[list[str]] = Field(
        default_factory=list, description="add-device: device names"
    )
    data_dir: Path = Field(
        DEFAULT_DATA_DIR, description="its config, credentials, persistence and log"
    )
    port: int = Field(DEFAULT_PORT, ge=1, le=65535, description="MQTT port on 127.0.0.1")
    tls_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="also a TLS listener on 127.0.0.1 at this port (a CA made for the data "
        "directory: tls/ca.pem); client-env --tls prints its settings",
    )
    device: list[str] = Field(
        default_factory=list,
        description="start: a device credential to have (repeatable; made once, kept); "
        "client-env: that device's settings instead of the bridge's",
    )
    registry: Path | None = Field(
        None,
        description="start: a device credential for each site of this device registry (JSON lines)",
    )
    tls: bool = Field(False, description="client-env: the TLS listener's settings")

    @model_validator(mode="after")
    def _names_for_add_device_only(self) -> Options:
        if self.names and self.command != "add-device":
            raise ValueError(f"{self.command} takes no names")
        return self


# Flags whose name differs from --<setting>.
FLAGS = {"mqtt_topic_layout": "--topic-layout"}


def main(argv: list[str] | None = None) -> int:
    """Command line: start | stop | status | add-device | client-env."""
    return SERVER.main(
        argv, Options,
        description="A real MQTT broker (Debian's Eclipse Mosquitto) on 127.0.0.1: logins "
        "per device, an ACL per topic, persistence (docs/devices.md).",
        command=_command, settings=TopicLayoutSettings, flags=FLAGS,
    )  # fmt: skip


def _command(given: dict[str, object], args: Options) -> int:
    """start, add-device or client-env (LocalServer.main answers stop and status)."""
    if args.command == "add-device":
        if not args.names:
            raise MosquittoError("add-device needs at least one NAME")
        for made in add_devices(args.data_dir, args.names):
            print(f"{made.username}: password in {made.password_file}")
        return 0
    if args.command == "client-env":
        info = running(args.data_dir)
        if info is None:
            raise MosquittoError(f"no broker runs on {args.data_dir.resolve()}")
        user = args.device[-1] if args.device else BRIDGE_USER
        print_exports(client_env(info, user, args.tls))
        return 0
    layout = load_settings(TopicLayoutSettings, given, SHARED_FILE, flags=FLAGS).topic_layout
    names = [*args.device, *(sites_of(args.registry) if args.registry else [])]
    info = start(
        args.data_dir, args.port, tls_port=args.tls_port, device_names=names, layout=layout
    )
    known = devices(info.data_dir)
    SERVER.started(
        info,
        f"{len(known)} device(s){': ' + ', '.join(known[:8]) if known else ''}"
        f"{' ...' if len(known) > 8 else ''}",
    )
    print(
        "mqtt-local: the bridge's settings: "
        f'eval "$(scripts/mqtt-local client-env --data-dir {info.data_dir})"',
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    entry_point(main)
