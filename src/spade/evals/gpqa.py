"""``gpqa_diamond``: GPQA-Diamond from a local copy (``--data PATH``), scored by the chosen letter.

Data: ``gpqa_diamond.csv`` from the GPQA authors' release (the ``dataset.zip`` of the ``idavidrein/gpqa``
repository, also the file OpenAI's simple-evals reads), or the same rows as JSON Lines or Parquet. Each row
gives ``Question``, ``Correct Answer`` and ``Incorrect Answer 1``-``3``; ``Record ID`` is the item id (the
row number without one) and ``High-level domain`` (Physics, Chemistry, Biology) the category.

Prompt and score: simple-evals' ``gpqa_eval``: the four answers in an order drawn for the item, the question
in its multiple-choice template (``Answer: $LETTER`` on the last line, think step by step), one reply; the
first match of ``(?i)Answer[ \\t]*:[ \\t]*\\$?([A-D])\\$?`` is the choice, scored 1 when it is the correct
answer's letter. The order is a permutation drawn with ``random.Random(eval_seed(seed, "gpqa_diamond",
record id))``, fixed per item (simple-evals draws one per row and repeat from one stream seeded 0, so its
orders differ from these; the letters are balanced either way).
"""

from __future__ import annotations

import random
import re

from spade.config import EvalOptions
from spade.evals.base import eval_seed
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

SUITE = "gpqa_diamond"
LETTERS = "ABCD"
TEMPLATE = """
Answer the following multiple choice question. The last line of your response should be of the following \
format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step before answering.

{Question}

A) {A}
B) {B}
C) {C}
D) {D}
""".strip()
"""simple-evals' ``QUERY_TEMPLATE_MULTICHOICE``."""
ANSWER_PATTERN = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?")
"""simple-evals' ``ANSWER_PATTERN_MULTICHOICE``."""
CHOICE_FIELDS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def extract_choice(reply: str) -> str | None:
    """The letter the reply states (first ``Answer: X``), as written (``a`` stays ``a`` and scores 0)."""
    match = ANSWER_PATTERN.search(reply)
    return match.group(1) if match else None


def shuffled(record: Record, item_id: str, seed: int, where: str) -> tuple[list[str], str]:
    """The four answers in the item's order and the correct answer's letter."""
    choices = [str(field_of(SUITE, record, (name,), where)).strip() for name in CHOICE_FIELDS]
    order = random.Random(eval_seed(seed, SUITE, item_id)).sample(range(4), 4)
    ordered = [choices[i] for i in order]
    return ordered, LETTERS[order.index(0)]


def load_items(opts: EvalOptions) -> list[QAItem]:
    """The selected questions of the local copy (EvalError for a bad path or rows without the fields)."""
    path = data_path(SUITE, opts)
    records = read_records(SUITE, path)
    ids = unique_ids([str(r.get("Record ID") or k) for k, r in enumerate(records)])
    items = [
        _item(f"{path.name} row {k}", i, r, opts.seed)
        for k, (i, r) in enumerate(zip(ids, records, strict=True))
    ]
    return select(SUITE, items, opts, lambda it: (it.item_id, it.category))


def _item(where: str, item_id: str, record: Record, seed: int) -> QAItem:
    question = str(field_of(SUITE, record, ("Question",), where)).strip()
    choices, correct = shuffled(record, item_id, seed, where)
    prompt = TEMPLATE.format(Question=question, **dict(zip(LETTERS, choices, strict=True)))

    def judge(reply: str) -> Verdict:
        chosen = extract_choice(reply)
        return Verdict(1.0 if chosen == correct else 0.0, chosen, None)

    return QAItem(
        item_id=item_id,
        category=str(record.get("High-level domain") or "gpqa"),
        messages=[{"role": "user", "content": prompt}],
        judge=judge,
        detail={"question": question, "choices": choices, "expected": correct},
    )


class GPQADiamondSuite(LocalQASuite):
    """GPQA-Diamond from ``--data``: simple-evals' prompt and letter rule (see the module docstring)."""

    name = SUITE
    unit = "question"

    def items(self, opts: EvalOptions) -> list[QAItem]:
        """The selected items of the local copy."""
        return load_items(opts)
