"""Every model reply turned into a structured value: actions, tool calls, environment code, edits, hints, verdicts.

A reply's reasoning block is dropped first (:func:`strip_reasoning`); then, by purpose: the action an
environment receives (:func:`parse_action`, the ``\\boxed{}`` rules), the environment code of a design
(:func:`extract_code`, :func:`extract_design_code`), the SEARCH/REPLACE blocks and ``N: text`` lines of an edit
(:func:`patch_blocks`, :func:`parse_line_edits`), the text of a hint (:func:`hint_text`) and a review's
verdict (:func:`review_verdict`), the ``<tool_call>`` blocks of a tool-use reply (:func:`extract_tool_calls`;
each block's JSON or XML form is decoded by :mod:`spade.toolcalls`). The actions an environment's
``solution()`` writes are read with the same rules (:func:`tagged_actions`, :func:`all_boxed`,
:func:`prose_actions`, :func:`normalised_answer`).
Environment sandboxes preload this module, so it imports nothing heavy.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from spade.config.types import ActionMode
from spade.pyast import parse_expression, parse_module
from spade.toolcalls import CLOSE, OPEN, decode_block, schemas_by_name
from spade.types import FinishReason, ToolCall, ToolSchema

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_BOXED = "\\boxed"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_FLAT_BOX = re.compile(r"\\boxed\s*\{([^{}]*)\}")
_MODES: tuple[ActionMode, ...] = ("boxed", "boxed_last", "lenient", "raw")


def strip_reasoning(text: str) -> str:
    """Drop reasoning: everything up to the last ``</think>``; an unterminated ``<think>`` drops the rest."""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text


def split_reasoning(text: str) -> tuple[str, str]:
    """``(reasoning, answer)`` of a reply: the reasoning without its ``<think>`` tags (up to the last
    ``</think>``, whose opening tag the chat template may have written already) and the text after it; an
    unterminated ``<think>`` makes the rest reasoning. Either part may be empty."""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        head, answer = text[: closes[-1].start()], text[closes[-1].end() :]
        opened = _THINK_OPEN.search(head)
        return (head[opened.end() :] if opened else head).strip("\n"), answer.lstrip("\n")
    opened = _THINK_OPEN.search(text)
    if opened is None:
        return "", text
    return text[opened.end() :].strip("\n"), text[: opened.start()]


def first_boxed(text: str) -> str | None:
    """The authors' rule: the first ``\\boxed{...}`` whose content holds no braces; when every box nests braces,
    the last complete one (:func:`last_boxed`); None when there is no complete box. An empty box is skipped
    while a later one holds an answer: a reply that restates the released prompt's "within \\boxed{}" before
    answering is read by its answer.

    So ``\\boxed{1} ... \\boxed{2}`` gives ``1``, and ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``.
    """
    flat = next((m.group(1).strip() for m in _FLAT_BOX.finditer(text) if m.group(1).strip()), None)
    if flat is not None:
        return flat
    return last_boxed(text)


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (balanced braces, nesting allowed), or None.

    Runs in linear time: once a later box is found unterminated, no earlier box can close past its opening
    brace (everything from there on stays at depth >= 1), so earlier scans stop at that brace.
    """
    limit = len(text)
    pos = text.rfind(_BOXED)
    while pos != -1:
        brace = _opening_brace(text, pos + len(_BOXED))
        if brace is not None:
            content = _balanced_content(text, brace, limit)
            if content is not None:
                return content.strip()
            limit = brace
        pos = text.rfind(_BOXED, 0, pos)
    return None


def _opening_brace(text: str, start: int) -> int | None:
    """Index of the ``{`` that follows ``start`` after optional whitespace (LaTeX allows it), or None."""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    return i if i < len(text) and text[i] == "{" else None


def _balanced_content(text: str, brace: int, limit: int) -> str | None:
    """Text between ``text[brace] == "{"`` and its matching ``}`` when that lies before ``limit``."""
    depth = 0
    for j in range(brace, limit):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : j]
    return None


