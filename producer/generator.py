"""The message sequence: readings on a schedule, scripted incidents, injected faults.

Pure and deterministic: the same settings and seed give the same messages in the same
order (with a simulated clock). No Kafka here; :mod:`producer.sender` delivers them.

Each sensor reads every ``interval`` event-seconds at its own phase. Per reading, one draw
decides its fate: late (event time pushed back), out of order (held back and released a
few messages later), malformed, or normal. Normal readings may also be re-sent later with
the same event_id (duplicates). Incident readings are never altered: every alert the job
raises can be traced to one incident in the manifest. Incidents come at random, at their
rates per sensor per hour, plus optionally one scripted spike at a fixed event time
(``first_spike_after``), so a demo shows an alert at once.

Warmings (slow failures) are drawn apart, from a generator of their own, and only add to
the temperature of readings that are otherwise normal: every other draw, hence every
other message, is what it would be without them. A warming's readings keep their fate
(late, out of order, malformed, duplicated like any reading: a slow failure does not
stop the network's faults); the manifest marks each with ``incident`` = ``warming``.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from conf.settings.producer import ProducerSettings
from contract.rules.limits import breach_level, temperature_limits
from contract.rules.model import ReadingRule, RuleSet, WindowRule
from producer.fleet import Sensor
from producer.malform import malform
from producer.physics import SensorModel, Warming, plan_warming, standard_normals
from producer.reading import IsoClock, Reading, as_dict, encode

KINDS = ("normal", "late", "out_of_order", "duplicate", "malformed", "incident")


@dataclass(slots=True)
class Message:
    """One Kafka message to send, with what the manifest records about it."""

    key: str
    value: str | bytes  # bytes: a recorded line that is not UTF-8 (producer/replay.py)
    kind: str
    event_id: str | None
    event_time: str | None
    temperature_c: float | None
    detail: dict[str, object] | None = None  # incident, malformation, late_by_s ...
    humidity_pct: float | None = None
    battery_pct: float | None = None


@dataclass(slots=True)
class _Incident:
    """A sensor's scripted incident in progress."""

    name: str  # "sustained", "silence", "battery" or "humidity"
    remaining: int  # readings still affected
    level_c: float = 0.0
    silent_since: str = ""


def lowest_temperature_limit(rules: RuleSet, sensor: Sensor) -> float | None:
    """The lowest threshold any upward temperature rule of ``rules`` holds ``sensor`` to:
    a reading rule, or a window rule on the average, minimum or maximum (None: no rule).
    A warming stays below it at every reading, so no such rule can see it."""
    registry = None if sensor.max_temp_c is None else {"max_temp_c": sensor.max_temp_c}
    found = [
        rule.threshold_for(sensor.sensor_id, sensor.site, sensor.device_model, registry)[0]
        for rule in rules.rules
        if isinstance(rule, ReadingRule | WindowRule)
        and rule.field == "temperature_c"
        and rule.op in (">", ">=")
        and (isinstance(rule, ReadingRule) or rule.aggregate in ("avg", "min", "max"))
        and rule.scope.covers(sensor.sensor_id, sensor.site, sensor.device_model)
    ]
    return min(found, default=None)


