"""Greenhouse control: carry out a grower's requests by picking the right control among look-alikes.

The controller exposes eleven tools, several of which sound alike but do different things: watering now
versus scheduling a watering, roof vents versus circulation fans, a zone's heating setpoint (a setting)
versus its air temperature (a sensor) versus the outdoor forecast, and one-click presets that change several
settings at once. The grower's requests are phrased the way people talk, not as tool names. Every requested
setting must end at its target and every other setting must be left as it was, so a wrong tool (or a preset)
leaves a visible side effect. The reported sensor value must come from the zone's own sensor.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

METRICS = {"soil_moisture": "%", "air_temperature": "°C", "humidity": "%", "light": "klux", "co2": "ppm"}
WEATHER = ("temperature", "humidity", "wind", "rain")
PRESETS = {"night": {"vent": 0, "lights": False, "shade": 0}, "heatwave": {"vent": 80, "shade": 70, "fan": 3},
           "frost": {"vent": 0, "heater": 8, "fan": 1}}  # fmt: skip
_CROPS = (
    "tomato seedlings",
    "basil",
    "cucumbers",
    "pepper plants",
    "lettuce trays",
    "strawberries",
    "orchids",
)
_QUESTIONS = {
    "soil_moisture": "Also, what is the soil moisture reading in zone {z} (in %)?",
    "air_temperature": "Also, how warm is the air inside zone {z} right now (°C)?",
    "co2": "Also, what CO2 level is zone {z} reading at the moment (ppm)?",
    "humidity": "Also, what is the relative humidity inside zone {z} (in %)?",
}


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip()


def _number(value: object, name: str, low: float, high: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%"))
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}]")
    return float(value)


def _switch(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"on", "true", "off", "false"}:
        return value.strip().lower() in {"on", "true"}
    raise ValueError("on must be true or false")


class GreenhouseControlEnv(ToolEnv):
    """Carry out a grower's requests in a smart greenhouse, choosing the right tool among look-alikes.

    Level 0: one request and one reading. Level 1: two requests. Level 2: three requests, including one
    that is relative to a current setting (which a sensor reading or the forecast would get wrong).
    """

    skill = "tool_selection"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 16
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("read_sensor", "Live reading of one sensor inside a zone.", zone=("string", "Zone"),
                        metric=("string", "soil_moisture | air_temperature | humidity | light | co2")),
        function_schema("get_weather", "Outdoor forecast for the site.",
                        metric=("string", "temperature | humidity | wind | rain")),
        function_schema("get_zone_settings", "Current control settings of a zone (vents, fan, heating "
                        "setpoint, shade, lights, watering).", zone=("string", "Zone letter")),
        function_schema("irrigate_now", "Start watering a zone immediately for a number of minutes.",
                        zone=("string", "Zone letter"), minutes=("integer", "1-60")),
        function_schema("schedule_irrigation", "Add a future watering to a zone's schedule.",
                        zone=("string", "Zone"), minutes=("integer", "1-60"), hour=("integer", "0-23")),
        function_schema("set_vent", "Set how far a zone's roof vents are open.", zone=("string", "Zone"),
                        percent=("integer", "0-100")),
        function_schema("set_fan", "Set a zone's circulation fan speed.", zone=("string", "Zone letter"),
                        speed=("integer", "0-3")),
        function_schema("set_heater", "Set a zone's heating setpoint.", zone=("string", "Zone letter"),
                        celsius=("number", "5-35")),
        function_schema("set_shade", "Set how far a zone's shade screen is drawn.", zone=("string", "Zone"),
                        percent=("integer", "0-100")),
        function_schema("set_lights", "Switch a zone's grow lights.", zone=("string", "Zone letter"),
                        on=("boolean", "true to switch on, false to switch off")),
        function_schema("apply_preset", "Apply a preset to a zone (changes several settings at once).",
                        zone=("string", "Zone letter"), preset=("string", "night | heatwave | frost")),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        self.zones = "ABCDEF"[: (3, 4, 6)[self.difficulty]]
        self.settings: dict[str, dict[str, Any]] = {
            z: {
                "vent": rng.randrange(10, 70, 2),
                "fan": rng.randint(0, 2),
                "heater": float(rng.randint(12, 22)),
                "shade": rng.randrange(0, 50, 5),
                "lights": rng.random() < 0.6,
                "irrigation": 0,
            }
            for z in self.zones
        }
        self.sensors = {
            z: {
                "soil_moisture": round(rng.uniform(12, 65), 1),
                "air_temperature": round(rng.uniform(9, 31), 1),
                "humidity": round(rng.uniform(35, 95), 1),
                "light": round(rng.uniform(2, 80), 1),
                "co2": float(rng.randint(380, 1400)),
            }
            for z in self.zones
        }
        self.weather = {
            "temperature": round(rng.uniform(-4, 30), 1),
            "humidity": round(rng.uniform(30, 99), 1),
            "wind": round(rng.uniform(0, 60), 1),
            "rain": float(rng.randint(0, 100)),
        }
        self.initial = {z: dict(s) for z, s in self.settings.items()}
        self.schedule: list[tuple[str, int, int]] = []
        self.read: set[tuple[str, str]] = set()
        self._plan()
        return self._intro(), {"difficulty": self.difficulty}

    def _plan(self) -> None:
        """Pick requests on distinct settings and the question; record targets and the scripted solution."""
        rng = self.rng
        kinds = ["water", "vent", "heat", "shade", "lights"]
        if self.difficulty == 2:
            special = rng.choice(["raise_heat", "halve_vent"])
            clash = "heat" if special == "raise_heat" else "vent"
            kinds = [special, *rng.sample([k for k in kinds if k != clash], 2)]
        else:
            kinds = rng.sample(kinds, self.difficulty + 1)
        self.targets: dict[tuple[str, str], Any] = {}
        self.requests: list[str] = []
        self.plan: list[str] = []
        for kind in kinds:
            zone = rng.choice(self.zones)
            field, value, request, (tool, arg) = self._request(kind, zone)
            if kind in {"raise_heat", "halve_vent"}:
                self.plan.append(tool_call_action("get_zone_settings", zone=zone))
            self.targets[(zone, field)] = value
            self.requests.append(request)
            self.plan.append(tool_call_action(tool, zone=zone, **{arg: value}))
        metric = rng.choice(list(_QUESTIONS))
        self.asked = (rng.choice(self.zones), metric)
        self.requests.append(_QUESTIONS[metric].format(z=self.asked[0]))
        self.plan.append(tool_call_action("read_sensor", zone=self.asked[0], metric=metric))

    def _request(self, kind: str, zone: str) -> tuple[str, Any, str, tuple[str, str]]:
        """``(setting, target value, the grower's words, (tool, argument))`` for one kind of request."""
        rng, now = self.rng, self.settings[zone]
        crop = rng.choice(_CROPS)
        if kind == "water":
            minutes = rng.randint(5, 30)
            text = f"The {crop} in zone {zone} are wilting: give them a {minutes}-minute watering right now."
            return "irrigation", minutes, text, ("irrigate_now", "minutes")
        if kind == "vent":
            pct = rng.choice([p for p in range(10, 101, 10) if p != now["vent"]])
            text = f"Zone {zone} is stuffy and damp; open the roof vents to {pct}%."
            return "vent", pct, text, ("set_vent", "percent")
        if kind == "heat":
            temp = float(rng.choice([t for t in range(10, 27) if t != now["heater"]]))
            text = f"Frost is forecast tonight: set zone {zone}'s heating to hold {temp:g} °C."
            return "heater", temp, text, ("set_heater", "celsius")
        if kind == "shade":
            pct = rng.choice([p for p in range(55, 101, 5) if p != now["shade"]])
            text = (
                f"The afternoon sun is scorching the {crop} in zone {zone}; draw the shade screen to {pct}%."
            )
            return "shade", pct, text, ("set_shade", "percent")
        if kind == "lights":
            on = not now["lights"]
            text = (
                f"It is too dark for the {crop} in zone {zone}: switch the grow lights on."
                if on
                else f"The grow lights in zone {zone} have been on since dawn; switch them off."
            )
            return "lights", on, text, ("set_lights", "on")
        if kind == "raise_heat":
            delta = rng.randint(2, 5)
            text = f"Raise zone {zone}'s heating setpoint by {delta} °C from its current setting."
            return "heater", now["heater"] + delta, text, ("set_heater", "celsius")
        text = f"Close zone {zone}'s roof vents to half of their current opening."
        return "vent", now["vent"] // 2, text, ("set_vent", "percent")

    def _intro(self) -> str:
        lines = ["Message from the head grower:", *[f"- {r}" for r in self.requests], "", "Tools:"]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn). Change only what is asked.",
            "Finish with <answer>READING</answer> (just the number); your first answer ends the episode.",
        ]
        return "\n".join(lines)

    def _zone(self, value: object) -> str:
        zone = _text(value, "zone").upper().removeprefix("ZONE").strip()
        if zone not in self.zones:
            raise ValueError(f"zone must be one of {', '.join(self.zones)}")
        return zone

    # -- tools ------------------------------------------------------------------------------------------
    def tool_read_sensor(self, zone: object, metric: object) -> str:
        where, what = self._zone(zone), _text(metric, "metric").lower()
        if what not in METRICS:
            return f"Error: metric must be one of {', '.join(METRICS)}."
        self.read.add((where, what))
        return f"Zone {where} {what}: {self.sensors[where][what]:g} {METRICS[what]}"

    def tool_get_weather(self, metric: object) -> str:
        what = _text(metric, "metric").lower()
        if what not in WEATHER:
            return f"Error: metric must be one of {', '.join(WEATHER)}."
        unit = {"temperature": "°C", "humidity": "%", "wind": "km/h", "rain": "% chance"}[what]
        return f"Outdoor forecast {what}: {self.weather[what]:g} {unit}"

    def tool_get_zone_settings(self, zone: object) -> str:
        where = self._zone(zone)
        s = self.settings[where]
        return (
            f"Zone {where}: vents {s['vent']}% open, fan speed {s['fan']}, "
            f"heating setpoint {s['heater']:g} °C, shade {s['shade']}%, "
            f"lights {'on' if s['lights'] else 'off'}, watering {s['irrigation']} min"
        )

    def _set(self, zone: object, field: str, value: Any) -> str:
        where = self._zone(zone)
        self.settings[where][field] = value
        return f"Zone {where}: {field} set to {value}."

    def tool_irrigate_now(self, zone: object, minutes: object) -> str:
        return self._set(zone, "irrigation", int(_number(minutes, "minutes", 1, 60)))

    def tool_schedule_irrigation(self, zone: object, minutes: object, hour: object) -> str:
        where = self._zone(zone)
        length, at = int(_number(minutes, "minutes", 1, 60)), int(_number(hour, "hour", 0, 23))
        self.schedule.append((where, length, at))
        return f"Scheduled {length} min of watering for zone {where} at {at:02d}:00."

    def tool_set_vent(self, zone: object, percent: object) -> str:
        return self._set(zone, "vent", int(_number(percent, "percent", 0, 100)))

    def tool_set_fan(self, zone: object, speed: object) -> str:
        return self._set(zone, "fan", int(_number(speed, "speed", 0, 3)))

    def tool_set_heater(self, zone: object, celsius: object) -> str:
        return self._set(zone, "heater", _number(celsius, "celsius", 5, 35))

    def tool_set_shade(self, zone: object, percent: object) -> str:
        return self._set(zone, "shade", int(_number(percent, "percent", 0, 100)))

    def tool_set_lights(self, zone: object, on: object) -> str:
        return self._set(zone, "lights", _switch(on))

    def tool_apply_preset(self, zone: object, preset: object) -> str:
        where, name = self._zone(zone), _text(preset, "preset").lower()
        if name not in PRESETS:
            return f"Error: preset must be one of {', '.join(PRESETS)}."
        self.settings[where].update(PRESETS[name])
        changed = ", ".join(f"{k}={v}" for k, v in PRESETS[name].items())
        return f"Zone {where}: preset {name} applied ({changed})."

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        for zone, settings in self.settings.items():
            for field, value in settings.items():
                if value != self.targets.get((zone, field), self.initial[zone][field]):
                    return False
        if self.schedule or self.asked not in self.read:
            return False
        try:
            reported = float(answer.strip().split()[0].rstrip("%"))
        except (ValueError, IndexError):
            return False
        zone, metric = self.asked
        return abs(reported - self.sensors[zone][metric]) < 0.05

    def solution(self) -> list[str]:
        zone, metric = self.asked
        return [*self.plan, answer_action(f"{self.sensors[zone][metric]:g}")]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: any control with random values, a reading, or a guessed number."""
        if rng.random() < 0.15:
            zone = rng.choice(self.zones)
            return answer_action(f"{self.sensors[zone][rng.choice(list(METRICS))]:g}")
        zone = rng.choice(self.zones)
        calls: tuple[tuple[str, dict[str, Any]], ...] = (
            ("read_sensor", {"metric": rng.choice(list(METRICS))}),
            ("get_weather", {"metric": rng.choice(WEATHER)}),
            ("get_zone_settings", {}),
            ("irrigate_now", {"minutes": rng.randint(1, 60)}),
            ("schedule_irrigation", {"minutes": rng.randint(1, 60), "hour": rng.randint(0, 23)}),
            ("set_vent", {"percent": rng.randrange(0, 101, 10)}),
            ("set_fan", {"speed": rng.randint(0, 3)}),
            ("set_heater", {"celsius": rng.randint(5, 35)}),
            ("set_shade", {"percent": rng.randrange(0, 101, 5)}),
            ("set_lights", {"on": rng.random() < 0.5}),
            ("apply_preset", {"preset": rng.choice(list(PRESETS))}),
        )
        name, args = rng.choice(calls)
        if name != "get_weather":
            args["zone"] = zone
        return tool_call_action(name, **args)


ENV = GreenhouseControlEnv
