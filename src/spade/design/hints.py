"""Privileged hints: the policy's short strategy note about an environment, and the filter keeping it honest.

The hint is written by a separate, low-temperature call of the same policy. By default it sees the
environment code alone, as the authors do, so one hint holds for every instance the code generates; with
``designer.hint_mode='instance'`` it also sees one instance's first observation and is written per seed.
Reasoning blocks and special tokens are stripped before anything is used, the length is capped, and hints
that contain the literal answer or the winning action sequence are rejected (:func:`leak_reason` states the
rule), because a leaked answer turns hint-based regret into a measure of copying rather than of learnable
difficulty.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from spade import prompts
from spade.backends.template import TurnTemplate
from spade.design.designer import sample_tokens
from spade.prompts import truncate_code
from spade.replies import last_boxed, strip_reasoning
from spade.skills import Setting
from spade.types import ChatTemplate, Message, Policy, SamplingParams

HintReason = Literal[
    "ok", "capped", "empty", "contains_code", "leak_sequence", "leak_final_action", "truncated", "model_error"
]
"""Why :func:`clean_hint` kept or rejected a hint. ``ok`` and ``capped`` (cut to the length cap at a sentence
or word boundary) keep it; every other reason rejects it."""

_SPECIAL_TOKEN_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|</?s>")
_HINT_PREFIX_RE = re.compile(r"^\W*hint\W*:\W*", re.IGNORECASE)
_CODE_BLOCK_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
"""A fenced code block; an unclosed one runs to the end of the text."""
MIN_PROSE_WORDS = 4
"""Words of prose a hint must keep once its code blocks are dropped."""
_MIN_CODE_CHARS = 400
"""Code is not cut below this many characters to fit a hint prompt (see :func:`write_hints`)."""
_JSON_BLOCK_RE = re.compile(r"```json\s*(.*?)```", re.DOTALL)
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
        template = prompts.HINT_SYSTEM_TOOLS_CODE if tools else prompts.HINT_SYSTEM_GAMES_CODE
    else:
        template = prompts.HINT_SYSTEM_TOOLS if tools else prompts.HINT_SYSTEM_GAMES
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

    Strips reasoning blocks and special tokens, takes the ``"hint"`` value of a JSON reply, drops a leading
    ``Hint:``, rejects fenced code, caps the length at ``max_chars`` (at a sentence boundary when one is near)
    and rejects leaks of ``solution`` (the environment's winning actions, when known) per :func:`leak_reason`.
    """
    body = _SPECIAL_TOKEN_RE.sub("", strip_reasoning(text)).strip()
    body = _json_hint(body)
    if "```" in body:  # a small model often quotes code around its advice: keep the advice, if any
        body = _CODE_BLOCK_RE.sub(" ", body)
        if len(body.split()) < MIN_PROSE_WORDS:
            return None, "contains_code"
    body = " ".join(_HINT_PREFIX_RE.sub("", body).split())
    if not body:
        return None, "empty"
    capped = _cap(body, max_chars)
    leak = leak_reason(capped, solution or (), public)
    if leak is not None:
        return None, leak
    return capped, "ok" if capped == body else "capped"


def _json_hint(body: str) -> str:
    block = _JSON_BLOCK_RE.search(body)
    raw = block.group(1) if block else body
    if not raw.lstrip().startswith("{"):
        return body
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return body
    hint = data.get("hint") if isinstance(data, dict) else None
    return hint if isinstance(hint, str) else body


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