def parse_action(text: str, mode: ActionMode = "boxed") -> str:
    """Extract the action from a reply according to ``mode`` (see :data:`ActionMode`)."""
    if mode not in _MODES:
        raise ValueError(f"unknown action mode {mode!r}: use one of {', '.join(_MODES)}")
    body = strip_reasoning(text)
    if mode == "raw":
        return body.strip()
    boxed = last_boxed(body) if mode == "boxed_last" else first_boxed(body)
    if boxed is not None:
        return boxed
    if mode in ("boxed", "boxed_last"):
        return body.strip()
    # Markdown decoration (bold, code fences, quotes) is not an answer: skip lines made only of it.
    lines = [line for raw in body.splitlines() if (line := raw.strip().strip("*`\"'").strip())]
    if not lines:
        return ""
    numbers = _NUMBER.findall(lines[-1])
    if len(numbers) == 1:
        return str(numbers[0])
    return lines[-1].rstrip(".!")


def wrap_boxed(action: str) -> str:
    """Re-wrap an extracted action for environments that parse ``\\boxed{}`` themselves (official format)."""
    return f"\\boxed{{{action}}}"


def all_boxed(text: str) -> list[str]:
    """The contents of every complete ``\\boxed{...}`` in order (each found as :func:`last_boxed` finds it)."""
    out: list[str] = []
    rest = text
    while True:
        content = last_boxed(rest)
        if content is None:
            break
        out.append(content)
        rest = rest[: rest.rfind("\\boxed")]
    return out[::-1]


# -- tagged and prose actions ------------------------------------------------------------------------------

_TAGGED = re.compile(r"<tool_call>.*?</tool_call>|<answer>.*?</answer>", re.DOTALL | re.IGNORECASE)
_ANSWER_ONLY = re.compile(r"^\s*<answer>(.*?)</answer>\s*$", re.DOTALL | re.IGNORECASE)
_ANSWER_TAG = re.compile(r"<answer>.*?</answer>", re.DOTALL | re.IGNORECASE)
_CALL = re.compile(r"\b[A-Za-z_]\w*\((?:[^()'\"]|'[^']*'|\"[^\"]*\")*\)")
_PROSE_ANSWER = re.compile(r"\bANSWER\s*[:=]\s*(.+?)\s*$", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?:,\s+|->|;|\n)\s*")
_NUMBERING = re.compile(r"^\(?\d+[.)]\s+")


def has_answer(text: str) -> bool:
    """Whether a tool-use reply holds an ``<answer>...</answer>`` (its final answer, not a tool call)."""
    return _ANSWER_TAG.search(text) is not None


def tagged_actions(text: str) -> list[str]:
    """Every ``<tool_call>...</tool_call>`` and ``<answer>...</answer>`` of ``text``, tags included, in order."""
    return _TAGGED.findall(text)


def normalised_answer(action: str) -> str:
    """An action without ``<answer>`` tags or a ``\\boxed{}`` wrapper, stripped."""
    match = _ANSWER_ONLY.match(action)
    text = match.group(1) if match else action
    boxed = last_boxed(text)
    return (boxed if boxed is not None else text).strip()


def prose_actions(text: str) -> list[str]:
    """Best-effort actions from a prose solution (the official format returns one string).

    ``name(k=v, ...)`` calls become ``<tool_call>`` actions and ``ANSWER: x`` an ``<answer>``; otherwise the
    text is split on ``, `` / ``->`` / ``;`` / newlines (numbering dropped). Prose that is not a plan
    (long sentences) yields nothing.
    """
    calls = [_call_action(m.group(0)) for m in _CALL.finditer(text)]
    actions = [c for c in calls if c is not None]
    answer = _PROSE_ANSWER.search(text)
    if actions or answer:
        return actions + ([f"<answer>{answer.group(1).strip()}</answer>"] if answer else [])
    pieces = [_NUMBERING.sub("", p).strip() for p in _SPLIT.split(text.strip())]
    pieces = [p for p in pieces if p]
    if not pieces or any(len(p) > 80 or len(p.split()) > 8 for p in pieces):
        return []
    return pieces


