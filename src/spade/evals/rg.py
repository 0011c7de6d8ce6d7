"""Reasoning-Gym suites: any task by name, at the package defaults, the paper's hard configs or a preset.

``reasoning_gym`` scores any Reasoning-Gym task (default: the 100 tasks of the Reasoning-Gym paper's
appendix A.3, grouped math/algorithmic/cognition/logic as in the SPADE paper's table); ``math`` scores the
math generators (default: ``gsm_symbolic`` and the 31 math tasks). As the SPADE authors evaluate: the
package's own system prompt (answers in ``<answer>`` tags), up to ``max_turns`` tries with feedback after a
wrong answer, win = the package's scorer gives ≥ 1.0 on some try.

Items: task ``t``'s items are the generator's items ``0..n-1`` for the dataset seed
``eval_seed(seed, suite, t)`` (≥ 2**31, so never a training instance); few-shot examples are items of the
same generator with the dataset seed shifted by 2**20 (disjoint from every scored item, as long as
``n < 2**20``). Task parameters: ``params["preset"]`` (``default``, ``hard``, ``easy``) then any generator
field: ``{"max_terms": 2}`` for every task, ``{"basic_arithmetic.max_terms": 2}`` for one task.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spade.config import EvalOptions
from spade.envs.rg_tasks import category_of, hard_table
from spade.evals.base import EvalError, ItemResult, Progress, Workload, eval_seed, plural
from spade.evals.chat import ChatEpisode, Judge, Verdict, chat_episode, gather_bounded
from spade.types import Message, Policy, SamplingParams

try:
    import reasoning_gym
    from reasoning_gym.factory import DATASETS
    from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer
except ImportError as exc:  # the suite registry turns this into a one-line install hint
    raise ModuleNotFoundError(str(exc), name="reasoning_gym") from exc

PRESETS = ("default", "hard", "easy")
DEFAULT_ITEMS = 8
"""Items per task when ``limit`` is None (the SPADE authors score 8 per hard task)."""
FEWSHOT_SHIFT = 2**20
FEEDBACK_WRONG = "Your answer is incorrect."
FEEDBACK_UNTAGGED = "I could not find an answer inside <answer></answer> tags."
FEEDBACK_RETRY = " Try again: think it through, then give only the final answer inside <answer></answer>."

EASY: dict[str, dict[str, Any]] = {
    "basic_arithmetic": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "chain_sum": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "leg_counting": {"min_animals": 1, "max_animals": 2, "min_instances": 1, "max_instances": 3},
    "products": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "simple_equations": {"min_terms": 2, "max_terms": 2, "max_value": 10},
    "letter_counting": {"min_words": 1, "max_words": 3},
    "spell_backward": {"min_word_len": 3, "max_word_len": 4},
    "word_sorting": {"min_words": 2, "max_words": 3, "max_word_length": 5},
    "number_sorting": {
        "min_numbers": 2,
        "max_numbers": 3,
        "max_decimals": 0,
        "min_value": 0,
        "max_value": 20,
    },
    "gcd": {"max_value": 20},
    "lcm": {"max_value": 12},
    "gsm_symbolic": {"difficulty": 0.1},
}
"""The ``easy`` preset: one-digit, few-term configurations where a ~100M model can sometimes win."""


def all_tasks() -> list[str]:
    """Every Reasoning-Gym task name."""
    return sorted(DATASETS)


@dataclass(frozen=True, slots=True)
class Task:
    """One Reasoning-Gym task with its resolved generator configuration."""

    name: str
    category: str
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """Short hash of the configuration: item ids differ whenever the instances do."""
        blob = json.dumps(self.config, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:8]


def check_task(name: str) -> None:
    """Raise EvalError naming the closest Reasoning-Gym tasks when ``name`` is not one."""
    if name not in DATASETS:
        close = difflib.get_close_matches(name, list(DATASETS), n=3)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise EvalError(f"unknown Reasoning-Gym task {name!r}; {hint}(`spade eval --list-tasks` lists them)")


def task_config(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The generator configuration of ``name``: the preset, then shared and task-specific overrides."""
    preset = str(params.get("preset", "default"))
    if preset not in PRESETS:
        raise EvalError(f"unknown preset {preset!r}; choose from: {', '.join(PRESETS)}")
    config: dict[str, Any] = {}
    if preset == "hard":
        config.update(hard_table()["tasks"].get(name, {}).get("hard_config", {}))
    elif preset == "easy":
        if name not in EASY:
            raise EvalError(
                f"no easy preset for task {name!r} (easy covers: {', '.join(EASY)}); use --preset default "
                "or set its parameters with --param KEY=VALUE"
            )
        config.update(EASY[name])
    for key, value in params.items():
        if key == "preset":
            continue
        task, dot, field_name = key.rpartition(".")
        if not dot:
            config[key] = value
        elif task == name:
            config[field_name] = value
    return config


