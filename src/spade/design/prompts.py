"""Designer prompts: the data a prompt is built from and its assembly into chat messages (the texts are in
:mod:`spade.design.prompt_texts`).

A designer prompt is a system role, then one user message with the grounding document (truncated to a token
budget), the target skill and difficulty, the native interface contract of SPEC §3 (subclass ``TextEnv`` /
``ToolEnv``, ``ENV = ClassName``, ``_reset`` drawing only from ``self.rng``, ``step`` returning through
``self.end_turn``, ``solution()``, ``max_turns``, standard library only) with one complete worked example (a
seed environment), up to k memory examples with their win rate and regret, negative examples with the reason
they failed, and the instruction to create a different environment. ``edit`` mode shows a parent
environment's full code instead of the examples and asks for the complete modified file (ACCEL-style: a rule,
a constant, the win condition or the observation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from spade.config.skills import setting_of, skills_for
from spade.config.types import Difficulty
from spade.design import tool_prompts
from spade.design.prompt_texts import (
    CONTRACT_GAMES,
    CONTRACT_TOOLS,
    DIFFICULTY_RULES,
    EDIT_INSTRUCTION,
    EDIT_INSTRUCTION_PATCH,
    SKILL_DESCRIPTIONS,
    SYSTEM_GAMES,
    SYSTEM_TOOLS,
    generate_instruction,
)
from spade.types import CorpusDoc, Message

EditFormat = Literal["file", "patch", "lines"]
"""``file``: the edit is the complete modified module; ``patch``: SEARCH/REPLACE blocks applied to the parent;
``lines``: numbered lines of the parent rewritten as ``N: text`` (see ``spade.design.edits``)."""
DesignKind = Literal["generate", "edit"]
"""``generate``: write an environment from scratch; ``edit``: mutate a parent environment from memory."""
ToolContract = Literal["single", "multi_turn"]
"""Tool-use environments: one task checked by the answer, or the authors' multi-turn instruction contract."""


Truncate = Callable[[str, int], str]
"""``truncate(text, n_tokens)``: the longest prefix of ``text`` within ``n_tokens`` tokens."""


@dataclass(frozen=True, slots=True)
class Exemplar:
    """An environment from memory shown to the designer (a positive example or an edit parent)."""

    env_id: str
    code: str
    skill: str
    win_rate: float | None
    """Latest agent win rate; None when it was never played (e.g. a seed environment)."""
    regret: float | None


@dataclass(frozen=True, slots=True)
class Negative:
    """An environment to avoid, with why: checker findings (``"code: message"``) or a calibration verdict."""

    env_id: str
    skill: str
    reasons: tuple[str, ...]
    code: str = ""
    """Optional code, shown as a short excerpt."""


@dataclass(frozen=True, slots=True)
class DesignRequest:
    """Everything one designer prompt is built from."""

    skill: str
    mode: DesignKind
    worked_example: str
    """Complete source of a seed environment of the same setting, or an outline of the interface with
    ``sketch`` (ignored in ``edit`` mode)."""
    sketch: bool = False
    """``worked_example`` is an outline with elided bodies (``designer.example='sketch'``, as released)."""
    document: CorpusDoc | None = None
    difficulty: Difficulty = "medium"
    examples: tuple[Exemplar, ...] = ()
    negatives: tuple[Negative, ...] = ()
    parent: Exemplar | None = None
    """The environment to mutate; required in ``edit`` mode."""
    edit_format: EditFormat = "file"
    """``edit`` mode: ask for the complete modified file or for SEARCH/REPLACE blocks."""
    tool_contract: ToolContract = "single"
    """Tool-use skills: the contract asked for (``multi_turn`` needs ``domain`` and ``task_type``)."""
    domain: str = ""
    """``multi_turn``: the realistic domain (a key of ``spade.design.tool_prompts.DOMAINS``)."""
    task_type: str = ""
    """``multi_turn``: the task type (a key of ``spade.design.tool_prompts.TASK_TYPES``)."""

    def __post_init__(self) -> None:
        setting_of(self.skill)  # raises ValueError naming the known skills
        if self.mode == "edit" and self.parent is None:
            raise ValueError("edit mode needs a parent environment; pass parent= or use mode='generate'")
        if self.tool_contract == "multi_turn":
            if setting_of(self.skill) != "tool_use":
                raise ValueError("tool_contract='multi_turn' needs a tool-use skill")
            tool_prompts.task_block(self.domain, self.task_type)  # raises ValueError naming the known ones


# -- prompt assembly -----------------------------------------------------------------------------------------


def truncate_words(text: str, n_words: int) -> str:
    """A whitespace-word truncator (the fallback :data:`Truncate` when no tokenizer is at hand)."""
    words = text.split()
    return text if len(words) <= n_words else " ".join(words[:n_words])


def truncate_code(code: str, max_chars: int) -> str:
    """``code`` cut to whole lines within ``max_chars``, preferring a method boundary, with a visible marker.

    The cut never splits a line; it backs off to the last blank line or ``def``/``class`` line when that keeps
    at least half the budget, and ends with a comment saying how many lines were left out.
    """
    if len(code) <= max_chars:
        return code
    lines = code.splitlines()
    kept, size = 0, 0
    while kept < len(lines) and size + len(lines[kept]) + 1 <= max_chars:
        size += len(lines[kept]) + 1
        kept += 1
    boundary = kept  # lines[boundary] is the first line left out; cut just before a blank or def line
    while 0 < boundary < len(lines) and not _is_boundary(lines[boundary]):
        boundary -= 1
    if sum(len(ln) + 1 for ln in lines[:boundary]) >= max_chars // 2:
        kept = boundary
    body = "\n".join(lines[:kept]).rstrip()
    omitted = len(lines) - len(body.splitlines())
    return f"{body}\n# ... [truncated for this prompt: {omitted} more lines not shown; the file is complete]"


