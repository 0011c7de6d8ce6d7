"""Privileged hints: the policy's short strategy note about an environment, and the filter keeping it honest.

The hint is written by a separate, low-temperature call of the same policy. By default it sees the
environment code alone, as the authors do, so one hint holds for every instance the code generates; with
``designer.hint_mode='instance'`` it also sees one instance's first observation and is written per seed.
Reasoning blocks and special tokens are stripped before anything is used, the length is capped, and hints
that contain the literal answer or the winning action sequence are rejected (:func:`leak_reason` states the
rule), because a leaked answer turns hint-based regret into a measure of copying rather than of learnable
difficulty. :class:`Hinter` is the design phase's hint step: it opens an instance of each accepted
environment for the first observation and solution the filter needs, and writes the hints in one batch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from spade.backends.template import TurnTemplate
from spade.config import DesignerConfig
from spade.config.types import Setting
from spade.design import prompt_texts
from spade.design.designer import sample_tokens
from spade.design.prompts import truncate_code
from spade.memory.archive import EnvRecord, Memory
from spade.play.rollout import episode_seeds
from spade.replies import hint_text, last_boxed
from spade.sandbox import EnvRunner, SandboxError
from spade.types import ChatTemplate, Message, Policy, SamplingParams

HintReason = Literal[
    "ok", "capped", "empty", "contains_code", "leak_sequence", "leak_final_action", "truncated", "model_error"
]
"""Why :func:`clean_hint` kept or rejected a hint. ``ok`` and ``capped`` (cut to the length cap at a sentence
or word boundary) keep it; every other reason rejects it."""

_MIN_CODE_CHARS = 400
"""Code is not cut below this many characters to fit a hint prompt (see :func:`write_hints`)."""
_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def build_hint_messages(
    code: str,
    first_observation: str | None,
    setting: Setting,
    *,
    max_words: int = 80,
    code_chars: int | None = None,
) -> list[Message]:
    """The chat messages asking for a short strategy hint about one environment.

    ``first_observation`` None asks for an instance-agnostic hint from the code alone; otherwise the hint is
    about the instance that observation opens.
    """
    tools = setting == "tool_use"
    if first_observation is None:
        template = prompt_texts.HINT_SYSTEM_TOOLS_CODE if tools else prompt_texts.HINT_SYSTEM_GAMES_CODE
    else:
        template = prompt_texts.HINT_SYSTEM_TOOLS if tools else prompt_texts.HINT_SYSTEM_GAMES
    shown = truncate_code(code, code_chars) if code_chars else code
    user = f"Environment code:\n```python\n{shown.rstrip()}\n```\n\n"
    if first_observation is not None:
        user += f"First observation the player sees:\n{first_observation.strip()}\n\n"
    user += "Write the hint."
    return [
        {"role": "system", "content": template.format(max_words=max_words)},
        {"role": "user", "content": user},
    ]


def _normalise(text: str) -> str:
    """Lower-case, no spaces around punctuation, single spaces: ``"7 + 9"`` and ``"7+9"`` compare equal."""
    text = re.sub(r"\s*([^\w\s])\s*", r"\1", text.lower())
    return re.sub(r"\s+", " ", text).strip()


def _action_text(action: str) -> str:
    """The part of an action a hint could leak: the content of a box or of an ``<answer>`` tag."""
    boxed = last_boxed(action)
    if boxed is not None:
        action = boxed
    answers = _ANSWER_TAG_RE.findall(action)
    return _normalise(answers[-1] if answers else action)


def _find_token(haystack: str, needle: str, start: int = 0) -> int:
    """End index of the first standalone occurrence of ``needle`` at or after ``start``, or -1."""
    before = r"(?<![a-z0-9])" if needle[0].isalnum() else ""  # boundaries only where a word could continue
    after = r"(?![a-z0-9])" if needle[-1].isalnum() else ""
    pattern = re.compile(before + re.escape(needle) + after)
    found = pattern.search(haystack, start)
    return found.end() if found else -1


def leak_reason(hint: str, solution: Sequence[str], public: Sequence[str] = ()) -> HintReason | None:
    """Whether a hint gives away the winning actions, and how (None when it does not).

    Actions are compared after unwrapping ``\\boxed{}`` / ``<answer>`` and normalising case and spacing
    around punctuation, as standalone tokens (``7`` does not match ``17``, ``up`` does not match ``upper``).

    - ``leak_sequence``: every action of ``solution`` occurs in the hint, in order (gaps allowed). For a
      one-action solution this is the answer itself, however short.
    - ``leak_final_action``: the final winning action is at least two characters long, occurs in the hint,
      and occurs in none of the ``public`` texts (e.g. the first observation: a move the agent is shown as
      valid, or a protocol word such as ``done``, is no secret).
    """
    actions = [a for a in (_action_text(s) for s in solution) if a]
    if not actions:
        return None
    text = _normalise(hint)
    pos = 0
    for action in actions:
        pos = _find_token(text, action, pos)
        if pos < 0:
            break
    else:
        return "leak_sequence"
    final = actions[-1]
    is_public = any(_find_token(_normalise(p), final) >= 0 for p in public)
    if len(final) >= 2 and not is_public and _find_token(text, final) >= 0:
        return "leak_final_action"
    return None


def _cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s|$)", head)]
    if ends and ends[-1] >= max_chars // 3:
        return head[: ends[-1]]
    return head[: head.rfind(" ")].rstrip(",;: ") + " ..." if " " in head else head


def clean_hint(
    text: str, solution: Sequence[str] | None = None, public: Sequence[str] = (), max_chars: int = 500
) -> tuple[str | None, HintReason]:
    """A usable hint from a completion, or None and why.

    Takes the reply's text as :func:`spade.replies.hint_text` reads it (reasoning, special tokens, a JSON
    reply, fenced code and a leading ``Hint:`` handled), caps the length at ``max_chars`` (at a sentence
    boundary when one is near) and rejects leaks of ``solution`` (the environment's winning actions, when
    known) per :func:`leak_reason`.
    """
    body, why = hint_text(text)
    if body is None:
        return None, why
    capped = _cap(body, max_chars)
    leak = leak_reason(capped, solution or (), public)
    if leak is not None:
        return None, leak
    return capped, "ok" if capped == body else "capped"


# -- policy call ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HintRequest:
    """One environment to write a hint for."""

    env_id: str
    code: str
    first_observation: str | None
    """The instance's first observation (instance-aware hint), or None for a hint from the code alone."""
    setting: Setting
    solution: tuple[str, ...] | None = None
    """Winning actions of an instance (``solution()``) when the environment provides them; the hint must
    not leak them. A code-only hint is checked against one played instance's."""
    public: tuple[str, ...] = ()
    """Texts the agent sees anyway (first observation, protocol words): a final action found in them is
    no secret."""