def items_per_task(opts: EvalOptions) -> int:
    """Items scored per task: ``opts.limit`` or :data:`DEFAULT_ITEMS` (EvalError outside ``[1, 2**20)``)."""
    n = DEFAULT_ITEMS if opts.limit is None else opts.limit
    if not 1 <= n < FEWSHOT_SHIFT:
        raise EvalError(f"limit must be in [1, {FEWSHOT_SHIFT}) for procedural suites (got {n})")
    return n


def make_dataset(task: Task, seed: int, size: int) -> Any:
    """The task's generator with ``config`` (bad fields or values raise EvalError saying which)."""
    try:
        return reasoning_gym.create_dataset(task.name, seed=seed, size=size, **task.config)
    except (TypeError, ValueError, AssertionError) as exc:
        raise EvalError(f"task {task.name!r} rejects parameters {task.config}: {exc}") from None


class ReasoningGymSuite:
    """Reasoning-Gym tasks; default: the 100 hard-table tasks, categories as the SPADE paper's table."""

    name = "reasoning_gym"

    def default_tasks(self) -> list[str]:
        """Tasks scored when none are named."""
        return sorted(hard_table()["tasks"])

    def category(self, task: str) -> str:
        """The paper's category of a task ('other' outside the table)."""
        return category_of(task)

    def tasks(self, opts: EvalOptions) -> list[Task]:
        """The selected tasks with their configurations (names checked before anything runs)."""
        names = list(opts.tasks) or self.default_tasks()
        for n in names:
            check_task(n)
        return [Task(n, self.category(n), task_config(n, opts.params)) for n in names]

    def workload(self, opts: EvalOptions) -> Workload:
        """``--limit`` (default 8) items of every selected task."""
        n = items_per_task(opts)
        tasks = len(opts.tasks) or len(self.default_tasks())
        per = f"{n} per task (the default of --limit)" if opts.limit is None else f"--limit {n} per task"
        return Workload.of(n * tasks, f"{per} × {plural(tasks, 'task')}", opts)

    def check(self, opts: EvalOptions) -> None:
        """Raise EvalError for unknown tasks or presets and parameters a generator rejects."""
        for task in self.tasks(opts):
            make_dataset(task, eval_seed(opts.seed, self.name, task.name), 1)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Score every selected item (see the module docstring)."""
        n = items_per_task(opts)
        params = opts.sampling()
        plans = [self._plan(task, n, opts) for task in self.tasks(opts)]
        jobs = [
            (plan, item, ep)
            for plan in plans
            for item in range(len(plan.items))
            for ep in range(opts.episodes)
        ]
        calls = [functools.partial(self._episode, policy, params, opts, j) for j in jobs]
        outcomes = await gather_bounded(calls, opts.concurrency, progress)
        by_item: dict[tuple[str, int], list[ChatEpisode]] = {}
        for (plan, item, _), outcome in zip(jobs, outcomes, strict=True):
            by_item.setdefault((plan.task.name, item), []).append(outcome)
        return [
            plan.result(self.name, i, by_item[(plan.task.name, i)])
            for plan in plans
            for i in range(len(plan.items))
        ]

    def _plan(self, task: Task, n: int, opts: EvalOptions) -> _Plan:
        seed = eval_seed(opts.seed, self.name, task.name)
        data = make_dataset(task, seed, n)
        shots = make_dataset(task, seed + FEWSHOT_SHIFT, opts.fewshot) if opts.fewshot else None
        examples = [shots[k] for k in range(opts.fewshot)] if shots is not None else []
        return _Plan(task, seed, data, [data[i] for i in range(n)], examples)

    async def _episode(
        self, policy: Policy, params: SamplingParams, opts: EvalOptions, job: tuple[_Plan, int, int]
    ) -> ChatEpisode:
        plan, item, _ = job
        entry = plan.items[item]
        return await chat_episode(policy, plan.messages(entry), params, plan.judge(entry), opts.max_turns)


class MathSuite(ReasoningGymSuite):
    """Math generators of Reasoning-Gym: ``gsm_symbolic`` and the hard table's math tasks; per-task rollup."""

    name = "math"

    def default_tasks(self) -> list[str]:
        """``gsm_symbolic`` then the math-category tasks of the hard table."""
        table = hard_table()["tasks"]
        return ["gsm_symbolic", *sorted(t for t, v in table.items() if v["category"] == "math")]

    def category(self, task: str) -> str:
        """Each math task is its own category."""
        return task


