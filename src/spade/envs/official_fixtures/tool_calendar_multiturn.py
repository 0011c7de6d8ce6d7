"""SPADE self-play generated game"""

import json
import random
from typing import Tuple

from tool_use_base_env import ToolUseBaseEnv


class TeamCalendarMTEnv(ToolUseBaseEnv):
    def reset(self, seed=None) -> Tuple[str, dict]:
        self.turn_count = 0
        self._call_history = []
        if seed is not None:
            random.seed(seed)
        days = ["monday", "tuesday", "wednesday", "thursday", "friday"]
        titles = ["team sync", "design review", "budget check-in", "customer call", "retro", "1:1"]
        people = ["priya", "marco", "chen", "olga", "sam", "fatima"]
        events = {}
        for i, title in enumerate(titles):
            events[f"EV{i + 1}"] = {
                "title": title,
                "day": random.choice(days),
                "hour": random.randint(9, 16),
                "attendees": random.sample(people, 2),
            }
        self.event_id = random.choice(list(events))
        self.new_hour = random.choice([h for h in range(9, 17) if h != events[self.event_id]["hour"]])
        self.guest = random.choice([p for p in people if p not in events[self.event_id]["attendees"]])
        self._state = {"events": events, "viewed_day": None}
        event = events[self.event_id]
        self._tools = {
            "list_events": {
                "description": "List the events on a day",
                "parameters": {
                    "type": "object",
                    "properties": {"day": {"type": "string", "enum": days}},
                    "required": ["day"],
                },
            },
            "reschedule": {
                "description": "Move an event to another hour (9-16) on the same day",
                "parameters": {
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}, "hour": {"type": "integer"}},
                    "required": ["event_id", "hour"],
                },
            },
            "invite": {
                "description": "Add a person to an event",
                "parameters": {
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}, "person": {"type": "string"}},
                    "required": ["event_id", "person"],
                },
            },
            "cancel_event": {
                "description": "Cancel an event",
                "parameters": {
                    "type": "object",
                    "properties": {"event_id": {"type": "string"}},
                    "required": ["event_id"],
                },
            },
        }
        self._user_messages = [
            f"What's on my calendar on {event['day'].capitalize()}?",
            f"Move the {event['title']} to {self.new_hour}:00.",
            f"Please also invite {self.guest.capitalize()} to it.",
        ]
        eid, hour, guest = self.event_id, self.new_hour, self.guest
        self._message_criteria = [
            lambda s: s["viewed_day"] == s["events"][eid]["day"],
            lambda s: s["events"][eid]["hour"] == hour,
            lambda s: guest in s["events"][eid]["attendees"],
        ]
        self._current_msg = 0
        self._expected_answer = "done"
        return (self._user_messages[0], {})

    def _advance_if_done(self) -> str:
        if self._current_msg >= len(self._user_messages):
            return ""
        if self._message_criteria[self._current_msg](self._state):
            self._current_msg += 1
            if self._current_msg >= len(self._user_messages):
                return "\n\n[ALL STEPS COMPLETE] Submit <answer>done</answer>."
            next_msg = self._user_messages[self._current_msg]
            return f"\n\n[STEP {self._current_msg} COMPLETE — NEW INSTRUCTION] {next_msg}"
        return ""

    def _check_answer(self, answer: str) -> bool:
        return answer.strip().lower() == "done" and self._current_msg >= len(self._user_messages)

    def tool_list_events(self, day="") -> str:
        day = day.lower()
        self._state["viewed_day"] = day
        rows = {eid: e for eid, e in self._state["events"].items() if e["day"] == day}
        return json.dumps(rows) + self._advance_if_done()

    def tool_reschedule(self, event_id="", hour=0) -> str:
        event = self._state["events"].get(event_id)
        if event is None:
            return f"Error: event {event_id} not found" + self._advance_if_done()
        if not 9 <= int(hour) <= 16:
            return "Error: hour must be between 9 and 16" + self._advance_if_done()
        event["hour"] = int(hour)
        return f"Moved {event['title']} to {int(hour)}:00" + self._advance_if_done()

    def tool_invite(self, event_id="", person="") -> str:
        event = self._state["events"].get(event_id)
        if event is None:
            return f"Error: event {event_id} not found" + self._advance_if_done()
        if person.lower() not in event["attendees"]:
            event["attendees"].append(person.lower())
        return f"Invited {person} to {event['title']}" + self._advance_if_done()

    def tool_cancel_event(self, event_id="") -> str:
        if event_id not in self._state["events"]:
            return f"Error: event {event_id} not found" + self._advance_if_done()
        del self._state["events"][event_id]
        return f"Cancelled {event_id}" + self._advance_if_done()

    def solution(self) -> str:
        day = self._state["events"][self.event_id]["day"]
        return (
            f"1. list_events(day={day!r}) "
            f"2. reschedule(event_id={self.event_id!r}, hour={self.new_hour}) "
            f"3. invite(event_id={self.event_id!r}, person={self.guest!r}) "
            "ANSWER: done"
        )