@dataclass(frozen=True, slots=True)
class Hint:
    """The outcome of one hint call: the hint (None when rejected), why, and what was sampled."""

    env_id: str
    hint: str | None
    reason: HintReason
    messages: tuple[Message, ...]
    completion: str
    tokens_T: tuple[int, ...] = ()
    mask_T: tuple[int, ...] = ()
    sample_logprobs_T: tuple[float, ...] = ()


def hint_prompt(
    template: ChatTemplate,
    request: HintRequest,
    *,
    max_words: int = 80,
    code_chars: int | None = None,
    prefix: str = "",
    max_prompt_tokens: int | None = None,
) -> tuple[list[Message], list[int]]:
    """The messages of one hint request and the prompt's token ids, ``prefix`` included.

    With ``prefix``, the reply starts with that text (appended after the generation prompt, for templates
    that can encode text) and the model continues it. With ``max_prompt_tokens``, the code of an
    environment whose prompt would be longer is cut (at whole lines, with a marker) until the prompt fits: a
    long environment still gets a hint from its beginning.
    """
    started = template.encode(prefix) if prefix and isinstance(template, TurnTemplate) else []
    chars = code_chars
    while True:
        msgs = build_hint_messages(
            request.code, request.first_observation, request.setting, max_words=max_words, code_chars=chars
        )
        ids = template.render(msgs, add_generation_prompt=True) + started
        shown = min(chars or len(request.code), len(request.code))
        if max_prompt_tokens is None or len(ids) <= max_prompt_tokens or shown < _MIN_CODE_CHARS:
            return msgs, ids  # fits, or so little code is left that it stays as it is (and fails)
        chars = int(shown * max_prompt_tokens / len(ids) * 0.9)  # the prompt is mostly code


async def write_hints(
    policy: Policy,
    requests: Sequence[HintRequest],
    params: SamplingParams,
    *,
    max_words: int = 80,
    max_chars: int = 500,
    code_chars: int | None = None,
    prefix: str = "",
    max_prompt_tokens: int | None = None,
) -> list[Hint]:
    """Ask the policy for one hint per environment in one batch and filter each (see :func:`clean_hint`).

    Prompts are built by :func:`hint_prompt` (``prefix`` starts each reply, ``max_prompt_tokens`` cuts long
    code); the hint is the continuation of the prefix.
    """
    prompts_of = [
        hint_prompt(
            policy.template,
            r,
            max_words=max_words,
            code_chars=code_chars,
            prefix=prefix,
            max_prompt_tokens=max_prompt_tokens,
        )
        for r in requests
    ]
    messages = [m for m, _ in prompts_of]
    prompt_ids = [ids for _, ids in prompts_of]
    completions = await policy.sample(prompt_ids, params) if requests else []
    if len(completions) != len(requests):
        raise RuntimeError(f"policy returned {len(completions)} completions for {len(requests)} prompts")
    hints = []
    for req, msgs, ids, comp in zip(requests, messages, prompt_ids, completions, strict=True):
        hint: str | None
        reason: HintReason
        if comp.finish_reason == "error":
            hint, reason = None, "model_error"
        else:
            hint, reason = clean_hint(comp.text, req.solution, _public(req), max_chars)
            if hint is None and reason == "empty" and comp.finish_reason == "length":
                reason = "truncated"
        tokens, mask, logprobs = sample_tokens(ids, comp)
        hints.append(Hint(req.env_id, hint, reason, tuple(msgs), comp.text, tokens, mask, logprobs))
    return hints


