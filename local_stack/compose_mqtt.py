"""The compose profile ``mqtt`` (docker-compose.yml): the demo's fleet over MQTT as devices
would send it, Mosquitto -> the bridge -> Kafka, instead of the producer writing to Kafka.

    python -m local_stack.compose_mqtt init --sensors N --seed S   # the mosquitto-init service

``init`` (on every ``up``, idempotent) writes what scripts/mqtt-local writes for a local
broker, split over two volumes so that the broker never holds a password and the clients
never hold the broker's files:

    mosquitto volume (/data/mosquitto: init and the broker; a path the broker's image does
    not have, so the volume keeps the app image's owner, the user the broker runs as):
        mosquitto.conf    listeners on every address of the compose network, plain
                          (1883) and TLS (8883), logins, the ACL, persistence
                          (local_stack/mosquitto.py's render_config)
        tls/              the TLS listener's CA (ca.pem: what clients trust) and the
                          broker's certificate for mosquitto, localhost and 127.0.0.1,
                          made once (local_stack/tls.py)
        passwd            every user's password, hashed (0600)
        acl               a device publishes its own readings only; the bridge reads all
        data/             the persistence: sessions and queued QoS 1 messages
    mqtt-credentials volume (/run/mqtt: init writes, the bridge and producer read):
        sensorwatch-bridge, <device> ...   one password per file (0600, folder 0700)

The devices are the sites of the demo's fleet (the producer's ``--sensors`` and
``--seed``: the same fleet), one login each. Passwords are random (Python's ``secrets``),
made once and kept in the volume: in no compose file, image or log.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field
from pydantic_settings import CliPositionalArg

from conf.cli import read_options
from conf.settings.base import SHARED_FILE, SettingsError, load_settings
from conf.settings.mqtt_connection import TopicLayoutSettings
from contract.devices import SITE, TopicLayout, device_name
from local_stack.mosquitto import (
    BRIDGE_USER,
    DEFAULT_PORT,
    LOCALHOST,
    MosquittoError,
    ensure_credentials,
    render_acl,
    render_config,
    write_password_file,
)
from local_stack.server import LOOPBACK
from producer.fleet import build_fleet

PROG = "compose-mqtt"
BROKER_DIR = Path("/data/mosquitto")  # the mosquitto volume, in mosquitto-init and the broker
CREDENTIALS_DIR = Path("/run/mqtt")  # the mqtt-credentials volume, wherever it is mounted
LISTEN = "0.0.0.0"  # the compose network (and the port compose publishes on loopback)
PORT = DEFAULT_PORT
TLS_PORT = 8883  # MQTT over TLS's registered port
SERVICE = "mosquitto"  # the broker's name on the compose network
# The names its certificate holds: the service's, for clients on the compose network, and
# the published port's on this machine.
TLS_HOSTS = (SERVICE, LOCALHOST, LOOPBACK)


def device_names(sensors: int, seed: int, layout: TopicLayout) -> list[str]:
    """The devices of the demo's fleet, as the producer logs in (producer/mqtt_sender.py's
    routes_of): each site's gateway, or each sensor where the layout has no site level."""
    fleet = build_fleet(sensors, seed)
    if layout.device_level == SITE:
        return sorted({device_name(sensor.site) for sensor in fleet})
    return sorted(sensor.sensor_id for sensor in fleet)


def init(
    sensors: int,
    seed: int,
    layout: TopicLayout,
    broker_dir: Path = BROKER_DIR,
    credentials_dir: Path = CREDENTIALS_DIR,
) -> tuple[list[str], list[str]]:
    """Credentials (new ones only), the password file, ACL and config. Returns the
    devices, and the users that are new."""
    devices = device_names(sensors, seed, layout)
    for folder in (broker_dir, credentials_dir):
        if not folder.is_dir() or not _writable(folder):
            raise MosquittoError(f"{folder} is not a folder this user can write (a volume?)")
    new = ensure_credentials(credentials_dir, [BRIDGE_USER, *devices])
    write_password_file(credentials_dir, broker_dir / "passwd")
    (broker_dir / "acl").write_text(render_acl(layout), encoding="utf-8")
    (broker_dir / "data").mkdir(exist_ok=True)
    config = render_config(
        broker_dir, PORT, TLS_PORT, host=LISTEN, as_this_user=False, tls_hosts=TLS_HOSTS
    )
    (broker_dir / "mosquitto.conf").write_text(config, encoding="utf-8")
    return devices, new


def _writable(folder: Path) -> bool:
    probe = folder / ".written"
    try:
        probe.touch()
        probe.unlink()
    except OSError:
        return False
    return True


class ComposeMqttOptions(BaseModel):
    """The command line of ``python -m local_stack.compose_mqtt``."""

    action: CliPositionalArg[Literal["init"]] = Field(description="init")
    sensors: int = Field(ge=1, description="the producer's --sensors")
    seed: int = Field(description="the producer's --seed")


def main(argv: list[str] | None = None) -> int:
    """``init``; returns the exit status."""
    try:
        args = read_options(ComposeMqttOptions, argv, prog=PROG, description=__doc__ or "")
        layout = load_settings(TopicLayoutSettings, {}, SHARED_FILE).topic_layout
        devices, new = init(args.sensors, args.seed, layout)
    except (MosquittoError, SettingsError, ValueError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    print(
        f"{PROG}: Mosquitto's logins: the bridge's and {len(devices)} device(s), "
        f"{len(new)} new ({', '.join(devices[:6])}{' ...' if len(devices) > 6 else ''}); "
        f"its config, password file and ACL written"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
