"""ACEBench from a local copy: its data layout, its normal (AST) and special rules, multi-turn dialogues."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.config import EvalOptions
from spade.evals.acebench import ACEBenchSuite
from spade.evals.acebench_check import decode_calls, normal_valid, standardize
from spade.evals.base import EvalError, ItemResult

DATA = Path(__file__).parent / "fixtures" / "benchdata" / "acebench"
RIGHT = {
    "normal_single_turn_single_function_0": "[Weather_getForecast(city='Lisbon', days=3, units='metric')]",
    "normal_single_turn_single_function_1": (
        "[Alarm_set(times=['06:30', '07:00'], label='Gym', repeat={'weekdays': True})]"
    ),
    "normal_single_turn_parallel_function_0": (
        "[translate_text(text='good morning', target_language='fr'), "
        "translate_text(text='good morning', target_language='de')]"
    ),
    "normal_multi_turn_user_adjust_0_0": "[Notes_create(title='Groceries', body='buy milk')]",
    "normal_multi_turn_user_adjust_0_1": "[Notes_share(title='Groceries', recipients=['ana@example.com'])]",
    "special_incomplete_0": '["Missing necessary parameters (text, target_language) for the api (translate_text)"]',
    "special_error_param_0": (
        '["There is incorrect value (minus two) for the parameters (days) in the conversation history."]'
    ),
    "special_irrelevant_0": '["Due to the limitations of the function, I cannot solve this problem."]',
}
WRONG = {
    "normal_single_turn_single_function_0": "[Weather_getForecast(city='Porto', days=3, units='metric')]",
    "normal_single_turn_single_function_1": "[Alarm_set(times=['06:30'], label='Gym', repeat={'weekdays': True})]",
    "normal_single_turn_parallel_function_0": "[translate_text(text='good morning', target_language='fr')]",
    "normal_multi_turn_user_adjust_0_0": RIGHT["normal_multi_turn_user_adjust_0_0"],
    "normal_multi_turn_user_adjust_0_1": "[Notes_share(title='Groceries', recipients=['bo@example.com'])]",
    "special_incomplete_0": "[translate_text(text='hello')]",
    "special_error_param_0": '["Missing necessary parameters (days) for the api (Weather_getForecast)"]',
    "special_irrelevant_0": "[Weather_getForecast(city='Rome')]",
}
ITEMS = [
    "normal_multi_turn_user_adjust_0",
    "normal_single_turn_parallel_function_0",
    "normal_single_turn_single_function_0",
    "normal_single_turn_single_function_1",
    "special_error_param_0",
    "special_incomplete_0",
    "special_irrelevant_0",
]


def _questions() -> dict[str, str]:
    out = {}
    for file in DATA.glob("data_en/data_*.json"):
        for line in file.read_text().splitlines():
            record = json.loads(line)
            out[record["id"]] = record["question"]
    return out


def _replier(replies: dict[str, str]):
    questions = _questions()

    def answer(prompt: str) -> str:
        turn = max((q for q in questions if questions[q] in prompt), key=lambda q: len(questions[q]))
        return replies[turn]

    return answer


def _run(replies: dict[str, str], **kw: Any) -> dict[str, ItemResult]:
    opts = EvalOptions(**{"params": {"data": str(DATA)}, "concurrency": 4, **kw})
    ACEBenchSuite().check(opts)
    results = asyncio.run(ACEBenchSuite().run(ReplyPolicy(_replier(replies)), opts, lambda d, t: None))
    return {r.item_id: r for r in results}


def test_right_replies_score_one_in_every_covered_category() -> None:
    results = _run(RIGHT)
    assert sorted(results) == ITEMS
    assert all(r.scores == (1.0,) for r in results.values()), {
        k: r.detail["episodes"] for k, r in results.items() if r.scores != (1.0,)
    }
    dialogue = results["normal_multi_turn_user_adjust_0"]
    assert dialogue.detail["turns"] == [
        "normal_multi_turn_user_adjust_0_0",
        "normal_multi_turn_user_adjust_0_1",
    ]
    assert dialogue.detail["process"] == [1.0]


def test_wrong_replies_score_zero_and_a_dialogue_needs_every_turn() -> None:
    results = _run(WRONG)
    assert all(r.scores == (0.0,) for r in results.values())
    assert results["normal_multi_turn_user_adjust_0"].detail["process"] == [0.5]


def test_selection_by_family_category_and_id() -> None:
    assert sorted(_run(RIGHT, tasks=("special",))) == ITEMS[4:]
    assert sorted(_run(RIGHT, tasks=("normal_single_turn_single_function", "special_irrelevant_0"))) == [
        "normal_single_turn_single_function_0",
        "normal_single_turn_single_function_1",
        "special_irrelevant_0",
    ]
    one = DATA / "data_en" / "data_special_irrelevant.json"
    assert list(_run(RIGHT, params={"data": str(one)})) == ["special_irrelevant_0"]


def test_acebench_rule_details() -> None:
    functions = [
        json.loads(line)
        for line in (DATA / "data_en" / "data_normal_single_turn_single_function.json").open()
    ]
    spec = functions[0]["function"]
    answer = {"Weather_getForecast": {"city": "Lisbon", "days": 3, "units": "metric"}}
    # ACEBench compares strings by containment after standardising, and does not compare integers by value.
    assert normal_valid(
        spec, "[Weather_getForecast(city='Lisbon, Portugal', days=3, units='metric')]", answer, "x"
    )[0]
    assert normal_valid(spec, "[Weather_getForecast(city='Lisbon', days=4, units='metric')]", answer, "x")[0]
    assert not normal_valid(
        spec, "[Weather_getForecast(city='Lisbon', days='3', units='metric')]", answer, "x"
    )[0]
    assert not normal_valid(spec, "[Weather_getForecast(city='Lisbon', extra=1)]", answer, "x")[0]
    assert not normal_valid(spec, "Weather_getForecast(city='Lisbon')", answer, "x")[0]
    assert decode_calls("[a.b(x=-1, y=[1, 2], z={'k': 'v'})]") == [
        {"a.b": {"x": -1, "y": [1, 2], "z": {"k": "v"}}}
    ]
    assert decode_calls("[f(x=__import__('os').getcwd())]") == [{"f": {"x": {"getcwd": {}}}}]  # nothing runs
    assert standardize("Good-Morning, It's") == 'goodmorningit"s'


def test_bad_layouts_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="pass --data PATH"):
        ACEBenchSuite().check(EvalOptions())
    with pytest.raises(EvalError, match="holds no data_<category>"):
        ACEBenchSuite().check(EvalOptions(params={"data": str(tmp_path)}))
    (tmp_path / "data_agent_multi_turn.json").write_text("{}\n")
    with pytest.raises(EvalError, match="possible_answer"):
        ACEBenchSuite().check(EvalOptions(params={"data": str(tmp_path / "data_agent_multi_turn.json")}))
    lone = tmp_path / "data_special_irrelevant.json"
    lone.write_text((DATA / "data_en" / lone.name).read_text())
    with pytest.raises(EvalError, match="possible_answer"):
        ACEBenchSuite().check(EvalOptions(params={"data": str(lone)}))


def test_spade_eval_acebench_from_the_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable, "-m", "spade.cli", "eval", "acebench", "--data", str(DATA), "--model.backend", "scripted",
            "--json", "--out", str(tmp_path / "r"),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert (last["suite"], last["n"], last["score"]) == (
        "acebench",
        7,
        0.0,
    )  # the scripted model calls no API
    assert "special_irrelevant" in last["by_category"]
