"""What to design: the slots of a regeneration and one request per slot, from memory, corpus and seeds.

One regeneration plans its slots (:func:`plan_slots`: a round-robin window of skills, ``generate`` or ``edit``
mode per slot from a seeded rng); :class:`Requests` fills one slot's :class:`~spade.design.prompts.DesignRequest`
with archived examples and negatives, an edit parent, a worked example and a corpus document.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from spade import envs
from spade.config import DesignerConfig
from spade.config.types import Setting
from spade.design import tool_prompts
from spade.design.corpus import CorpusSampler
from spade.design.prompt_texts import GAMES_SKETCH
from spade.design.prompts import DesignKind, DesignRequest, Exemplar, Negative
from spade.memory.archive import EnvStatus, Memory


class ArchivedEnv(Protocol):
    """What the designer reads from a memory record (``spade.memory.archive.EnvRecord`` fits)."""

    @property
    def env_id(self) -> str: ...
    @property
    def code(self) -> str: ...
    @property
    def skill(self) -> str: ...
    @property
    def win_rate(self) -> float | None: ...
    @property
    def regret(self) -> float | None: ...


class ArchivedNegative(Protocol):
    """A record to avoid with its reasons (``spade.memory.archive.NegativeExample`` fits)."""

    @property
    def record(self) -> ArchivedEnv: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...


def exemplar(record: ArchivedEnv) -> Exemplar:
    """A memory record as a prompt example or edit parent."""
    return Exemplar(record.env_id, record.code, record.skill, record.win_rate, record.regret)


def negative(item: ArchivedNegative, with_code: bool = True) -> Negative:
    """A memory negative as a prompt entry; ``with_code`` adds a short excerpt of its source."""
    rec = item.record
    return Negative(rec.env_id, rec.skill, tuple(item.reasons), rec.code if with_code else "")


@dataclass(frozen=True, slots=True)
class Slot:
    """One environment to design in a regeneration: its index, target skill and mode."""

    index: int
    skill: str
    mode: DesignKind


# -- skill rotation and slots --------------------------------------------------------------------------------


def active_skills(skills: Sequence[str], per_regen: int, epoch: int) -> list[str]:
    """The round-robin window of ``per_regen`` skills for regeneration ``epoch`` (wrapping; all if fewer).

    Epoch 0 takes skills[0:per_regen], epoch 1 the next ``per_regen``, and so on, so every skill is visited
    equally often and each regeneration costs the same.
    """
    if not skills:
        raise ValueError("no skills to rotate; configure designer.skills or leave it empty for all skills")
    if per_regen < 1 or epoch < 0:
        raise ValueError(f"need per_regen >= 1 and epoch >= 0 (got {per_regen}, {epoch})")
    if per_regen >= len(skills):
        return list(skills)
    start = (epoch * per_regen) % len(skills)
    return [skills[(start + i) % len(skills)] for i in range(per_regen)]


def choose_mode(rng: random.Random, edit_fraction: float) -> DesignKind:
    """``edit`` with probability ``edit_fraction``, else ``generate``."""
    return "edit" if rng.random() < edit_fraction else "generate"


def plan_slots(
    skills: Sequence[str],
    per_regen: int,
    epoch: int,
    n_slots: int,
    *,
    edit_fraction: float,
    rng: random.Random,
) -> list[Slot]:
    """The slots of one regeneration: slot ``i`` targets ``active[i % len(active)]``, mode drawn per slot.

    An ``edit`` slot whose skill has no parent in memory should be designed in ``generate`` mode.
    """
    active = active_skills(skills, per_regen, epoch)
    return [Slot(i, active[i % len(active)], choose_mode(rng, edit_fraction)) for i in range(n_slots)]


def choose_example(
    candidates: Sequence[tuple[str, str, int]], skill: str, rng: random.Random, max_chars: int
) -> str:
    """Pick a worked example from ``(name, skill, n_chars)`` candidates of one setting.

    Prefers the target skill, then sources within ``max_chars``; among those it draws with ``rng``. When no
    source fits the budget the shortest of the preferred ones is taken (a complete example beats a cut one).
    """
    if not candidates:
        raise LookupError("no seed environment to use as the worked example; add one to spade/envs/library")
    same = [c for c in candidates if c[1] == skill] or list(candidates)
    fitting = [c for c in same if c[2] <= max_chars]
    if fitting:
        return rng.choice(sorted(fitting))[0]
    return min(same, key=lambda c: (c[2], c[0]))[0]


def pick_worked_example(setting: Setting, skill: str, rng: random.Random, max_chars: int = 12_000) -> str:
    """The source of a seed environment of ``setting`` (same skill when there is one), see choose_example."""
    specs = [envs.spec(name) for name in envs.names(setting)]
    sources = {s.name: s.source() for s in specs}
    name = choose_example([(s.name, s.skill, len(sources[s.name])) for s in specs], skill, rng, max_chars)
    return sources[name]


@dataclass(frozen=True, slots=True)
class Requests:
    """Fills the design request of each slot from the archive, the corpus and the seed library."""

    designer: DesignerConfig
    memory: Memory
    sampler: CorpusSampler | None
    """Draws each request's document (None: designs are not grounded)."""
    steer: bool = True
    """Show archived examples and negatives (``memory.enabled``; off in the no-memory ablation)."""

    def make(self, slot: Slot, rng: random.Random, design_index: int) -> DesignRequest:
        """One prompt's inputs; ``design_index`` counts designs over the run (the task-type rotation)."""
        d, memory = self.designer, self.memory
        seed = rng.randrange(2**31)
        examples = memory.examples(slot.skill, d.memory_examples, seed=seed) if self.steer else []
        negatives = memory.negatives(slot.skill, d.negative_examples, seed=seed) if self.steer else []
        mode, parent = slot.mode, None
        if mode == "edit":
            candidates = examples or memory.records(slot.skill, EnvStatus.VALID)
            parent = rng.choice(candidates) if candidates else None
            mode = "edit" if parent is not None else "generate"
        multi = d.tool_contract == "multi_turn"
        sketch = d.example == "sketch" and d.setting == "games"
        if multi:
            worked = tool_prompts.MULTI_TURN_EXAMPLE
        elif sketch:
            worked = GAMES_SKETCH
        else:
            worked = pick_worked_example(d.setting, slot.skill, rng, d.worked_example_chars)
        return DesignRequest(
            skill=slot.skill,
            mode=mode,
            worked_example=worked,
            sketch=sketch,
            difficulty=d.difficulty,
            document=self.sampler.sample() if self.sampler is not None else None,
            examples=tuple(exemplar(e) for e in examples if parent is None or e.env_id != parent.env_id),
            negatives=tuple(negative(n) for n in negatives),
            parent=exemplar(parent) if parent is not None else None,
            edit_format=d.edit_format,
            tool_contract=d.tool_contract,
            domain=tool_prompts.draw_domain(rng) if multi else "",
            task_type=tool_prompts.task_type_for(design_index) if multi else "",
        )
