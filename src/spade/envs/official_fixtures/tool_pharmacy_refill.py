"""SPADE self-play generated game"""

import json
import random
from typing import Tuple

# Do NOT import ToolUseBaseEnv -- it is pre-loaded in the namespace


class PharmacyRefillEnv(ToolUseBaseEnv):
    def reset(self, seed=None) -> Tuple[str, dict]:
        self.turn_count = 0
        self._call_history = []
        if seed is not None:
            random.seed(seed)
        first = ["Maria", "Kwame", "Ingrid", "Ravi", "Sofia", "Tomasz", "Aiko", "Daniel"]
        last = ["Alvarez", "Mensah", "Larsen", "Iyer", "Conti", "Nowak", "Mori", "Walsh"]
        drugs = ["atorvastatin", "metformin", "lisinopril", "levothyroxine", "amlodipine", "omeprazole"]
        patients = {}
        for i, (given, family) in enumerate(
            zip(random.sample(first, 6), random.sample(last, 6), strict=True)
        ):
            pid = f"P{100 + i}"
            patients[pid] = {"name": f"{given} {family}", "plan": random.choice(["basic", "plus", "senior"])}
        prescriptions = {}
        for pid in patients:
            for drug in random.sample(drugs, 3):
                rx = f"RX{random.randint(10000, 99999)}"
                prescriptions[rx] = {
                    "patient": pid,
                    "drug": drug,
                    "refills_left": random.choice([0, 1, 2, 3]),
                    "copay": round(random.uniform(2, 25), 2),
                }
        self._state = {
            "patients": patients,
            "prescriptions": prescriptions,
            "orders": [],
        }
        self.target = random.choice(list(patients))
        # make sure the target has at least one refillable and one exhausted prescription
        own = [rx for rx, p in prescriptions.items() if p["patient"] == self.target]
        prescriptions[own[0]]["refills_left"] = 2
        prescriptions[own[1]]["refills_left"] = 0
        self._tools = {
            "search_patient": {
                "description": "Find patients whose name contains the query",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}},
                    "required": ["query"],
                },
            },
            "get_prescriptions": {
                "description": "List a patient's prescriptions with refills left and copay",
                "parameters": {
                    "type": "object",
                    "properties": {"patient_id": {"type": "string"}},
                    "required": ["patient_id"],
                },
            },
            "refill": {
                "description": "Order one refill of a prescription (uses one refill)",
                "parameters": {
                    "type": "object",
                    "properties": {"rx_id": {"type": "string"}},
                    "required": ["rx_id"],
                },
            },
            "get_insurance": {
                "description": "Show a patient's insurance plan",
                "parameters": {
                    "type": "object",
                    "properties": {"patient_id": {"type": "string"}},
                    "required": ["patient_id"],
                },
            },
        }
        refillable = [rx for rx in own if prescriptions[rx]["refills_left"] > 0]
        total = sum(prescriptions[rx]["copay"] for rx in refillable)
        self._expected_answer = f"${total:,.2f}"
        name = patients[self.target]["name"]
        return (
            f"TASK: {name} called the pharmacy. Refill every one of their prescriptions that still has "
            "refills left (one refill each), then report the total copay of the refills you ordered, e.g. "
            "<answer>$12.50</answer>." + self._obs_suffix(),
            {},
        )

    def tool_search_patient(self, query="") -> str:
        hits = {pid: p for pid, p in self._state["patients"].items() if query.lower() in p["name"].lower()}
        return json.dumps(hits) if hits else "No patient found"

    def tool_get_prescriptions(self, patient_id="") -> str:
        rows = {
            rx: {"drug": p["drug"], "refills_left": p["refills_left"], "copay": p["copay"]}
            for rx, p in self._state["prescriptions"].items()
            if p["patient"] == patient_id
        }
        return json.dumps(rows) if rows else f"Error: no prescriptions for {patient_id}"

    def tool_refill(self, rx_id="") -> str:
        rx = self._state["prescriptions"].get(rx_id)
        if rx is None:
            return f"Error: prescription {rx_id} not found"
        if rx["refills_left"] <= 0:
            return f"Error: {rx_id} has no refills left; the prescriber must renew it"
        rx["refills_left"] -= 1
        self._state["orders"].append(rx_id)
        return f"Refill ordered for {rx_id} ({rx['drug']}), copay ${rx['copay']:.2f}"

    def tool_get_insurance(self, patient_id="") -> str:
        patient = self._state["patients"].get(patient_id)
        if patient is None:
            return f"Error: patient {patient_id} not found"
        return f"{patient_id} is on the {patient['plan']} plan"

    def solution(self) -> str:
        own = [rx for rx, p in self._state["prescriptions"].items() if p["patient"] == self.target]
        steps = [f"search_patient(query={self._state['patients'][self.target]['name']!r})"]
        steps.append(f"get_prescriptions(patient_id={self.target!r})")
        steps += [
            f"refill(rx_id={rx!r})" for rx in own if self._state["prescriptions"][rx]["refills_left"] > 0
        ]
        return " -> ".join(steps) + f" -> ANSWER: {self._expected_answer}"
