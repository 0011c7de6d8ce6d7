"""``aime``: AIME problems from a local copy (``--data PATH``), scored by the final ``\\boxed{}`` integer.

Data: the AIME datasets as published by AI-MO (``aimo-validation-aime``), HuggingFaceH4
(``aime_2024``), MathArena (``aime_2025``) and others: JSON Lines, JSON, CSV or Parquet (a file or a folder
of them) whose records carry the problem (``problem``, ``Problem`` or ``question``) and the integer answer
(``answer`` or ``Answer``), optionally an id (``id``, ``ID``, ``problem_idx``) and a year (``year``), which
is the item's category (``aime`` without one).

Prompt: the problem, then "Please reason step by step, and put your final answer within \\boxed{}." (the
prompt of the DeepSeek-R1 and Qwen evaluations) as one user message; one reply per episode.

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
    read_records,
    select,
    unique_ids,
)
from spade.replies import last_boxed

SUITE = "aime"
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
PROBLEM_FIELDS = ("problem", "Problem", "question")
ANSWER_FIELDS = ("answer", "Answer")
ID_FIELDS = ("id", "ID", "problem_idx")
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
    path = data_path(SUITE, opts)
    records = read_records(SUITE, path)
    ids = unique_ids([_record_id(r, k) for k, r in enumerate(records)])
    items = [_item(path.name, k, i, r) for k, (i, r) in enumerate(zip(ids, records, strict=True))]
    return select(SUITE, items, opts, lambda it: (it.item_id, it.category))


def _record_id(record: Record, k: int) -> str:
    """The record's own id, else its position in the file."""
    return next((str(record[f]) for f in ID_FIELDS if record.get(f) is not None), str(k))


def _item(source: str, k: int, item_id: str, record: Record) -> QAItem:
    where = f"{source} record {k}"
    problem = str(field_of(SUITE, record, PROBLEM_FIELDS, where))
    raw = field_of(SUITE, record, ANSWER_FIELDS, where)
    answer = parse_integer(str(raw))
    if answer is None:
        raise EvalError(f"{SUITE}: {where} has the answer {raw!r}, not an integer (AIME answers are 0-999)")

    def judge(reply: str) -> Verdict:
        score, boxed = score_reply(reply, answer)
        return Verdict(score, boxed, None)

    return QAItem(
        item_id=item_id,
        category=str(record.get("year") or "aime"),
        messages=[{"role": "user", "content": f"{problem}\n{INSTRUCTION}"}],
        judge=judge,
        detail={"question": problem, "expected": str(answer)},
    )


class AIMESuite(LocalQASuite):
    """AIME from ``--data``: the last ``\\boxed{}`` integer against the answer (see the module docstring)."""

    name = SUITE
    unit = "problem"

    def items(self, opts: EvalOptions) -> list[QAItem]:
        """The selected items of the local copy."""
        return load_items(opts)
