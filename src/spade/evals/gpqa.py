"""``gpqa_diamond``: GPQA-Diamond from a local copy (``--data PATH``), scored by the chosen letter.

Data: ``gpqa_diamond.csv`` from the GPQA authors' release (the ``dataset.zip`` of the ``idavidrein/gpqa``
repository, also the file OpenAI's simple-evals reads), or the same rows as JSON Lines or Parquet. Each row
gives ``Question``, ``Correct Answer`` and ``Incorrect Answer 1``-``3``; ``Record ID`` is the item id (the
row number without one) and ``High-level domain`` (Physics, Chemistry, Biology) the category.

Prompt and score (``--param prompt=``): the four answers in an order drawn for the item, one reply.

- ``boxed`` (the default; the paper's avg@8 is on a ``\\boxed{LETTER}`` prompt): the question, the answers as
  ``A) ...`` to ``D) ...``, then "Please reason step by step, and put your final answer, the letter of the
  correct choice (A, B, C or D), within \\boxed{}." The release's own wording is not published with its
  notes, so this is the common boxed-letter form, phrased as the AIME instruction the release uses. The
  choice is the content of the reply's last complete ``\\boxed{}`` once it loses spaces, ``$``, a
  ``\\text{}``/``\\textbf{}``/``\\mathrm{}`` wrapper, parentheses and a final ``.`` or ``)``: one letter A-D
  (either case), scored 1 when it is the correct answer's letter. Anything else (a choice's text, no box)
  scores 0.
- ``simple-evals``: simple-evals' ``gpqa_eval``: the question in its multiple-choice template (``Answer:
  $LETTER`` on the last line, think step by step); the first match of
  ``(?i)Answer[ \\t]*:[ \\t]*\\$?([A-D])\\$?`` is the choice, scored 1 when it is the correct letter.

The order is a permutation drawn with ``random.Random(eval_seed(seed, "gpqa_diamond", record id))``, fixed
per item and the same under both prompts (simple-evals draws one per row and repeat from one stream seeded 0,
so its orders differ from these; the letters are balanced either way).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from spade.config import EvalOptions
from spade.evals.base import EvalError, eval_seed
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
BOXED_TEMPLATE = """
{Question}

A) {A}
B) {B}
C) {C}
D) {D}

Please reason step by step, and put your final answer, the letter of the correct choice (A, B, C or D), \
within \\boxed{{}}.
""".strip()
"""The default prompt: the common boxed-letter form (the module docstring says why not the release's own)."""
_BOX_WRAPPER = re.compile(r"^\\(?:text|textbf|mathrm|mathbf)\{(.*)\}$")
_BOXED_LETTER = re.compile(r"\(?([A-Da-d])\)?[.)]?")
CHOICE_FIELDS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def extract_choice(reply: str) -> str | None:
    """The letter the reply states (first ``Answer: X``), as written (``a`` stays ``a`` and scores 0)."""
    match = ANSWER_PATTERN.search(reply)
    return match.group(1) if match else None


def extract_boxed_choice(reply: str) -> str | None:
    """The letter of the reply's last ``\\boxed{}`` (upper case), or None when it holds no single letter A-D."""
    boxed = last_boxed(reply)
    if boxed is None:
        return None
    cleaned = re.sub(r"[\s$]", "", boxed)
    wrapped = _BOX_WRAPPER.match(cleaned)
    if wrapped:
        cleaned = wrapped.group(1)
    match = _BOXED_LETTER.fullmatch(cleaned)
    return match.group(1).upper() if match else None


PROMPTS: dict[str, tuple[str, Callable[[str], str | None]]] = {
    "boxed": (BOXED_TEMPLATE, extract_boxed_choice),
    "simple-evals": (TEMPLATE, extract_choice),
}
"""``--param prompt=NAME``: the template and the rule that reads the choice (see the module docstring)."""
DEFAULT_PROMPT = "boxed"


def prompt_style(opts: EvalOptions) -> str:
    """The prompt ``opts`` names (``--param prompt=``; default boxed), EvalError for an unknown one."""
    style = str(opts.params.get("prompt", DEFAULT_PROMPT))
    if style not in PROMPTS:
        raise EvalError(f"{SUITE}: unknown --param prompt={style}; choose from: {', '.join(PROMPTS)}")
    return style


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
    style = prompt_style(opts)
    items = [
        _item(f"{path.name} row {k}", i, r, (opts.seed, style))
        for k, (i, r) in enumerate(zip(ids, records, strict=True))
    ]
    return select(SUITE, items, opts, lambda it: (it.item_id, it.category))


def _item(where: str, item_id: str, record: Record, how: tuple[int, str]) -> QAItem:
    seed, style = how
    template, extract = PROMPTS[style]
    question = str(field_of(SUITE, record, ("Question",), where)).strip()
    choices, correct = shuffled(record, item_id, seed, where)
    prompt = template.format(Question=question, **dict(zip(LETTERS, choices, strict=True)))

    def judge(reply: str) -> Verdict:
        chosen = extract(reply)
        return Verdict(1.0 if chosen == correct else 0.0, chosen, None)

    return QAItem(
        item_id=item_id,
        category=str(record.get("High-level domain") or "gpqa"),
        messages=[{"role": "user", "content": prompt}],
        judge=judge,
        detail={"question": question, "choices": choices, "expected": correct, "prompt": style},
    )


class GPQADiamondSuite(LocalQASuite):
    """GPQA-Diamond from ``--data``: the boxed-letter prompt, or simple-evals' (see the module docstring)."""

    name = SUITE
    unit = "question"

    def items(self, opts: EvalOptions) -> list[QAItem]:
        """The selected items of the local copy."""
        return load_items(opts)