def _call_action(text: str) -> str | None:
    try:
        node = parse_expression(text.strip())
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    try:
        args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except ValueError:
        return None
    return "<tool_call>" + json.dumps({"name": node.func.id, "arguments": args}) + "</tool_call>"


# -- environment code --------------------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+.-]*)[^\n]*$", re.MULTILINE)
_PYTHON_TAGS = frozenset({"python", "py", "python3", "py3"})
_CLASS = re.compile(r"^class\s+\w+", re.MULTILINE)

ExtractStatus = Literal["ok", "no_code", "unchanged", "truncated", "model_error"]
"""``ok``: code found; ``no_code``: the completion holds no code block; ``unchanged``: an edit that rewrites
the parent as it was; ``truncated``: the completion was cut at ``max_tokens`` before the code was complete;
``model_error``: the policy returned nothing usable."""


@dataclass(frozen=True, slots=True)
class Extraction:
    """The code taken out of a completion, or None and why."""

    code: str | None
    status: ExtractStatus
    detail: str = ""


def _blocks(text: str) -> tuple[list[tuple[str, str]], bool]:
    """``(tag, body)`` of each fenced block, and whether the last one was cut off (no closing fence)."""
    blocks: list[tuple[str, str]] = []
    pos, truncated = 0, False
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            break
        fence, tag = opening.group(1), opening.group(2).lower()
        body_start = opening.end() + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, body_start)
        if end is None:
            blocks.append((tag, text[body_start:]))
            truncated = True
            break
        blocks.append((tag, text[body_start : end.start()]))
        pos = end.end()
    return blocks, truncated


def extract_code(text: str) -> str | None:
    """The environment code in a model reply, or None when there is none.

    Reasoning blocks are dropped first (code drafted inside ``<think>`` is never taken). Among fenced blocks
    the last Python block (tagged ``python``/``py`` or untagged) that defines a class wins, else the last
    Python block: replies often end with a usage example after the environment. A reply cut off inside a
    fence yields the partial block (the syntax check then reports it). A reply without fences is returned
    whole when it parses as Python and defines a class.
    """
    body = strip_reasoning(text)
    blocks, _ = _blocks(body)
    python = [code for tag, code in blocks if tag in _PYTHON_TAGS or tag == ""]
    if python:
        with_class = [code for code in python if _CLASS.search(code)]
        chosen = (with_class or python)[-1]
        return chosen.strip("\n") + "\n"
    if blocks:
        return None
    stripped = body.strip()
    if not stripped or not _CLASS.search(stripped):
        return None
    try:
        parse_module(stripped)
    except SyntaxError:
        return None
    return stripped + "\n"


def looks_truncated(text: str) -> bool:
    """Whether the reply ends inside an open code fence (a reply cut at the token budget)."""
    return _blocks(strip_reasoning(text))[1]


def extract_design_code(
    text: str, finish_reason: FinishReason = "stop", error: str | None = None
) -> Extraction:
    """The environment code of a completion, or None with the reason; never raises.

    Uses :func:`extract_code` (reasoning blocks dropped, the last Python block defining a class,
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


def _ends_inside_code(text: str) -> bool:
    body = strip_reasoning(text)
    return looks_truncated(text) or ("```" not in body and "~~~" not in body)


# -- edits -------------------------------------------------------------------------------------------------

_PATCH_BLOCK = re.compile(
    r"^<{5,9} ?SEARCH[ \t]*\n(.*?)^={5,9}[ \t]*\n(.*?)^>{5,9} ?REPLACE[ \t]*$", re.DOTALL | re.MULTILINE
)
_LINE = re.compile(r"^\s*[`*]*\s*(?:line\s*)?(\d{1,5})\s*[:.)]\s?(.*?)[`*]*\s*$", re.IGNORECASE)


def patch_blocks(text: str) -> list[tuple[str, str]]:
    """The ``(search, replace)`` texts of a reply's SEARCH/REPLACE blocks, in order (reasoning ignored)."""
    return _PATCH_BLOCK.findall(strip_reasoning(text))