def _is_boundary(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(("def ", "class ", "@"))


def _document_block(doc: CorpusDoc | None, truncate: Truncate, doc_tokens: int) -> str:
    if doc is None or not doc.text.strip():
        return ""
    text = truncate(doc.text, doc_tokens)
    if len(text) < len(doc.text.rstrip()):
        text = text.rstrip() + "\n[... document truncated]"
    title = f"Title: {doc.title}\n" if doc.title else ""
    return f"<REFERENCE_DOCUMENT>\n{title}{text}\n</REFERENCE_DOCUMENT>"


def _target_block(skill: str, difficulty: Difficulty) -> str:
    name = skills_for(setting_of(skill))[skill]
    return (
        f"TARGET SKILL: {name} (`{skill}`). {SKILL_DESCRIPTIONS[skill]}\n"
        f"DIFFICULTY: {DIFFICULTY_RULES[difficulty]}"
    )


def _examples_block(examples: Sequence[Exemplar], example_chars: int) -> str:
    if not examples:
        return ""
    parts = [
        "ENVIRONMENTS FROM MEMORY (well calibrated for the current agent; take inspiration, "
        "but create a DIFFERENT environment):"
    ]
    for i, ex in enumerate(examples, 1):
        header = f"### Memory example {i} ({_stats(ex)})"
        parts.append(f"{header}\n```python\n{truncate_code(ex.code, example_chars)}\n```")
    return "\n\n".join(parts)


def _negatives_block(negatives: Sequence[Negative], example_chars: int) -> str:
    if not negatives:
        return ""
    parts = ["AVOID environments like these (they were rejected or badly calibrated):"]
    for neg in negatives:
        reasons = "; ".join(neg.reasons) or "rejected"
        part = f"- {neg.env_id} ({neg.skill}): {reasons}"
        if neg.code:
            part += f"\n```python\n{truncate_code(neg.code, max(200, example_chars // 4))}\n```"
        parts.append(part)
    return "\n".join(parts)


def _stats(ex: Exemplar) -> str:
    if ex.win_rate is None:
        return f"{ex.skill}; not played yet"
    regret = "not measured" if ex.regret is None else f"{ex.regret:.2f}"
    return f"{ex.skill}; agent win rate {ex.win_rate:.2f}; regret {regret}"


def _edit_advice(win_rate: float | None) -> str:
    if win_rate is None:
        return "The parent has not been played yet: keep the difficulty, change the challenge."
    if win_rate > 0.6:
        return f"The agent wins {win_rate:.0%} of the parent's episodes: make the new one harder."
    if win_rate < 0.3:
        return f"The agent wins {win_rate:.0%} of the parent's episodes: make the new one a little easier."
    return (
        f"The agent wins {win_rate:.0%} of the parent's episodes: keep the difficulty, change the challenge."
    )


def build_design_messages(
    req: DesignRequest,
    *,
    truncate: Truncate = truncate_words,
    doc_tokens: int = 1024,
    example_chars: int = 3000,
) -> list[Message]:
    """The chat messages of one designer prompt (see the module docstring for the layout).

    With the multi-turn tool contract the fixed domain and task type come first and the document (if any)
    follows as optional flavour; without a document the closing instruction does not cite one.
    """
    tools = setting_of(req.skill) == "tool_use"
    multi = tools and req.tool_contract == "multi_turn"
    document = _document_block(req.document, truncate, doc_tokens)
    target = _target_block(req.skill, req.difficulty)
    if multi:
        contract = tool_prompts.CONTRACT_TOOLS_MULTI_TURN.format(skill=req.skill)
        head = [target, tool_prompts.task_block(req.domain, req.task_type)]
        flavour = tool_prompts.flavour_block(document)
        closing = tool_prompts.MULTI_TURN_INSTRUCTION
    else:
        contract = (CONTRACT_TOOLS if tools else CONTRACT_GAMES).format(skill=req.skill)
        head, flavour = [document, target], ""
        closing = generate_instruction(tools, grounded=bool(document))
    if req.mode == "edit":
        body = _edit_blocks(req, contract, example_chars)
        closing = (EDIT_INSTRUCTION_PATCH if req.edit_format == "patch" else EDIT_INSTRUCTION).format(
            advice=_edit_advice(req.parent.win_rate if req.parent is not None else None)
        )
    else:
        shown = (
            "AN OUTLINE of this interface" if req.sketch else "A COMPLETE WORKED EXAMPLE of this interface"
        )
        body = [
            f"{contract}\n\n{shown}:\n```python\n{req.worked_example.rstrip()}\n```",
            _examples_block(req.examples, example_chars),
            _negatives_block(req.negatives, example_chars),
        ]
    system = SYSTEM_TOOLS if tools else SYSTEM_GAMES
    user = "\n\n".join(b for b in [*head, *body, flavour, closing] if b)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _edit_blocks(req: DesignRequest, contract: str, example_chars: int) -> list[str]:
    parent = req.parent
    if parent is None:
        raise ValueError("edit mode needs a parent environment; pass parent= or use mode='generate'")
    # A patch only needs the lines it changes, so a long parent is shown cut (at a line boundary).
    patch = req.edit_format == "patch"
    shown = truncate_code(parent.code, example_chars) if patch else parent.code
    return [
        contract,
        f"PARENT ENVIRONMENT `{parent.env_id}` ({_stats(parent)}), "
        + ("code (edit only lines shown here):" if patch and shown != parent.code else "complete code:")
        + f"\n```python\n{shown.rstrip()}\n```",
        _negatives_block(req.negatives, example_chars),
    ]
