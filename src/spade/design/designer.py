"""The design call: one batch of prompts sampled, the code taken out of each reply, and what comes back.

:func:`design` builds one prompt per request (``spade.design.prompts``, or :mod:`spade.design.edits` for ``lines``
edits), samples all of them in one batch (the only impure part: a thin async call of a
:class:`~spade.types.Policy`) and takes the code out of each completion (:func:`spade.replies.extract_design_code`,
a SEARCH/REPLACE patch or ``N: text`` lines applied to the parent). A failure is a :class:`Design` with a
status, never an exception, and every design with sampled tokens is a (possibly penalised) designer
training sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from spade.design.edits import UNCHANGED, apply_line_edits, build_line_edit_messages
from spade.design.prompts import DesignKind, DesignRequest, Truncate, build_design_messages, truncate_words
from spade.replies import Extraction, ExtractStatus, extract_design_code, patch_blocks
from spade.types import Completion, Message, Policy, SamplingParams, TrainSample


@dataclass(frozen=True, slots=True)
class Design:
    """One designer sample: the prompt, what the policy wrote, the code taken out of it, and its tokens.

    The training sample is the prompt tokens (mask 0) followed by the completion tokens (mask 1);
    ``sample_logprobs_T`` is 0 over the prompt and empty when the engine reported no log-probabilities.
    """

    messages: tuple[Message, ...]
    mode: DesignKind
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


# -- edits ----------------------------------------------------------------------------------------------------

_PATCH_UNCHANGED = "the patch changes nothing"


def apply_patch(parent: str, blocks: Sequence[tuple[str, str]]) -> tuple[str | None, str]:
    """Apply SEARCH/REPLACE ``blocks`` (a reply's :func:`~spade.replies.patch_blocks`) to ``parent``; returns
    ``(code, "")`` or ``(None, why)``.

    Each SEARCH text must occur exactly once in the code as patched so far (trailing spaces ignored). A
    patch that changes nothing is refused: it would only re-submit the parent.
    """
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


def patched_code(parent: str, blocks: Sequence[tuple[str, str]], found: Extraction) -> Extraction:
    """An edit in patch format: the patched parent, else the complete module the reply holds (``found``), else
    why not."""
    code, why = apply_patch(parent, blocks)
    if code is not None:
        return Extraction(code, "ok", "patch applied")
    if found.code is not None:
        return found
    if why == _PATCH_UNCHANGED:
        return Extraction(None, "unchanged", why)
    return Extraction(None, found.status if found.status != "ok" else "no_code", why)


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
            found = patched_code(req.parent.code, patch_blocks(comp.text), found)
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
