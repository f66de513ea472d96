"""Devices on MQTT: the topic layout, device names and the bridge's Kafka headers
(docs/devices.md). The one definition: the bridge reads topics by it, the local broker's
ACL is made from it, and a publisher (a device, the simulator) writes topics by it.

A device is a site's gateway: one credential per site (the device's name is the site's
:func:`device_name`), one MQTT connection or a few, publishing the readings of the
site's sensors, each message one event of docs/architecture.md#the-event, to

    sensors/<device>/<sensor_id>/readings

The layout is a template (``TopicLayout``): ``{site}`` is the device's level, which the
broker's ACL binds to the user name, and ``{sensor_id}`` the sensor's, which becomes the
Kafka key. A layout without ``{site}`` makes every sensor a device of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TOPIC_LAYOUT = "sensors/{site}/{sensor_id}/readings"

SITE, SENSOR = "{site}", "{sensor_id}"

# The Kafka headers the bridge adds to each record: where it came from, and when it
# reached the bridge (ISO-8601, UTC, milliseconds: contract/times.py iso).
HEADER_MQTT_TOPIC = "mqtt_topic"
HEADER_RECEIVED_AT = "mqtt_received_at"

# A device's name: what its credential and its topic level are called. Lower case, digits
# and dashes: safe as a topic level, a user name in Mosquitto's password file, and in its
# ACL's %u (which refuses names with + # or /).
_DEVICE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


def device_name(site: str) -> str:
    """The device name of a site: ``"Port Ryan DC"`` -> ``"port-ryan-dc"``.

    Raises:
        ValueError: nothing of the site's name is left (no letter or digit).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", site.lower()).strip("-")[:64].strip("-")
    if not slug:
        raise ValueError(f"site {site!r} has no letter or digit to name its device by")
    return slug


def check_device_name(name: str) -> str:
    """``name`` if it can name a device.

    Raises:
        ValueError: it cannot (the message says what a name may hold).
    """
    if not _DEVICE_NAME.match(name):
        raise ValueError(
            f"device name {name!r}: lower-case letters, digits and dashes, 1 to 64, "
            "starting and ending with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class TopicLayout:
    """Where a reading is published: a topic template of levels, each a literal, ``+``,
    ``{site}`` or ``{sensor_id}`` (exactly once), the last one possibly ``#``."""

    template: str = DEFAULT_TOPIC_LAYOUT

    def __post_init__(self) -> None:
        levels = self.template.split("/")
        if levels.count(SENSOR) != 1:
            raise ValueError(f"topic layout {self.template!r}: needs {SENSOR} exactly once")
        if levels.count(SITE) > 1:
            raise ValueError(f"topic layout {self.template!r}: {SITE} at most once")
        if self.template.startswith("$"):
            raise ValueError(f"topic layout {self.template!r}: $ topics are the broker's")
        for i, level in enumerate(levels):
            if level == "#" and i == len(levels) - 1:
                continue
            if level in (SITE, SENSOR, "+"):
                continue
            if not level or re.search(r"[+#{}]", level):
                raise ValueError(
                    f"topic layout {self.template!r}: level {i + 1} ({level!r}) must be a "
                    f"non-empty name, +, {SITE} or {SENSOR} (# only last)"
                )

    @property
    def subscription(self) -> str:
        """The topic filter that receives every reading: the placeholders as ``+``."""
        return "/".join(
            "+" if level in (SITE, SENSOR) else level for level in self.template.split("/")
        )

    @property
    def device_level(self) -> str:
        """The placeholder that names the device: ``{site}``, else ``{sensor_id}``."""
        return SITE if SITE in self.template.split("/") else SENSOR

    @property
    def acl_pattern(self) -> str:
        """Mosquitto's ACL pattern a device may write to: its own level as ``%u``."""
        own = self.device_level
        return "/".join(
            "%u" if level == own else "+" if level in (SITE, SENSOR) else level
            for level in self.template.split("/")
        )

    @property
    def sensor_level(self) -> int:
        """The index of the topic level that names the sensor (0 the first)."""
        return self.template.split("/").index(SENSOR)

    def sensor_of(self, topic: str) -> str | None:
        """The sensor a topic names, or None where its level is missing or empty (the
        record then goes to Kafka without a key; the job judges the payload alone)."""
        index = self.sensor_level
        levels = topic.split("/")
        return (levels[index] or None) if index < len(levels) else None

    def topic(self, site: str, sensor_id: str) -> str:
        """The topic a device publishes a sensor's readings to (``site``: the device's
        name, unused where the layout has no site level).

        Raises:
            ValueError: the layout has wildcards (it then only describes what is read), or
                a value cannot be a topic level.
        """
        for value in (site, sensor_id):
            if not value or re.search(r"[/+#]", value):
                raise ValueError(f"{value!r} cannot be a topic level")
        levels = self.template.split("/")
        if "+" in levels or "#" in levels:
            raise ValueError(f"topic layout {self.template!r} has wildcards: no topic to send to")
        return "/".join(
            site if level == SITE else sensor_id if level == SENSOR else level for level in levels
        )
