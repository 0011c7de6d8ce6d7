"""The environment designer: slot planning, the design call, code extraction, and what comes back.

One regeneration plans its slots (:func:`plan_slots`: a round-robin window of skills, ``generate`` or
``edit`` mode per slot from a seeded rng), builds one prompt per slot (``spade.prompts``), samples all of
them in one batch (:func:`design`, the only impure part: a thin async call of a :class:`~spade.types.Policy`)
and extracts the code of each completion robustly (:func:`extract_design_code`: reasoning blocks, several
fences, output cut at ``max_tokens``). A failure is a :class:`Design` with a status, never an exception, and
every design with sampled tokens is a (possibly penalised) designer training sample. Hints live in
``spade.design.hints``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from spade import envs
from spade.checker.extract import extract_code, looks_truncated
from spade.design.edits import UNCHANGED, apply_line_edits, build_line_edit_messages
from spade.prompts import (
    DesignRequest,
    Exemplar,
    Mode,
    Negative,
    Truncate,
    build_design_messages,
    truncate_words,
)
from spade.replies import strip_reasoning
from spade.skills import Setting
from spade.types import Completion, FinishReason, Message, Policy, SamplingParams, TrainSample

ExtractStatus = Literal["ok", "no_code", "unchanged", "truncated", "model_error"]
"""``ok``: code found; ``no_code``: the completion holds no code block; ``unchanged``: an edit that rewrites
the parent as it was; ``truncated``: the completion was cut at ``max_tokens`` before the code was complete;
``model_error``: the policy returned nothing usable."""


class ArchivedEnv(Protocol):
    """What the designer reads from a memory record (``spade.memory.EnvRecord`` fits)."""

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
    """A record to avoid with its reasons (``spade.memory.NegativeExample`` fits)."""

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
class Extraction:
    """The code taken out of a completion, or None and why."""

    code: str | None
    status: ExtractStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Design:
    """One designer sample: the prompt, what the policy wrote, the code taken out of it, and its tokens.

    The training sample is the prompt tokens (mask 0) followed by the completion tokens (mask 1);
    ``sample_logprobs_T`` is 0 over the prompt and empty when the engine reported no log-probabilities.
    """

    messages: tuple[Message, ...]
    mode: Mode
    skill: str
    parent_id: str | None
    doc_id: str | None
    completion: str
    code: str | None
    status: ExtractStatus
    detail: str
    tokens_T: tuple[int, ...] = ()
    mask_T: tuple[int, ...] = ()
    sample_logprobs_T: tuple[float, ...] = ()

    @property
    def trainable(self) -> bool:
        """Whether the sample has completion tokens with log-probabilities to train on."""
        return any(self.mask_T) and len(self.sample_logprobs_T) == len(self.tokens_T)

    def train_sample(self, advantage: float, staleness: int = 0) -> TrainSample:
        """The designer training sample with its advantage; raises ValueError when it is not trainable."""
        if not self.trainable:
            raise ValueError("design has no completion tokens with log-probabilities; check trainable first")
        return TrainSample(
            self.tokens_T, self.mask_T, self.sample_logprobs_T, advantage, "designer", staleness
        )


@dataclass(frozen=True, slots=True)
class Slot:
    """One environment to design in a regeneration: its index, target skill and mode."""

    index: int
    skill: str
    mode: Mode


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


def choose_mode(rng: random.Random, edit_fraction: float) -> Mode:
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


# -- extraction ----------------------------------------------------------------------------------------------


def extract_design_code(
    text: str, finish_reason: FinishReason = "stop", error: str | None = None
) -> Extraction:
    """The environment code of a completion, or None with the reason; never raises.

    Uses ``spade.checker.extract_code`` (reasoning blocks dropped, the last Python block defining a class,
    unterminated fences). A completion cut at ``max_tokens`` inside its code block (or inside unfenced code)
    is ``truncated`` even when the prefix happens to parse; one cut after its closing fence is ``ok``. Code
    that merely fails to parse is returned as is, for the checker to report.
    """
    if finish_reason == "error":
        return Extraction(None, "model_error", error or "the policy returned no completion")
    code = extract_code(text)
    cut = finish_reason == "length"
    if code is None or not code.strip():
        if cut:
            return Extraction(
                None, "truncated", "cut at max_tokens before any code; raise designer.max_tokens"
            )
        return Extraction(None, "no_code", "no ```python block after the reasoning")
    if cut and _ends_inside_code(text):
        return Extraction(None, "truncated", "cut at max_tokens inside the code; raise designer.max_tokens")
    return Extraction(code, "ok", "cut at max_tokens after the code" if cut else "")


_PATCH_BLOCK = re.compile(
    r"^<{5,9} ?SEARCH[ \t]*\n(.*?)^={5,9}[ \t]*\n(.*?)^>{5,9} ?REPLACE[ \t]*$", re.DOTALL | re.MULTILINE
)


_PATCH_UNCHANGED = "the patch changes nothing"


def apply_patch(parent: str, text: str) -> tuple[str | None, str]:
    """Apply the SEARCH/REPLACE blocks of ``text`` to ``parent``; returns ``(code, "")`` or ``(None, why)``.

    Each SEARCH text must occur exactly once in the code as patched so far (trailing spaces ignored). A
    patch that changes nothing is refused: it would only re-submit the parent.
    """
    blocks = _PATCH_BLOCK.findall(strip_reasoning(text))
    if not blocks:
        return None, "no SEARCH/REPLACE block"
    code = _rstrip_lines(parent)
    for search, replace in blocks:
        needle = _rstrip_lines(search).rstrip("\n")
        count = code.count(needle) if needle else 0
        if count != 1:
            where = "not found in" if count == 0 else f"found {count} times in"
            return None, f"SEARCH text {where} the parent: copy the lines exactly and include enough context"
        code = code.replace(needle, _rstrip_lines(replace).rstrip("\n"), 1)
    if code == _rstrip_lines(parent):
        return None, _PATCH_UNCHANGED
    return code, ""


def _rstrip_lines(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def extract_patched_code(text: str, parent: str, found: Extraction) -> Extraction:
    """An edit in patch format: the patched parent, else a complete module the reply holds, else why not."""
    code, why = apply_patch(parent, text)
    if code is not None:
        return Extraction(code, "ok", "patch applied")
    if found.code is not None:
        return found
    if why == _PATCH_UNCHANGED:
        return Extraction(None, "unchanged", why)
    return Extraction(None, found.status if found.status != "ok" else "no_code", why)


def _ends_inside_code(text: str) -> bool:
    body = strip_reasoning(text)
    return looks_truncated(text) or ("```" not in body and "~~~" not in body)


# -- policy calls --------------------------------------------------------------------------------------------


def sample_tokens(
    prompt_ids: Sequence[int], completion: Completion
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]]:
    """``(tokens_T, mask_T, sample_logprobs_T)``: prompt (mask 0, logprob 0) then completion (mask 1).

    The log-probabilities are empty when the engine did not report one per completion token.
    """
    tokens = (*prompt_ids, *completion.token_ids_T)
    mask = (0,) * len(prompt_ids) + (1,) * len(completion.token_ids_T)
    reported = len(completion.logprobs_T) == len(completion.token_ids_T)
    logprobs = (0.0,) * len(prompt_ids) + tuple(completion.logprobs_T) if reported else ()
    return tokens, mask, logprobs


async def design(
    policy: Policy,
    requests: Sequence[DesignRequest],
    params: SamplingParams,
    *,
    truncate: Truncate = truncate_words,
    doc_tokens: int = 1024,
    example_chars: int = 3000,
) -> list[Design]:
    """Sample one environment per request in a single batch; failures come back as Designs with a status."""
    messages = [
        build_line_edit_messages(r, example_chars=example_chars, variant=i)
        if _is_line_edit(r)
        else build_design_messages(r, truncate=truncate, doc_tokens=doc_tokens, example_chars=example_chars)
        for i, r in enumerate(requests)
    ]
    prompt_ids = [policy.template.render(m, add_generation_prompt=True) for m in messages]
    completions = await policy.sample(prompt_ids, params) if requests else []
    if len(completions) != len(requests):
        raise RuntimeError(f"policy returned {len(completions)} completions for {len(requests)} prompts")
    designs = []
    for req, msgs, ids, comp in zip(requests, messages, prompt_ids, completions, strict=True):
        found = extract_design_code(comp.text, comp.finish_reason, comp.error)
        if req.mode == "edit" and req.edit_format == "patch" and req.parent is not None:
            found = extract_patched_code(comp.text, req.parent.code, found)
        elif _is_line_edit(req) and req.parent is not None and comp.finish_reason != "error":
            found = extract_line_edit(comp, req.parent.code, example_chars)
        tokens, mask, logprobs = sample_tokens(ids, comp)
        designs.append(
            Design(
                messages=tuple(msgs),
                mode=req.mode,
                skill=req.skill,
                parent_id=req.parent.env_id if req.parent is not None and req.mode == "edit" else None,
                doc_id=req.document.doc_id if req.document is not None else None,
                completion=comp.text,
                code=found.code,
                status=found.status,
                detail=found.detail,
                tokens_T=tokens,
                mask_T=mask,
                sample_logprobs_T=logprobs,
            )
        )
    return designs


def _is_line_edit(req: DesignRequest) -> bool:
    return req.mode == "edit" and req.edit_format == "lines" and req.parent is not None


def extract_line_edit(comp: Completion, parent: str, window_chars: int) -> Extraction:
    """A ``lines`` edit: the parent with the reply's ``N: text`` lines applied, or None and why."""
    cut = comp.finish_reason == "length"
    code, why = apply_line_edits(parent, comp.text, window_chars, cut=cut)
    if code is not None:
        return Extraction(code, "ok", "line edit applied")
    if why == UNCHANGED:
        return Extraction(None, "unchanged", why)
    return Extraction(None, "truncated" if cut and "no `N" in why else "no_code", why)


def design_metrics(designs: Sequence[Design]) -> dict[str, float]:
    """Extraction outcome rates, edit share and mean completion length, under ``designer/``."""
    if not designs:
        return {}
    n = len(designs)
    out = {f"designer/{s}_rate": sum(d.status == s for d in designs) / n for s in get_args(ExtractStatus)}
    out["designer/edit_share"] = sum(d.mode == "edit" for d in designs) / n
    out["designer/sampled_tokens"] = float(sum(sum(d.mask_T) for d in designs))
    out["designer/completion_tokens_mean"] = out["designer/sampled_tokens"] / n
    return out


__all__ = [
    "ArchivedEnv", "ArchivedNegative", "Design", "DesignRequest", "Exemplar", "ExtractStatus", "Extraction",
    "Mode", "Negative", "Slot", "active_skills", "build_design_messages", "choose_example", "choose_mode",
    "design", "design_metrics", "exemplar", "extract_design_code", "negative", "pick_worked_example",
    "plan_slots", "sample_tokens",
]  # fmt: skip