@dataclass(frozen=True, slots=True)
class _Plan:
    """One task's generator, items and few-shot examples."""

    task: Task
    seed: int
    data: Any
    items: list[dict[str, Any]]
    shots: list[dict[str, Any]]

    def messages(self, entry: Mapping[str, Any]) -> list[Message]:
        """System prompt, few-shot exchanges, then the question."""
        out: list[Message] = [{"role": "system", "content": SYSTEM_PROMPTS["default"]}]
        for shot in self.shots:
            out += [
                {"role": "user", "content": shot["question"]},
                {"role": "assistant", "content": f"<answer>{shot['answer']}</answer>"},
            ]
        out.append({"role": "user", "content": entry["question"]})
        return out

    def judge(self, entry: Mapping[str, Any]) -> Judge:
        """The package's scorer on the last ``<answer>`` of a reply, with feedback for a retry."""

        def verdict(reply: str) -> Verdict:
            answer = extract_answer(reply)
            score = _score(self.data, answer, entry)
            feedback = (FEEDBACK_WRONG if answer is not None else FEEDBACK_UNTAGGED) + FEEDBACK_RETRY
            return Verdict(score, answer, feedback)

        return verdict

    def result(self, suite: str, i: int, episodes: list[ChatEpisode]) -> ItemResult:
        """The item's result with what is needed to read it back."""
        entry = self.items[i]
        return ItemResult(
            suite=suite,
            item_id=f"{self.task.name}/{self.task.digest}/{i}",
            category=self.task.category,
            scores=tuple(e.score for e in episodes),
            detail={
                "task": self.task.name,
                "config": self.task.config,
                "instance_seed": self.seed + i,
                "fewshot_seeds": [self.seed + FEWSHOT_SHIFT + k for k in range(len(self.shots))],
                "question": entry["question"],
                "expected": str(entry["answer"]),
                "errors": sum(1 for e in episodes if e.error),
                "episodes": [e.to_dict() for e in episodes],
            },
        )


def _score(data: Any, answer: str | None, entry: Mapping[str, Any]) -> float:
    """The package's score of ``answer``; a scorer that raises on a malformed answer scores it 0."""
    if answer is None:
        return 0.0
    try:
        return float(data.score_answer(answer, entry=entry))
    except Exception:  # boundary: third-party scorers raise anything on malformed answers
        return 0.0
