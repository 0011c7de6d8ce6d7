"""The environment designer role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require
from spade.config.types import DesignerReward, Difficulty, Setting


@dataclass(frozen=True, slots=True)
class DesignerConfig:
    """The environment designer role."""

    setting: Setting = "games"
    """'games' or 'tool_use': which skills the designer writes environments for."""
    skills: tuple[str, ...] = ()
    """Skill slugs to design for; empty means all skills of the setting."""
    seeds: tuple[str, ...] = ()
    """Seed environments the archive starts from: the designer's first examples, the fill when too few
    designs are valid, and the default fixed pool. Each a library name (`spade envs`), or an environment file
    or folder of them, PATH[:SKILL] (the skill, where the file sets no `skill = "..."`). Empty: every library
    seed of ``skills``; only files: those alone."""
    skills_per_regen: int = 3
    """Round-robin window of skills active per regeneration epoch."""
    envs_per_regen: int = 24
    """Environment slots designed at every regeneration (one designer sample each, per attempt)."""
    attempts: int = 1
    """Designs per slot at most: a slot whose design fails extraction or the checker is designed again with
    a fresh document, until one is valid (the released recipe retries 5 times). Every failed attempt is a
    designer sample credited ``reward.invalid_penalty``, and its tokens count against ``sampled_token_budget``."""
    regen_interval: int = 4
    """Steps between regenerations; the current environments are replayed in between."""
    edit_fraction: float = 0.0
    """Fraction of designs made by editing a parent from memory instead of writing from scratch."""
    edit_format: Literal["file", "patch", "lines"] = "file"
    """How an edit is written: the complete modified file, SEARCH/REPLACE blocks applied to the parent, or
    `lines`: the parent's numbered lines richest in constants, rewritten as `N: new text` (no verbatim copy:
    what a 135M model can do). A small model can change a rule or a constant without copying the file."""
    memory_examples: int = 2
    """Archived environments shown to the designer as examples of its own work."""
    negative_examples: int = 1
    """Rejected designs shown with their checker findings, as what not to do."""
    doc_tokens: int = 1024
    """Length budget of the grounding document in the prompt, in whitespace-separated words (the authors'
    unit: 6,000 for games, 4,000 for tool use)."""
    max_tokens: int = 8192
    """Generation budget of one design (tokens)."""
    temperature: float = 0.6
    """Designer sampling temperature."""
    top_p: float = 1.0
    """Designer and hint sampling: nucleus probability (1.0 disables top-p)."""
    top_k: int = 0
    """Designer and hint sampling: keep only the k most likely tokens (0 disables top-k)."""
    train: bool = True
    """Train the designer role. False is the paper's no-designer-training ablation: the designer still
    designs (and its environments are checked, hinted, played and credited for the metrics), but its samples
    never enter the update."""
    reward: DesignerReward = "regret"
    """What the designer's samples are credited: 'regret', each its own reward (``reward.variant``);
    'shuffled', the spurious-reward control: the rewards of each regeneration's samples permuted among them
    (a seeded permutation that moves them: the same rewards, unrelated to the designs); 'random', uniform draws
    between the regeneration's lowest and highest reward. Either control is the same under the run's seed, on
    resume too."""
    tool_contract: Literal["single", "multi_turn"] = "single"
    """tool_use setting: 'single' asks for one task checked by the final answer; 'multi_turn' asks for the
    authors' contract (3-5 atomic user instructions revealed one at a time, one state criterion each, final
    answer 'done') in one of ten realistic domains with a weighted task-type rotation, the grounding
    document demoted to optional flavour."""
    hint_mode: Literal["code", "instance"] = "code"
    """'code': one hint per environment written from its code alone, so it holds for every instance (the
    authors' way); 'instance': one hint per hinted seed, written from the code and that instance's first
    observation."""
    hint_max_tokens: int = 512
    """Generation budget of one hint (tokens)."""
    hint_prefix: str = ""
    """Text the hint reply starts with, continued by the model (empty: none). A small model shown code
    answers with more code; after "Hint:" it writes a sentence."""
    difficulty: Difficulty = "medium"
    """Target difficulty stated in the designer prompt (the released recipe always asks for medium)."""
    example_code_chars: int = 3000
    """Memory examples longer than this are cut at a line boundary, with a marker saying so."""
    train_rejected: bool = True
    """Train every rejected design attempt as a designer sample credited ``reward.invalid_penalty``, so the
    designer learns what made it fail. False: only accepted designs are trained (the release's rejection
    sampling); a rejected attempt costs only its retry."""
    example: Literal["worked", "sketch"] = "worked"
    """What the games prompt shows of the interface: 'worked', one complete seed environment; 'sketch', an
    outline of the class with elided bodies (as released). The multi-turn tool contract keeps its own
    complete example either way."""
    worked_example_chars: int = 12_000
    """Prefer a seed environment within this size as the prompt's complete worked example."""
    hint_temperature: float = 0.3
    """Sampling temperature of hints."""
    hint_max_words: int = 80
    """Word limit stated in the hint prompt."""
    hint_max_chars: int = 600
    """Hints are cut to this length (at a sentence boundary when one is near)."""

    def validate(self) -> None:
        """Checks of the design schedule; skill and seed names are checked against the library by
        :func:`spade.run.preflight.check_names`."""
        require(self.regen_interval >= 1, "designer.regen_interval must be >= 1")
        require(self.envs_per_regen >= 1, "designer.envs_per_regen must be >= 1")
        require(self.attempts >= 1, f"designer.attempts must be >= 1 (1: no retry; got {self.attempts})")
        require(0.0 <= self.edit_fraction <= 1.0, "designer.edit_fraction must be in [0, 1]")
        require(self.skills_per_regen >= 1, "designer.skills_per_regen must be >= 1")
        require(
            self.train or self.reward == "regret",
            f"designer.reward={self.reward!r} changes what the designer is trained on, and designer.train is off: "
            "drop one of --designer.no-train and --designer.reward",
        )
        require(
            self.tool_contract == "single" or self.setting == "tool_use",
            "designer.tool_contract='multi_turn' applies to tool-use environments: set designer.setting=tool_use",
        )