def _public(req: HintRequest) -> tuple[str, ...]:
    seen = () if req.first_observation is None else (req.first_observation,)
    protocol = (
        ("<answer>done</answer>",) if req.setting == "tool_use" else ()
    )  # the multi-turn contract's word
    return (*seen, *protocol, *req.public)


def hint_metrics(hints: Sequence[Hint]) -> dict[str, float]:
    """The share of hints per :data:`HintReason`, under ``hint/``, plus ``hint/accepted_rate`` and
    ``hint/sampled_tokens`` (completion tokens of every hint call)."""
    if not hints:
        return {}
    n = len(hints)
    out = {f"hint/{r}_rate": sum(h.reason == r for h in hints) / n for r in get_args(HintReason)}
    out["hint/accepted_rate"] = sum(h.hint is not None for h in hints) / n
    out["hint/sampled_tokens"] = float(sum(sum(h.mask_T) for h in hints))
    return out


# -- the design phase's hint step ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hinter:
    """The design phase's hint step: hints for accepted environments, from the policy, checked for leaks."""

    designer: DesignerConfig
    """``hint_*`` sampling and filter settings, ``hint_mode`` and the setting."""
    policy: Policy
    runner: EnvRunner
    """Opens instances for their first observation and solution."""
    memory: Memory
    seed: int
    """The run's seed: hinted instances are the hinted plays' (:func:`spade.play.rollout.episode_seeds`)."""
    hint_plays: int = 1
    """Hinted plays per environment (``rollout.hint_plays_per_env``): instance mode writes one hint each."""
    max_context: int = 4096
    """The model's context (``model.max_context``): hint prompts are cut to leave room for the hint."""

    async def hint_envs(
        self, env_ids: Sequence[str], step: int
    ) -> tuple[dict[str, list[Hint | None]], dict[str, float]]:
        """Write hints for accepted environments: one from the code alone, or (instance mode) one per seed.

        A played instance (or, per seed, each hinted instance) is opened in the sandbox for its first
        observation and solution, which the leak filter checks the hint against. Returns each environment's
        hints in seed order (None where its instance failed to open) and :func:`hint_metrics`.
        """
        d = self.designer
        slots: list[tuple[str, HintRequest | None]] = []
        for env_id in env_ids:
            found = await self.requests(self.memory.get(env_id), step)
            slots += [(env_id, r) for r in found]
        requests = [r for _, r in slots if r is not None]
        params = SamplingParams(
            temperature=d.hint_temperature, top_p=d.top_p, top_k=d.top_k, max_tokens=d.hint_max_tokens
        )
        hints = await write_hints(
            self.policy,
            requests,
            params,
            max_words=d.hint_max_words,
            max_chars=d.hint_max_chars,
            prefix=d.hint_prefix,
            max_prompt_tokens=self.max_context - d.hint_max_tokens,
        )
        written = iter(hints)
        by_env: dict[str, list[Hint | None]] = {}
        for env_id, request in slots:  # a seed whose instance failed keeps its place, with no hint
            by_env.setdefault(env_id, []).append(next(written) if request is not None else None)
        return by_env, hint_metrics(hints)

    async def requests(self, record: EnvRecord, step: int) -> list[HintRequest | None]:
        """Code mode: one request, its leaks checked against the first played instance; instance mode: one
        per hinted seed, with that instance's first observation (None where the instance failed to open)."""
        instance = self.designer.hint_mode == "instance"
        n = self.hint_plays if instance else 1
        setting = self.designer.setting
        out: list[HintRequest | None] = []
        for seed in episode_seeds(self.seed, step, record.env_id, n):
            opened = await _first_look(self.runner, record, seed)
            if opened is None:
                out += [None] if instance else []
                continue
            obs, actions = opened
            if instance:
                out.append(HintRequest(record.env_id, record.code, obs, setting, actions))
            else:
                out.append(HintRequest(record.env_id, record.code, None, setting, actions, public=(obs,)))
        return out


async def _first_look(
    runner: EnvRunner, record: EnvRecord, seed: int
) -> tuple[str, tuple[str, ...] | None] | None:
    """The first observation and solution actions of one instance, or None when the sandbox fails."""
    try:
        env = await runner.aopen(record.code, filename=f"<{record.env_id}>")
    except SandboxError:
        return None
    try:
        obs, _ = await env.areset(seed=seed)
        try:
            solution = await env.asolution()
        except NotImplementedError:
            solution = None
    except SandboxError:
        return None
    finally:
        await env.aclose()
    actions = (solution,) if isinstance(solution, str) else tuple(solution) if solution else None
    return obs, actions
