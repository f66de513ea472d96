"""The physics of one sensor: temperature, humidity and battery over event time."""

from __future__ import annotations

import math
import random

from producer.fleet import ROOM_KIND_BY_NAME, Sensor

NOISE_C = 0.3
# Noise and drift are bounded so that, outside scripted incidents, no reading reaches a
# threshold: every alert in the tables then traces back to an incident in the manifest.
NOISE_LIMIT_C = 3 * NOISE_C
DRIFT_STEP_C = 0.02
DAY_S = 86_400.0
_TABLE_BITS = 16


def standard_normals(rng: random.Random) -> list[float]:
    """A table of standard normal draws, clipped to +-3: noise by lookup, not by gauss().

    Drawn once from the run's seeded generator, so runs stay reproducible; random.gauss
    per value would cost most of the producer's time per message.
    """
    return [max(-3.0, min(3.0, rng.gauss(0.0, 1.0))) for _ in range(1 << _TABLE_BITS)]


class SensorModel:
    """Generates plausible readings for one sensor; all randomness comes from ``rng``."""

    __slots__ = (
        "amplitude",
        "baseline",
        "battery",
        "drain",
        "drift",
        "drift_limit",
        "humidity",
        "normals",
        "phase_s",
        "resumed_at",
        "sensor",
        "seq",
        "solar_offset_s",
    )  # fmt: skip

    def __init__(
        self, sensor: Sensor, rng: random.Random, interval_s: float, normals: list[float]
    ) -> None:
        kind = ROOM_KIND_BY_NAME[sensor.room_kind]
        self.sensor = sensor
        self.baseline = kind.baseline_c + rng.uniform(-1.0, 1.0)
        self.amplitude = kind.daily_amplitude_c
        self.humidity = kind.humidity_pct + rng.uniform(-5.0, 5.0)
        self.drift = 0.0
        self.drift_limit = 0.5 if kind.max_temp_c is not None else 1.5
        self.battery = rng.uniform(55.0, 100.0)
        self.drain = rng.uniform(0.0002, 0.002)  # percent per reading
        # Local solar time from longitude: the warmest hour follows the sun.
        self.solar_offset_s = sensor.longitude / 15.0 * 3600.0
        # Sensors of a fleet do not all measure at the same instant.
        self.phase_s = rng.uniform(0.0, interval_s)
        self.seq = 0
        self.normals = normals
        # Event time the sensor last came back from a scripted silence (-inf: never).
        self.resumed_at = float("-inf")

    def _normal(self, rng: random.Random) -> float:
        return self.normals[rng.getrandbits(_TABLE_BITS)]

    def noise(self, rng: random.Random) -> float:
        """Measurement noise in degrees C, bounded by NOISE_LIMIT_C."""
        return NOISE_C * self._normal(rng)

    def temperature(self, epoch: float, rng: random.Random) -> float:
        """Baseline + daily cycle (peak mid-afternoon) + slow drift + bounded noise."""
        day_fraction = ((epoch + self.solar_offset_s) % DAY_S) / DAY_S
        cycle = self.amplitude * math.sin(2 * math.pi * (day_fraction - 0.375))
        drift = self.drift + DRIFT_STEP_C * self._normal(rng)
        self.drift = drift = max(-self.drift_limit, min(self.drift_limit, drift))
        return self.baseline + cycle + drift + self.noise(rng)

    def humidity_for(self, temperature: float, rng: random.Random) -> float:
        """Relative humidity falls as the room warms; kept within 0..100."""
        value = self.humidity - 1.5 * (temperature - self.baseline) + self._normal(rng)
        return max(0.0, min(100.0, value))

    def next_battery(self) -> float:
        """Battery drains a little with every reading; it never goes below 1 %."""
        self.battery = max(1.0, self.battery - self.drain)
        return self.battery

    def next_seq(self) -> int:
        """The sensor's sequence number: +1 per reading."""
        self.seq += 1
        return self.seq
