"""The `lines` edit format: numbered window, parsing, applying, and the designer call that uses it."""

from __future__ import annotations

import asyncio

import pytest

from spade import envs
from spade.design import designer
from spade.design.edits import (
    apply_line_edits,
    build_line_edit_messages,
    excerpt_window,
    mechanical_edit,
    numbered,
)
from spade.design.prompts import DesignRequest, Exemplar
from spade.replies import parse_line_edits
from spade.types import Completion, SamplingParams
from test_designer import FakePolicy

PARENT = '''"""Doc."""
import re

# (size, budget)
LEVELS = (
    (4, 6),
    (5, 7),
)


class A:
    def f(self):
        return 1
'''


def test_window_covers_the_constants_and_numbering_uses_real_line_numbers() -> None:
    first, last = excerpt_window(PARENT, 60)
    assert first <= 6
    assert last >= 7
    text = numbered(PARENT, first, last)
    assert "6:     (4, 6)," in text.splitlines()
    code = envs.spec("countdown").source()
    first, last = excerpt_window(code, 700)
    shown = numbered(code, first, last)
    assert shown.splitlines()[1].startswith(f"{first + 1}: LEVELS")  # the level table and its comment
    assert "(4, 9," in shown


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("6: (4, 8),", {6: "(4, 8),"}),
        ("```\n6:     (4, 8),\n```", {6: "(4, 8),"}),
        ("`6: (4, 8),`\nLine 7: (9, 9),", {6: "(4, 8),", 7: "(9, 9),"}),
        ("I would change it.", {}),
    ],
)
def test_parse_line_edits(reply: str, expected: dict[int, str]) -> None:
    assert parse_line_edits(reply) == expected


def test_apply_keeps_indentation_and_refuses_bad_edits() -> None:
    code, why = apply_line_edits(PARENT, "6: (4, 9),", 60)
    assert why == ""
    assert code is not None
    assert code.splitlines()[5] == "    (4, 9),"
    assert apply_line_edits(PARENT, "6:     (4, 6),", 60) == (None, "the edit changes nothing")
    assert apply_line_edits(PARENT, "no edit here", 60)[0] is None
    code, why = apply_line_edits(PARENT, "13:         return 2", 60)
    assert code is None
    assert "outside" in why
    cut_code, _ = apply_line_edits(PARENT, "6: (4, 9),\n7: (5,", 60, cut=True)
    assert cut_code is not None
    assert "(5,\n" not in cut_code


def test_designer_lines_edit_end_to_end() -> None:
    source = envs.spec("countdown").source()
    parent = Exemplar("countdown", source, "mathematical_reasoning", 0.8, 0.1)
    req = DesignRequest("mathematical_reasoning", "edit", "", parent=parent, edit_format="lines")
    msgs = build_line_edit_messages(req, example_chars=700)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "make it harder" in str(msgs[-1]["content"])
    first, _ = excerpt_window(source, 700)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if text.strip().startswith("(4, 9,"))
    assert line >= first
    policy = FakePolicy(
        [
            Completion(f'{line}: (4, 9, "+-", (8, 40), 6),', (1, 2, 3), (-0.1,) * 3, "stop"),
            Completion("I like this game.", (1, 2), (-0.1,) * 2, "stop"),
            Completion(f"{line}: {source.splitlines()[line - 1].strip()}", (1, 2), (-0.1,) * 2, "stop"),
        ]
    )
    designs = asyncio.run(
        designer.design(policy, [req, req, req], SamplingParams(max_tokens=48), example_chars=700)
    )
    assert designs[0].status == "ok"
    assert designs[0].code is not None
    assert '(4, 9, "+-", (8, 40), 6),' in designs[0].code
    assert designs[0].code.count("\n") == source.count("\n")
    assert designs[1].code is None
    assert designs[1].status == "no_code"
    assert (designs[2].code, designs[2].status) == (None, "unchanged")
    assert designs[0].parent_id == "countdown"


def test_a_window_ending_on_empty_last_lines_is_edited_within_the_code() -> None:
    # The scripted designer rebuilds code from shown lines, and a shown window may end on blank lines that
    # splitlines() drops: the edit stays within the code instead of indexing past it.
    code = "LEVELS = [\n    (3, 12, 12),\n]\n\n"
    assert mechanical_edit(code, (1, 5), 0) == (2, "(4, 12, 12),")


def test_worked_example_is_a_mechanical_edit_of_the_same_lines() -> None:
    source = envs.spec("sokoban").source()
    window = excerpt_window(source, 700)
    edits = {mechanical_edit(source, window, v) for v in range(6)}
    assert len(edits) == 6  # each request of a regeneration shows a different worked edit
    for edit in edits:
        assert edit is not None
        code, why = apply_line_edits(source, f"{edit[0]}: {edit[1]}", 700)
        assert why == ""
        assert code is not None
    parent = Exemplar("sokoban", source, "spatial_reasoning", None, None)
    req = DesignRequest("spatial_reasoning", "edit", "", parent=parent, edit_format="lines")
    msgs = build_line_edit_messages(req, example_chars=700, variant=1)
    assert msgs[2]["content"] == "{}: {}".format(*mechanical_edit(source, window, 1))  # type: ignore[str-format]
    assert mechanical_edit("x = 'a'\n", (1, 1), 0) is None


@pytest.mark.parametrize("name", ["combination_lock", "seating", "countdown", "sokoban", "switchboard"])
def test_the_scripted_designer_eases_every_level_differently_per_request(name: str) -> None:
    """cpu-tiny's designer asks for line edits of seed games: the scripted `valid` designer answers each
    request of a regeneration (its worked edit's variant) with its own edit that applies and parses."""
    from spade.scripted.policy import ByteTemplate, ScriptedPolicy  # noqa: PLC0415

    spec = envs.spec(name)
    parent = Exemplar(spec.name, spec.source(), spec.skill, None, None)
    request = DesignRequest(spec.skill, "edit", "", parent=parent, edit_format="lines")
    codes = []
    for variant in range(4):
        messages = build_line_edit_messages(request, example_chars=700, variant=variant)
        prompt = ByteTemplate().render(messages, add_generation_prompt=True)
        text = asyncio.run(ScriptedPolicy("valid").sample([prompt], SamplingParams(max_tokens=4096)))[0].text
        code, why = apply_line_edits(parent.code, text, 700)
        assert code is not None, (variant, text, why)
        compile(code, name, "exec")
        codes.append(code)
    assert len(set(codes)) == 4
