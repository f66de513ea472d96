"""The sensor fleet: built once with Faker from a seed, written as the device registry."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, replace
from datetime import date
from pathlib import Path

from faker import Faker


@dataclass(frozen=True)
class RoomKind:
    """A kind of room: its usual temperature and humidity, and its own alert threshold."""

    name: str
    baseline_c: float
    daily_amplitude_c: float
    humidity_pct: float
    max_temp_c: float | None  # None: the default critical threshold applies
    weight: int  # how common the kind is in a fleet


ROOM_KINDS = (
    RoomKind("office", 21.5, 2.5, 40.0, None, 50),
    RoomKind("warehouse", 16.0, 4.0, 50.0, None, 20),
    RoomKind("lab", 22.0, 1.5, 35.0, None, 10),
    # Server rooms run cool and must alert early.
    RoomKind("server_room", 19.0, 1.0, 30.0, 32.0, 12),
    # Cold storage must never warm up: a low threshold of its own.
    RoomKind("cold_storage", 4.0, 0.5, 70.0, 10.0, 8),
    # Freezers: a normal far below the fleet's and no threshold of their own, so the
    # fleet's fixed thresholds (45 °C) could never see one fail; only the rules that
    # learn each sensor's normal can. Never drawn by weight: build_fleet places them.
    RoomKind("freezer", -20.0, 0.3, 50.0, None, 0),
)
ROOM_KIND_BY_NAME = {k.name: k for k in ROOM_KINDS}

DEVICE_MODELS = ("TempSense T100", "TempSense T200", "ThermoNode TN-3", "ClimaTrack CX")
# One sensor in this many is a freezer (a fleet of fewer has none).
FREEZER_EVERY = 25
# Fixed dates keep the fleet independent of the day it is built on.
INSTALLED_FROM, INSTALLED_TO = date(2019, 1, 1), date(2025, 12, 31)


@dataclass(frozen=True)
class Sensor:
    """One registered sensor (a line of the device registry)."""

    sensor_id: str
    site: str
    building: str
    floor: int
    room: str
    room_kind: str
    device_model: str
    firmware: str
    install_date: str
    latitude: float
    longitude: float
    max_temp_c: float | None


def sensor_id(index: int) -> str:
    """The id of the index-th sensor (0-based): ``sensor-0001`` ..."""
    return f"sensor-{index + 1:04d}"


def build_fleet(count: int, seed: int) -> list[Sensor]:
    """``count`` sensors over a few sites, the same for the same ``seed``; one in
    :data:`FREEZER_EVERY` of them a freezer (:func:`with_freezers`)."""
    fake = Faker()
    fake.seed_instance(seed)
    rng = random.Random(seed)
    site_count = max(1, min(12, count // 40 + 1))
    sites = []
    for _ in range(site_count):
        lat, lon = float(fake.latitude()), float(fake.longitude())
        sites.append(
            (f"{fake.city()} {fake.random_element(('DC', 'Plant', 'Campus', 'Hub'))}", lat, lon)
        )
    kinds = [k for k in ROOM_KINDS for _ in range(k.weight)]
    fleet = []
    for i in range(count):
        site, lat, lon = sites[i % site_count]
        kind = rng.choice(kinds)
        floor = rng.randint(0, 5)
        fleet.append(
            Sensor(
                sensor_id=sensor_id(i),
                site=site,
                building=f"Building {rng.choice('ABCDEF')}",
                floor=floor,
                room=f"{kind.name.replace('_', ' ')} {floor}{rng.randint(1, 40):02d}",
                room_kind=kind.name,
                device_model=rng.choice(DEVICE_MODELS),
                firmware=f"{rng.randint(1, 3)}.{rng.randint(0, 9)}.{rng.randint(0, 20)}",
                install_date=fake.date_between_dates(INSTALLED_FROM, INSTALLED_TO).isoformat(),
                latitude=round(lat + rng.uniform(-0.002, 0.002), 6),
                longitude=round(lon + rng.uniform(-0.002, 0.002), 6),
                max_temp_c=kind.max_temp_c,
            )
        )
    return with_freezers(fleet, seed)


def with_freezers(fleet: list[Sensor], seed: int) -> list[Sensor]:
    """``fleet`` with ``len(fleet) // FREEZER_EVERY`` of its sensors, picked from ``seed``,
    moved into freezers (same floor and room number, no threshold of their own).

    Picked with a generator of their own, after the fleet is drawn: the other sensors,
    and every draw of the fleet's own generator, stay what they were without freezers.
    """
    freezer = ROOM_KIND_BY_NAME["freezer"]
    picked = random.Random(f"freezers:{seed}").sample(
        range(len(fleet)), len(fleet) // FREEZER_EVERY
    )
    moved = list(fleet)
    for i in picked:
        sensor = fleet[i]
        number = sensor.room.rsplit(" ", 1)[1]
        moved[i] = replace(
            sensor,
            room=f"{freezer.name} {number}",
            room_kind=freezer.name,
            max_temp_c=freezer.max_temp_c,
        )
    return moved


def write_registry(fleet: list[Sensor], path: Path) -> None:
    """Write the fleet as JSON lines, one sensor per line (the job's device registry)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for sensor in fleet:
            out.write(json.dumps(asdict(sensor)) + "\n")
