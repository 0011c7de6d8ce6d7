"""Action parsing: reasoning blocks, \\boxed{} extraction and the three modes, on nasty inputs."""

from __future__ import annotations

import pytest

from spade.replies import first_boxed, last_boxed, parse_action, strip_reasoning, wrap_boxed


# -- strip_reasoning ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>let me see</think> up", " up"),
        ("<THINK>a</Think>b", "b"),
        ("<think>one</think> mid <think>two</think> end", " end"),
        ("<think>never closed \\boxed{3}", ""),
        ("before <think>never closed", "before "),
        ("</think> only a close", " only a close"),
        ("no reasoning at all", "no reasoning at all"),
        ("<think>a</think> answer <think>restarted", " answer "),
        ("", ""),
    ],
)
def test_strip_reasoning(text: str, expected: str) -> None:
    assert strip_reasoning(text) == expected


# -- last_boxed -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{7}", "7"),
        ("\\boxed{ pour A B }", "pour A B"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{{a}{b}}", "{a}{b}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("\\boxed{1} and an unterminated \\boxed{2", "1"),
        ("\\boxed{3", None),
        ("\\boxed {7}", "7"),
        ("\\boxed\n{7}", "7"),
        ("\\boxed{}", ""),
        ("\\boxed{\\boxed{5}}", "5"),
        ("\\boxed{a} \\boxed no brace", "a"),
        ("\\\\boxed{9}", "9"),
        ("no box here", None),
        ("", None),
        ("}{ \\boxed}{", None),
        ("\\boxed{a \\boxed b}", "a \\boxed b"),
        ("\\boxed{x {y} \\boxed{z", None),
        ("\\boxed{x {y}} \\boxed{z", "x {y}"),
    ],
)
def test_last_boxed(text: str, expected: str | None) -> None:
    assert last_boxed(text) == expected


# -- first_boxed (the authors' rule) ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{7}", "7"),
        ("first \\boxed{1} then \\boxed{2}", "1"),
        ("\\boxed{ pour A B } and \\boxed{x}", "pour A B"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # every box nests braces: the last complete one
        ("\\boxed{\\frac{1}{2}} then \\boxed{b}", "b"),  # the first brace-free box, as the authors' regex
        ("\\boxed {7} \\boxed{8}", "7"),
        ("\\boxed{3", None),
        ("\\boxed{}", ""),
        ("\\boxed{\\boxed{5}}", "5"),
        ("no box here", None),
    ],
)
def test_first_boxed(text: str, expected: str | None) -> None:
    assert first_boxed(text) == expected


# -- parse_action ---------------------------------------------------------------------------------------
def test_boxed_takes_the_first_box_and_boxed_last_the_last() -> None:
    reply = "I could say \\boxed{left}, but on reflection \\boxed{right}."
    assert parse_action(reply, "boxed") == "left"
    assert parse_action(reply, "lenient") == "left"
    assert parse_action(reply, "boxed_last") == "right"
    assert parse_action("plain answer ", "boxed_last") == "plain answer"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>maybe \\boxed{1}</think> I pick \\boxed{2}.", "2"),
        ("I pick \\boxed{2}, no, \\boxed{3}.", "2"),
        ("<think>only reasoning \\boxed{1}</think>", ""),
        ("<think>unterminated \\boxed{1}", ""),
        ("  plain answer  ", "plain answer"),
        ("The number is 7.", "The number is 7."),
        ("\\boxed{3", "\\boxed{3"),
        ("", ""),
        ("\\boxed{}", ""),
    ],
)
def test_boxed_mode(text: str, expected: str) -> None:
    assert parse_action(text, "boxed") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The number is 7.", "7"),
        ("I think the answer is -3", "-3"),
        ("It is 2.5 litres.", "2.5"),
        ("Let me think.\nMove up!", "Move up"),
        ("**right**", "right"),
        ("Between 3 and 4", "Between 3 and 4"),
        ("The answer is 7\n```", "7"),
        ("The answer is 7\n**\n", "7"),
        ("\\boxed{up} and then 9", "up"),
        ("<think>it is 5</think>", ""),
        ("", ""),
        ("   \n\n  ", ""),
    ],
)
def test_lenient_mode(text: str, expected: str) -> None:
    assert parse_action(text, "lenient") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>x</think>  \\boxed{7} ", "\\boxed{7}"),
        ("The number is 7.", "The number is 7."),
        ("<think>unterminated", ""),
    ],
)
def test_raw_mode(text: str, expected: str) -> None:
    assert parse_action(text, "raw") == expected


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="boxed, boxed_last, lenient, raw"):
        parse_action("7", "loose")  # type: ignore[arg-type]


def test_huge_input_is_parsed() -> None:
    text = "{" * 50_000 + " \\boxed{ok} " + "}" * 50_000
    assert parse_action(text) == "ok"


def test_many_unterminated_boxes_parse_in_linear_time() -> None:
    # Quadratic scanning took seconds on a few thousand of these; a model can emit far more in one reply.
    assert last_boxed("\\boxed{" * 20_000) is None
    assert last_boxed("\\boxed{1}" + "\\boxed{" * 20_000) == "1"
    assert first_boxed("\\boxed{" * 20_000 + "\\boxed{1}") == "1"
    assert first_boxed("\\boxed{" * 20_000) is None


def test_wrap_boxed_round_trips() -> None:
    for action in ["7", "pour A B", "\\frac{1}{2}", ""]:
        assert parse_action(wrap_boxed(action)) == action.strip()
