"""``aime``: AIME problems from a local copy (``--data PATH``), scored by the final ``\\boxed{}`` integer.

Data: the AIME datasets as published by AI-MO (``aimo-validation-aime``), HuggingFaceH4
(``aime_2024``), MathArena (``aime_2025``) and others: JSON Lines, JSON, CSV or Parquet (a file or a folder
of them) whose records carry the problem (``problem``, ``Problem`` or ``question``) and the integer answer
(``answer`` or ``Answer``), optionally an id (``id``, ``ID``, ``problem_idx``) and a year (``year``), which
is the item's category (``aime`` without one). Also the release's prepared JSON Lines (what its
``prepare_aime_datasets.py`` writes): each line a ``prompt``, the chat message list to send
(``[{"role": "user", "content": "..."}]``, the ``\\boxed{}`` instruction already in it), and a ``label``,
the integer answer. A record is read in that layout when it has ``prompt`` or ``label`` and no problem field;
a line whose ``prompt`` is not such a list or whose ``label`` is not an integer is an error naming the file
and line.

Prompt: the problem, then "Please reason step by step, and put your final answer within \\boxed{}." (the
prompt of the DeepSeek-R1 and Qwen evaluations) as one user message; the release's layout sends its
``prompt`` as it is. One reply per episode.

Score: 1 when the content of the reply's last complete ``\\boxed{}`` is an integer equal to the answer, else
0. Before comparing, the content loses spaces, ``$``, ``\\,``/``\\!``, thousands separators and a
``\\text{}``/``\\textbf{}``/``\\mathrm{}`` wrapper; leading zeros are allowed (AIME answers are written
``000``-``999``). Anything else (a fraction, an expression, no box) scores 0.
"""

from __future__ import annotations

import re

from spade.config import EvalOptions
from spade.evals.base import EvalError
from spade.evals.chat import Verdict
from spade.evals.localdata import (
    LocalQASuite,
    QAItem,
    Record,
    data_path,
    field_of,
    read_located,
    select,
    unique_ids,
)
from spade.replies import last_boxed
from spade.types import Message

SUITE = "aime"
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
PROBLEM_FIELDS = ("problem", "Problem", "question")
ANSWER_FIELDS = ("answer", "Answer")
ID_FIELDS = ("id", "ID", "problem_idx")
RELEASE_FIELDS = ("prompt", "label")
"""The release's prepared layout: the chat messages to send and the answer."""
_ROLES = frozenset({"system", "user", "assistant"})
_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mathbf)\{(.*)\}$")
_NOISE = re.compile(r"\\[,!;: ]|\$|\s|(?<=\d),(?=\d{3}\b)")


def parse_integer(text: str | None) -> int | None:
    """The integer a boxed answer states (see the module docstring), or None when it states none."""
    if text is None:
        return None
    cleaned = _NOISE.sub("", text)
    wrapped = _WRAPPER.match(cleaned)
    if wrapped:
        cleaned = wrapped.group(1)
    if not re.fullmatch(r"[+-]?\d+", cleaned):
        return None
    return int(cleaned)


def score_reply(reply: str, answer: int) -> tuple[float, str | None]:
    """``(1.0, boxed)`` when the last ``\\boxed{}`` states ``answer``; ``(0.0, boxed)`` otherwise."""
    boxed = last_boxed(reply)
    return (1.0 if parse_integer(boxed) == answer else 0.0), boxed


def load_items(opts: EvalOptions) -> list[QAItem]:
    """The selected problems of the local copy (EvalError for a bad path or a record without the fields)."""
    located = read_located(SUITE, data_path(SUITE, opts))
    ids = unique_ids([_record_id(r, k) for k, (_, r) in enumerate(located)])
    items = [_item(where, i, r) for i, (where, r) in zip(ids, located, strict=True)]
    return select(SUITE, items, opts, lambda it: (it.item_id, it.category))


def _record_id(record: Record, k: int) -> str:
    """The record's own id, else its position in the file."""
    return next((str(record[f]) for f in ID_FIELDS if record.get(f) is not None), str(k))


def is_release_record(record: Record) -> bool:
    """Whether ``record`` is in the release's prepared layout (``prompt`` + ``label``, no problem field)."""
    return any(f in record for f in RELEASE_FIELDS) and not any(f in record for f in PROBLEM_FIELDS)


def _item(where: str, item_id: str, record: Record) -> QAItem:
    release = is_release_record(record)
    if release:
        messages = release_messages(where, record.get("prompt"))
        question = str(messages[-1]["content"])
        raw = field_of(SUITE, record, ("label",), where)
    else:
        question = str(field_of(SUITE, record, PROBLEM_FIELDS, where))
        messages = [{"role": "user", "content": f"{question}\n{INSTRUCTION}"}]
        raw = field_of(SUITE, record, ANSWER_FIELDS, where)
    answer = parse_integer(None if raw is None else str(raw))
    if answer is None:
        name = "label" if release else "answer"
        raise EvalError(f"{SUITE}: {where} has the {name} {raw!r}, not an integer (AIME answers are 0-999)")

    def judge(reply: str) -> Verdict:
        score, boxed = score_reply(reply, answer)
        return Verdict(score, boxed, None)

    return QAItem(
        item_id=item_id,
        category=str(record.get("year") or "aime"),
        messages=messages,
        judge=judge,
        detail={"question": question, "expected": str(answer)},
    )


def release_messages(where: str, prompt: object) -> list[Message]:
    """The release's ``prompt``: a non-empty list of ``{"role", "content"}`` messages ending with the user's
    (EvalError naming ``where`` otherwise)."""
    if (
        not isinstance(prompt, list)
        or not prompt
        or not all(_is_message(m) for m in prompt)
        or prompt[-1]["role"] != "user"
    ):
        shown = repr(prompt)
        raise EvalError(
            f"{SUITE}: {where}: 'prompt' must be a chat message list ending with the user's, "
            f'[{{"role": "user", "content": "..."}}] (got {shown[:80]}{"..." if len(shown) > 80 else ""})'
        )
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def _is_message(message: object) -> bool:
    return (
        isinstance(message, dict)
        and message.get("role") in _ROLES
        and isinstance(message.get("content"), str)
    )


class AIMESuite(LocalQASuite):
    """AIME from ``--data``: the last ``\\boxed{}`` integer against the answer (see the module docstring)."""

    name = SUITE
    unit = "problem"

    def items(self, opts: EvalOptions) -> list[QAItem]:
        """The selected items of the local copy."""
        return load_items(opts)
