"""Inventory count: reconcile stock records with a night-shift cycle count, then verify the result.

The count sheet is written by bin location, but the stock system adjusts by part number and by a signed
delta, so each line needs a lookup (which part sits in the bin, what the system believes), a computed
correction with the right reason code, and, at the end, a read-back of the category report. Harder levels
add more bins, a line that already matches (adjusting by zero is refused, so the agent must notice) and a
damage write-off with a different reason. The final state is checked (every counted part corrected with the
right reason, nothing else touched) as well as the reported category total.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

REASONS = ("cycle_count", "damaged", "received", "returned")
_CATALOGUE = {
    "fasteners": ("hex bolt M8x40", "wood screw 4x50", "wall plug 6mm", "nylon lock nut M10", "washer M12",
                  "rivet 4.8mm", "threaded rod M6"),
    "electrical": ("cable tie 300mm", "fuse 10A", "lever connector 3-way", "junction box IP65",
                   "heat shrink kit", "DIN rail 1m"),
    "plumbing": ("PTFE tape", "elbow 15mm", "compression tee 22mm", "ball valve 1/2in", "silicone sealant"),
    "safety": ("nitrile gloves L", "ear plugs", "safety glasses", "hi-vis vest", "dust mask FFP2"),
    "adhesives": ("epoxy 2-part", "contact cement", "wood glue 1L", "threadlocker blue", "duct tape 50m"),
}  # fmt: skip


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip()


def _integer(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ValueError(f"{name} must be an integer, got {value!r}")


class InventoryCountEnv(ToolEnv):
    """Apply a cycle count recorded by bin to a stock system that adjusts by part, then read back a total.

    Level 0: one bin. Level 1: three bins, one of which may already be right. Level 2: four bins plus a
    damaged-goods write-off that needs a different reason code.
    """

    skill = "state_modification"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 20
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("lookup_bin", "Show which part is stored in a bin and its system quantity.",
                        bin=("string", "Bin location, e.g. B-07")),
        function_schema("get_part", "Read a part: name, category, bin, quantity, unit cost, reorder point.",
                        part_number=("string", "Part number, e.g. P-10432")),
        function_schema("adjust_stock", "Add (positive delta) or remove (negative delta) units of a part. "
                        "Reason is one of: cycle_count, damaged, received, returned.",
                        part_number=("string", "Part number"), delta=("integer", "Signed change in units"),
                        reason=("string", "cycle_count | damaged | received | returned")),
        function_schema("move_part", "Relocate a part to another (empty) bin.",
                        part_number=("string", "Part number"), to_bin=("string", "Destination bin")),
        function_schema("set_reorder_point", "Set the quantity at which a part is reordered.",
                        part_number=("string", "Part number"), level=("integer", "Reorder point in units")),
        function_schema("category_report", "Totals for one category: parts, units on hand and stock value.",
                        category=("string", "fasteners | electrical | plumbing | safety | adhesives")),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        bins = [f"{a}-{n:02d}" for a in "ABCDEF" for n in range(1, 16)]
        rng.shuffle(bins)
        numbers = rng.sample(range(10000, 99999), 40)
        self.parts: dict[str, dict[str, Any]] = {}
        for category, names in _CATALOGUE.items():
            for name in names:
                self.parts[f"P-{numbers.pop()}"] = {
                    "name": name, "category": category, "bin": bins.pop(), "qty": rng.randint(0, 90),
                    "cost": round(rng.uniform(0.05, 40.0), 2), "reorder": rng.choice((10, 20, 25, 50)),
                }  # fmt: skip
        self.free_bins = bins
        self.initial = {p: (r["qty"], r["bin"]) for p, r in self.parts.items()}
        self.log: list[tuple[str, int, str]] = []
        self._plan_count()
        return self._intro(), {"difficulty": self.difficulty}

    def _plan_count(self) -> None:
        """Pick the counted parts and their targets: ``{part: (target qty, reason)}``."""
        rng = self.rng
        n_bins, has_match, has_damage = ((1, False, False), (3, True, False), (4, True, True))[
            self.difficulty
        ]
        self.category = rng.choice(list(_CATALOGUE))
        in_category = [p for p, r in self.parts.items() if r["category"] == self.category]
        others = [p for p in self.parts if p not in in_category]
        counted = [rng.choice(in_category), *rng.sample([*in_category, *others], n_bins + has_damage)]
        counted = list(dict.fromkeys(counted))[: n_bins + has_damage]
        self.targets: dict[str, tuple[int, str]] = {}
        self.lines: list[str] = []
        for i, part in enumerate(counted):
            record = self.parts[part]
            if has_damage and i == len(counted) - 1:
                record["qty"] = max(record["qty"], 6)
                self.initial[part] = (record["qty"], record["bin"])
                lost = rng.randint(2, 5)
                self.targets[part] = (record["qty"] - lost, "damaged")
                self.lines.append(
                    f"- Bin {record['bin']}: {lost} units found crushed; write them off as damaged."
                )
                continue
            same = has_match and i == 1 and rng.random() < 0.5
            target = record["qty"] if same else rng.choice([q for q in range(0, 95) if q != record["qty"]])
            self.targets[part] = (target, "cycle_count")
            self.lines.append(f"- Bin {record['bin']}: counted {target} units.")

    def _intro(self) -> str:
        lines = [
            "Night-shift cycle count, recorded by bin:",
            *self.lines,
            "Bring the system quantities in line with this sheet (use reason cycle_count for count "
            "corrections), change nothing else, then report the total units on hand in the "
            f"'{self.category}' category after your corrections.",
            "",
            "Tools:",
        ]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn).",
            "Finish with <answer>TOTAL_UNITS</answer>; your first answer ends the episode.",
        ]
        return "\n".join(lines)

    def _part(self, value: object) -> str:
        part = _text(value, "part_number").upper()
        if part not in self.parts:
            raise ValueError(f"no part {part}; look parts up by bin with lookup_bin")
        return part

    # -- tools ------------------------------------------------------------------------------------------
    def tool_lookup_bin(self, bin: object) -> str:
        where = _text(bin, "bin").upper()
        for part, r in self.parts.items():
            if r["bin"] == where:
                return f"Bin {where}: {part} ({r['name']}), system quantity {r['qty']}"
        return f"Bin {where} is empty or does not exist."

    def tool_get_part(self, part_number: object) -> str:
        part = self._part(part_number)
        r = self.parts[part]
        return (
            f"{part}: {r['name']}, category {r['category']}, bin {r['bin']}, quantity {r['qty']}, "
            f"unit cost {r['cost']:.2f}, reorder point {r['reorder']}"
        )

    def tool_adjust_stock(self, part_number: object, delta: object, reason: object) -> str:
        part, change = self._part(part_number), _integer(delta, "delta")
        why = _text(reason, "reason").lower()
        if why not in REASONS:
            return f"Error: reason must be one of {', '.join(REASONS)}."
        if change == 0:
            return "Error: delta must be non-zero (nothing to adjust)."
        record = self.parts[part]
        if record["qty"] + change < 0:
            return f"Error: {part} has only {record['qty']} units; cannot remove {-change}."
        record["qty"] += change
        self.log.append((part, change, why))
        return f"Adjusted {part} by {change:+d} ({why}). New quantity {record['qty']}."

    def tool_move_part(self, part_number: object, to_bin: object) -> str:
        part, where = self._part(part_number), _text(to_bin, "to_bin").upper()
        if where not in self.free_bins:
            return f"Error: bin {where} is occupied or does not exist."
        self.free_bins.remove(where)
        self.free_bins.append(self.parts[part]["bin"])
        self.parts[part]["bin"] = where
        return f"Moved {part} to {where}."

    def tool_set_reorder_point(self, part_number: object, level: object) -> str:
        part, value = self._part(part_number), _integer(level, "level")
        if value < 0:
            return "Error: level must be >= 0."
        self.parts[part]["reorder"] = value
        return f"Reorder point of {part} set to {value}."

    def tool_category_report(self, category: object) -> str:
        name = _text(category, "category").lower()
        if name not in _CATALOGUE:
            return f"Error: unknown category; use one of {', '.join(_CATALOGUE)}."
        rows = [r for r in self.parts.values() if r["category"] == name]
        units = sum(r["qty"] for r in rows)
        value = sum(r["qty"] * r["cost"] for r in rows)
        return f"{name}: {len(rows)} parts, {units} units on hand, stock value {value:.2f}"

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        for part, (target, reason) in self.targets.items():
            reasons = {why for p, _, why in self.log if p == part}
            if self.parts[part]["qty"] != target or not reasons <= {reason}:
                return False
        untouched = all(
            (r["qty"], r["bin"]) == self.initial[p] for p, r in self.parts.items() if p not in self.targets
        )
        moved = any(self.parts[p]["bin"] != self.initial[p][1] for p in self.targets)
        total = sum(r["qty"] for r in self.parts.values() if r["category"] == self.category)
        return untouched and not moved and answer.strip().rstrip(".") == str(total)

    def solution(self) -> list[str]:
        actions = []
        for part, (target, reason) in self.targets.items():
            record = self.parts[part]
            actions.append(tool_call_action("lookup_bin", bin=record["bin"]))
            if target != record["qty"]:
                actions.append(
                    tool_call_action(
                        "adjust_stock", part_number=part, delta=target - record["qty"], reason=reason
                    )
                )
        actions.append(tool_call_action("category_report", category=self.category))
        total = sum(
            (self.targets[p][0] if p in self.targets else r["qty"])
            for p, r in self.parts.items()
            if r["category"] == self.category
        )
        return [*actions, answer_action(str(total))]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: a lookup, an adjustment with a random delta and reason, or a guess."""
        part = rng.choice([*self.targets, *self.parts])
        roll = rng.random()
        if roll < 0.15:
            return answer_action(str(rng.randint(0, 500)))
        if roll < 0.45:
            delta = rng.choice([-1, 1]) * rng.randint(1, 30)
            return tool_call_action("adjust_stock", part_number=part, delta=delta, reason=rng.choice(REASONS))
        if roll < 0.55:
            return tool_call_action("category_report", category=rng.choice(list(_CATALOGUE)))
        if roll < 0.6:
            return tool_call_action("move_part", part_number=part, to_bin=rng.choice(self.free_bins))
        if roll < 0.8:
            return tool_call_action("lookup_bin", bin=self.parts[part]["bin"])
        return tool_call_action("get_part", part_number=part)


ENV = InventoryCountEnv
