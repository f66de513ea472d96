"""The physics of one sensor: temperature, humidity and battery over event time."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from producer.fleet import ROOM_KIND_BY_NAME, Sensor

NOISE_C = 0.3
# Noise and drift are bounded so that, outside scripted incidents, no reading reaches a
# threshold: every alert in the tables then traces back to an incident in the manifest.
NOISE_LIMIT_C = 3 * NOISE_C
DRIFT_STEP_C = 0.02
DAY_S = 86_400.0
_TABLE_BITS = 16

# A warming (a slow failure: a cooler giving up) climbs this many degrees C a minute. The
# floor stands clear of the normal readings: their bounded drift, a random walk per
# reading, fits slopes of up to 0.18 °C/min over 10 minutes at a 2 s interval, above
# 0.15 for at most 3 minutes on end (measured on 3,600 sensor-hours).
WARMING_SLOPE_C_PER_MIN = (0.25, 0.4)
# Climbing for this share of the warming's duration, then back to normal over the rest.
WARMING_RISE_SHARE = 0.75
# A warming stays this far below the sensor's lowest temperature threshold at its worst
# (so a fixed threshold never sees it: the rules that learn must), and is not scripted
# where that leaves it less than WARMING_MIN_PEAK_C to climb (cold storage).
WARMING_MARGIN_C = 0.5
WARMING_MIN_PEAK_C = 5.0


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

    def ceiling_c(self) -> float:
        """The warmest a normal reading of this sensor can be: its baseline with the whole
        daily amplitude, the drift at its limit and the noise at its bound."""
        return self.baseline + self.amplitude + self.drift_limit + NOISE_LIMIT_C


@dataclass(frozen=True, slots=True)
class Warming:
    """A slow failure: from ``since`` the temperature climbs ``slope_c_per_s`` above normal
    until it is ``peak_c`` above (then holds), for WARMING_RISE_SHARE of the span, and
    falls back to normal over the rest, by ``until`` (event epoch seconds)."""

    since: float
    until: float
    slope_c_per_s: float
    peak_c: float

    @property
    def falls_from(self) -> float:
        """When the climb (or the hold at the peak) ends and the fall back begins."""
        return self.since + WARMING_RISE_SHARE * (self.until - self.since)

    def offset_c(self, epoch: float) -> float:
        """Degrees C the warming adds to a normal reading at ``epoch`` (0 outside it)."""
        if not self.since <= epoch < self.until:
            return 0.0
        falls_from = self.falls_from
        if epoch <= falls_from:
            return min(self.slope_c_per_s * (epoch - self.since), self.peak_c)
        top = min(self.slope_c_per_s * (falls_from - self.since), self.peak_c)
        return top * (self.until - epoch) / (self.until - falls_from)


def plan_warming(
    model: SensorModel, since: float, duration_s: float, limit_c: float | None, rng: random.Random
) -> Warming | None:
    """A warming of ``model``'s sensor from ``since``, its slope drawn from ``rng``, its
    peak kept WARMING_MARGIN_C below ``limit_c`` (the sensor's lowest temperature
    threshold; None: none) at the warmest its normal readings get; None when that leaves
    less than WARMING_MIN_PEAK_C."""
    slope = rng.uniform(*WARMING_SLOPE_C_PER_MIN) / 60.0
    peak = slope * WARMING_RISE_SHARE * duration_s
    if limit_c is not None:
        peak = min(peak, limit_c - WARMING_MARGIN_C - model.ceiling_c())
    if peak < WARMING_MIN_PEAK_C:
        return None
    return Warming(since, since + duration_s, slope, peak)
