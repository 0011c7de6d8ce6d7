"""The TOML writer: what it writes reads back with tomllib as the same values."""

from __future__ import annotations

import math
import tomllib
from typing import Any

import pytest

from spade.config.toml import dumps

AWKWARD = [
    "",
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\rcr\bbs\fff",
    "nul\x00 esc\x1b del\x7f",
    "ümlaut, 日本語, emoji 😀",
    "'single' and ''' and \"\"\"",
    "# not a comment",
    "[not.a.table]",
]


def test_strings_of_every_awkward_kind_read_back_unchanged() -> None:
    table = {f"k{i}": text for i, text in enumerate(AWKWARD)}
    assert tomllib.loads(dumps(table)) == table


def test_numbers_booleans_and_arrays_read_back_unchanged() -> None:
    table: dict[str, Any] = {
        "int": -3,
        "big": 2**62,
        "float": 0.1,
        "tiny": 1e-06,
        "huge": 1e16,
        "negative_zero": -0.0,
        "whole": 2.0,
        "inf": math.inf,
        "minus_inf": -math.inf,
        "yes": True,
        "no": False,
        "empty": [],
        "pair": (0.9, 0.98),
        "words": ["a", "b c"],
        "long": [f"module_{i}" for i in range(30)],
        "nested": [[1, 2], [3]],
    }
    loaded = tomllib.loads(dumps(table))
    assert loaded == {**table, "pair": [0.9, 0.98]}
    assert math.copysign(1.0, loaded["negative_zero"]) == -1.0
    assert math.isnan(tomllib.loads(dumps({"x": math.nan}))["x"])


def test_nested_tables_come_after_the_plain_values_of_their_table() -> None:
    table = {"a": {"x": 1, "b": {"y": 2}, "z": 3}, "top": "after a table in the input", "c": {}}
    text = dumps(table)
    assert tomllib.loads(text) == table
    assert text.startswith('top = "after a table in the input"\n')
    assert "[a.b]" in text


def test_keys_that_are_not_bare_are_quoted() -> None:
    table = {"dotted.key": 1, "space key": {"ü": 2}, "": 3}
    assert tomllib.loads(dumps(table)) == table


def test_none_is_a_comment_and_reads_back_absent() -> None:
    text = dumps({"limit": None, "s": {"difficulty": None, "k": 1}})
    assert "# limit: unset" in text
    assert tomllib.loads(text) == {"s": {"k": 1}}


@pytest.mark.parametrize("value", [object(), [None], [{"a": 1}], b"bytes"])
def test_values_with_no_toml_form_are_refused(value: object) -> None:
    with pytest.raises(TypeError, match="no TOML form"):
        dumps({"v": value})