class MessageGenerator:
    """Yields the messages of a run; see the module docstring."""

    def __init__(
        self,
        settings: ProducerSettings,
        fleet: list[Sensor],
        seed: int,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        """``wall_clock`` given: event time is that clock (real time); else simulated."""
        self.s = settings
        self.rng = random.Random(seed)
        normals = standard_normals(self.rng)
        models = [SensorModel(sensor, self.rng, settings.interval, normals) for sensor in fleet]
        # In phase order, a tick's readings leave in event-time order: the undisturbed
        # stream is monotonic, and out-of-order and late messages are exactly the injected.
        self.models = sorted(models, key=lambda m: m.phase_s)
        # The rules file's temperature thresholds of each sensor: incidents go over them.
        self.levels = {
            s.sensor_id: temperature_limits(
                settings.alert_rules, s.sensor_id, s.site, s.device_model,
                None if s.max_temp_c is None else {"max_temp_c": s.max_temp_c},
            )
            for s in fleet
        }  # fmt: skip
        # The battery and humidity levels the rules file's rules on them alert past.
        self.battery_low = {
            s.sensor_id: breach_level(
                settings.alert_rules, "battery_pct", False, s.sensor_id, s.site, s.device_model
            )
            for s in fleet
        }
        self.humid = {
            s.sensor_id: breach_level(
                settings.alert_rules, "humidity_pct", True, s.sensor_id, s.site, s.device_model
            )
            for s in fleet
        }
        # Warmings: a generator of their own (not a draw of self.rng: see the module's
        # docstring), and the ceiling each sensor's must stay under.
        self.warming_rng = random.Random(f"warming:{seed}")
        self.warming_limit = {
            s.sensor_id: lowest_temperature_limit(settings.alert_rules, s) for s in fleet
        }
        self.warmings: dict[int, Warming] = {}
        self.iso = IsoClock()
        self.wall_clock = wall_clock
        start = settings.start_time.timestamp() if settings.start_time else 0.0
        self.start = start
        hourly = settings.interval / 3600.0  # rates are per sensor per event hour
        self.p_spike = settings.spike_rate * hourly
        self.p_sustained = settings.sustained_rate * hourly
        self.p_silence = settings.silence_rate * hourly
        self.p_battery = settings.battery_rate * hourly
        self.p_humidity = settings.humidity_rate * hourly
        self.p_warming = settings.warming_rate * hourly
        self.sustained_readings = max(1, math.ceil(settings.sustained_duration / settings.interval))
        self.silence_readings = max(1, math.ceil(settings.silence_duration / settings.interval))
        self.battery_readings = max(1, math.ceil(settings.battery_duration / settings.interval))
        self.humidity_readings = max(1, math.ceil(settings.humidity_duration / settings.interval))
        # The scripted first spike (--first-spike-after): its event time, set when the
        # first tick starts (the real clock's start is only known then); None once sent.
        self.first_spike_at: float | None = None
        self.incidents: dict[int, _Incident] = {}
        # Held-back messages (out-of-order, duplicates): (release_at, tiebreak, message).
        self.held: list[tuple[int, int, Message]] = []
        self.emitted = 0
        self.limit: int | None = None  # --count: drain() never sends past it
        # Undisturbed (normal or incident) messages emitted: held messages wait for these,
        # so an out-of-order reading always arrives after a newer one.
        self.fresh = 0
        self._tiebreak = 0

    # -- per reading -------------------------------------------------------------------

    def _critical(self, model: SensorModel) -> float | None:
        return self.levels[model.sensor.sensor_id].critical_c

    def _event_id(self) -> str:
        """A random (version 4) UUID from the seeded generator, so runs repeat exactly."""
        h = f"{self.rng.getrandbits(128):032x}"
        variant = "89ab"[int(h[16], 16) & 3]
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:]}"

    def _reading(
        self,
        model: SensorModel,
        epoch: float,
        temperature: float,
        humidity: float | None = None,
        battery: float | None = None,
    ) -> Reading:
        """A reading; ``humidity`` and ``battery`` given: an incident's, not the model's."""
        event_id = self._event_id()  # first: the seeded draws keep their order
        if humidity is None:
            humidity = model.humidity_for(temperature, self.rng)
        return Reading(
            event_id=event_id,
            sensor_id=model.sensor.sensor_id,
            event_time=epoch,
            temperature_c=temperature,
            humidity_pct=model.humidity_for(temperature, self.rng)
            if humidity is None
            else humidity,
            battery_pct=model.next_battery() if battery is None else battery,
            seq=model.next_seq(),
        )

    def _message(self, r: Reading, kind: str, detail: dict[str, object] | None = None) -> Message:
        event_time = self.iso.format(r.event_time)
        return Message(
            key=r.sensor_id,
            value=encode(r, event_time),
            kind=kind,
            event_id=r.event_id,
            event_time=event_time,
            temperature_c=round(r.temperature_c, 2),
            detail=detail,
            humidity_pct=round(r.humidity_pct, 1),
            battery_pct=round(r.battery_pct, 1),
        )

    def _incident_reading(self, index: int, model: SensorModel, epoch: float) -> Message | None:
        """The reading of a sensor in (or entering) an incident, or None when silent."""
        rng = self.rng
        ongoing = self.incidents.get(index)
        critical, warning = self._critical(model), self.levels[model.sensor.sensor_id].warning_c
        first_spike = self.first_spike_at is not None and epoch >= self.first_spike_at
        if ongoing is None and first_spike and critical is not None:
            self.first_spike_at = None  # the first sensor to read after it, once
            level = critical + rng.uniform(3.0, 12.0)
            return self._message(
                self._reading(model, epoch, level), "incident", {"incident": "spike"}
            )
        if ongoing is None:
            draw = rng.random()
            # Sustained overheating only where it cannot also cross the critical threshold.
            can_sustain = warning is not None and (critical is None or critical - warning >= 8.0)
            if draw < self.p_spike and critical is not None:
                level = critical + rng.uniform(3.0, 12.0)
                return self._message(
                    self._reading(model, epoch, level), "incident", {"incident": "spike"}
                )
            if self.p_spike <= draw < self.p_spike + self.p_sustained and can_sustain:
                assert warning is not None
                level = warning + rng.uniform(3.0, 6.0)
                ongoing = _Incident("sustained", self.sustained_readings, level_c=level)
                self.incidents[index] = ongoing
            elif draw < self.p_spike + self.p_sustained + self.p_silence:
                since = self.iso.format(epoch - self.s.interval)
                self.incidents[index] = _Incident(
                    "silence", self.silence_readings, silent_since=since
                )
                return None
            else:
                ongoing = self._battery_or_humidity(draw, model)
                if ongoing is None:
                    return None  # a normal reading
                self.incidents[index] = ongoing
        ongoing.remaining -= 1
        if ongoing.remaining <= 0:
            del self.incidents[index]
        if ongoing.name == "silence":
            if ongoing.remaining > 0:
                return None
            # First reading after the silence: the end of this incident.
            model.resumed_at = epoch
            temperature = model.temperature(epoch, rng)
            return self._message(
                self._reading(model, epoch, temperature),
                "incident",
                {"incident": "silence_end", "silent_since": ongoing.silent_since},
            )
        if ongoing.name == "battery":
            if ongoing.remaining <= 0:
                model.battery = 100.0  # replaced: the next readings are normal again
            level = max(1.0, ongoing.level_c - 0.1 * abs(model.noise(rng)))
            temperature = model.temperature(epoch, rng)
            reading = self._reading(model, epoch, temperature, battery=level)
            return self._message(reading, "incident", {"incident": "battery"})
        if ongoing.name == "humidity":
            temperature = model.temperature(epoch, rng)
            level = min(100.0, ongoing.level_c + model.noise(rng))
            reading = self._reading(model, epoch, temperature, humidity=level)
            return self._message(reading, "incident", {"incident": "humidity"})
        noise = model.noise(rng)
        return self._message(
            self._reading(model, epoch, ongoing.level_c + noise),
            "incident",
            {"incident": "sustained"},
        )

    def _battery_or_humidity(self, draw: float, model: SensorModel) -> _Incident | None:
        """A failing battery or a humid stretch starting, where ``draw`` falls past the
        other incidents' odds into theirs (and a rule covers the sensor); else None."""
        sensor_id = model.sensor.sensor_id
        past = self.p_spike + self.p_sustained + self.p_silence
        low, humid = self.battery_low[sensor_id], self.humid[sensor_id]
        if draw < past + self.p_battery:
            if low is None:
                return None
            level = max(1.0, low - self.rng.uniform(2.0, 8.0))
            return _Incident("battery", self.battery_readings, level_c=level)
        if draw < past + self.p_battery + self.p_humidity:
            if humid is None:
                return None
            level = min(99.0, humid + self.rng.uniform(4.0, 8.0))
            return _Incident("humidity", self.humidity_readings, level_c=level)
        return None

    def _warming(self, index: int, model: SensorModel, epoch: float) -> Warming | None:
        """The warming of the sensor at ``epoch``: the ongoing one, or one starting now
        (at its rate, drawn from ``warming_rng`` only), or None."""
        ongoing = self.warmings.get(index)
        if ongoing is not None and epoch < ongoing.until:
            return ongoing
        self.warmings.pop(index, None)
        if self.p_warming <= 0 or self.warming_rng.random() >= self.p_warming:
            return None
        limit = self.warming_limit[model.sensor.sensor_id]
        started = plan_warming(model, epoch, self.s.warming_duration, limit, self.warming_rng)
        if started is not None:
            self.warmings[index] = started
        return started

    def _warming_detail(self, warming: Warming, offset: float) -> dict[str, object]:
        return {
            "incident": "warming",
            "warming_since": self.iso.format(warming.since),
            "warming_until": self.iso.format(warming.until),
            "warming_c": round(offset, 2),
        }

    def _hold(self, message: Message) -> None:
        delay = self.rng.randint(1, self.s.out_of_order_window)
        self._tiebreak += 1
        heapq.heappush(self.held, (self.fresh + delay, self._tiebreak, message))

    def _readings_of_tick(self, tick: int) -> Iterator[Message]:
        s, rng = self.s, self.rng
        f_late = s.late_fraction
        f_ooo = f_late + s.out_of_order_fraction
        f_bad = f_ooo + s.malformed_fraction
        # Only normal readings are re-sent; scale so duplicates are a fraction of all readings.
        p_duplicate = min(1.0, s.duplicate_fraction / (1.0 - f_bad)) if f_bad < 1.0 else 0.0
        for index, model in enumerate(self.models):
            if self.wall_clock is not None:
                epoch = self.wall_clock()
            else:
                epoch = self.start + tick * s.interval + model.phase_s
            in_incident = index in self.incidents
            incident = self._incident_reading(index, model, epoch)
            if incident is not None:
                yield incident
                continue
            if in_incident or index in self.incidents:
                continue  # silent
            reading = self._reading(model, epoch, model.temperature(epoch, rng))
            warming = self._warming(index, model, epoch)
            # Added after _reading: humidity follows the room's own temperature, so that
            # no humidity rule sees the warming either.
            warmed: dict[str, object] = {}
            if warming is not None:
                offset = warming.offset_c(epoch)
                reading.temperature_c += offset
                warmed = self._warming_detail(warming, offset)
            fate = rng.random()
            late_by = rng.uniform(*s.late_delay) if fate < f_late else 0.0
            if fate < f_late and reading.event_time - late_by > model.resumed_at:
                # (A late reading is never stamped inside its sensor's scripted silence:
                # that would blur the incident. Such a reading is sent normally instead.)
                reading.event_time -= late_by
                yield self._message(reading, "late", {"late_by_s": round(late_by, 3), **warmed})
            elif f_late <= fate < f_ooo:
                self._hold(self._message(reading, "out_of_order", warmed or None))
            elif f_ooo <= fate < f_bad:
                payload, label = malform(as_dict(reading, self.iso), rng)
                message = self._message(reading, "malformed", {"malformation": label, **warmed})
                message.value = payload
                yield message
            else:
                kind = "incident" if warmed else "normal"
                message = self._message(reading, kind, warmed or None)
                yield message
                if rng.random() < p_duplicate:
                    self._hold(
                        Message(
                            message.key, message.value, "duplicate", message.event_id,
                            message.event_time, message.temperature_c, message.detail,
                            message.humidity_pct, message.battery_pct,
                        )
                    )  # fmt: skip

    # -- the sequence ------------------------------------------------------------------

    def messages(self, limit: int | None = None) -> Iterator[Message]:
        """The run's messages; exactly ``limit`` of them if given, else without end."""
        self.limit = limit
        if self.s.first_spike_after is not None:
            start = self.start if self.wall_clock is None else self.wall_clock()
            self.first_spike_at = start + self.s.first_spike_after
        tick = 0
        while True:
            for message in self._readings_of_tick(tick):
                while self.held and (
                    self.held[0][0] <= self.fresh
                    or (limit is not None and self.emitted + len(self.held) >= limit)
                ):
                    if limit is not None and self.emitted >= limit:
                        return
                    self.emitted += 1
                    yield heapq.heappop(self.held)[2]
                if limit is not None and self.emitted >= limit:
                    return
                self.emitted += 1
                if message.kind in ("normal", "incident"):
                    self.fresh += 1
                yield message
            tick += 1

    def drain(self) -> Iterator[Message]:
        """The held-back messages still waiting, in release order (at shutdown).

        Never past ``limit``: a duplicate held after the last counted message stays unsent.
        """
        while self.held and (self.limit is None or self.emitted < self.limit):
            self.emitted += 1
            yield heapq.heappop(self.held)[2]