def parse_line_edits(text: str, *, cut: bool = False) -> dict[int, str]:
    """``{line number: new text}`` from a reply (fences and reasoning ignored); ``cut`` drops a partial last line.

    The first edit of a line number wins; lines that are not ``N: text`` are ignored.
    """
    lines = [ln for ln in strip_reasoning(text).splitlines() if not ln.strip().startswith(("```", "~~~"))]
    if cut and lines:
        lines = lines[:-1]
    edits: dict[int, str] = {}
    for line in lines:
        match = _LINE.match(line)
        if match and match.group(2).strip():
            edits.setdefault(int(match.group(1)), match.group(2).strip())
    return edits


# -- hints and reviews -------------------------------------------------------------------------------------

_SPECIAL_TOKEN_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|</?s>")
_HINT_PREFIX_RE = re.compile(r"^\W*hint\W*:\W*", re.IGNORECASE)
_CODE_BLOCK_RE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
"""A fenced code block; an unclosed one runs to the end of the text."""
_JSON_BLOCK_RE = re.compile(r"```json\s*(.*?)```", re.DOTALL)
MIN_PROSE_WORDS = 4
"""Words of prose a hint must keep once its code blocks are dropped."""


def hint_text(text: str) -> tuple[str | None, Literal["ok", "contains_code", "empty"]]:
    """The text of a hint reply on one line, or None and why.

    Strips reasoning blocks and special tokens, takes the ``"hint"`` value of a JSON reply, drops fenced code
    (``contains_code`` when fewer than :data:`MIN_PROSE_WORDS` words of prose are left) and a leading
    ``Hint:``, and joins the words with single spaces.
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
    return body, "ok"


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


def review_verdict(text: str) -> str | None:
    """A review's verdict: the last ``\\boxed{}`` after the reasoning (None when there is none)."""
    return last_boxed(strip_reasoning(text))


# -- tool calls ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCallParse:
    """What a reply's tool-call blocks held."""

    calls: tuple[ToolCall, ...]
    """Calls read in order of appearance."""
    errors: tuple[str, ...]
    """One message per malformed block or call, saying what is wrong and what the right form is."""
    content: str
    """The reply with every tool-call block (well-formed or not) removed, stripped."""


def extract_tool_calls(text: str, tools: Sequence[ToolSchema] | None = None) -> ToolCallParse:
    """All ``<tool_call>`` blocks of ``text``, parsed: the calls, the problems and the remaining content.

    Args:
        text: a model reply (reasoning already stripped, or not: blocks are found anywhere).
        tools: the tool schemas offered to the model; when given, calls to other names are errors and XML
            parameter values are converted by their declared types.
    """
    schemas = schemas_by_name(tools)
    calls: list[ToolCall] = []
    errors: list[str] = []
    pieces: list[str] = []
    pos = 0
    while (start := text.find(OPEN, pos)) >= 0:
        pieces.append(text[pos:start])
        body_start = start + len(OPEN)
        end = text.find(CLOSE, body_start)
        if end < 0:
            errors.append(
                f"unterminated tool call (no {CLOSE}): close every call as {OPEN}...{CLOSE}; "
                "the reply may have been cut at the token budget"
            )
            pos = len(text)
            break
        found, problems = decode_block(text[body_start:end], schemas)
        calls.extend(found)
        errors.extend(problems)
        pos = end + len(CLOSE)
    pieces.append(text[pos:])
    return ToolCallParse(tuple(calls), tuple(errors), "".join(pieces).strip())


def parse_tool_calls(text: str, tools: Sequence[ToolSchema] | None = None) -> list[ToolCall]:
    """The well-formed tool calls of ``text``, malformed blocks skipped (see :func:`extract_tool_calls`)."""
    return list(extract_tool_calls(text, tools).calls)
