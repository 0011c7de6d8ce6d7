"""LiveCodeBench from a local copy: the published record format, LiveCodeBench's grading rule, the sandbox."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pickle
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult
from spade.evals.lcb_tests import extract_code, parse_cases
from spade.evals.livecodebench import LiveCodeBenchSuite

DATA = Path(__file__).parent / "fixtures" / "benchdata" / "livecodebench" / "test.jsonl"
RIGHT = {
    "Sum of Two": "a, b = map(int, input().split())\nprint(a + b)",
    "pair-with-target-sum": (
        "class Solution:\n    def pairSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n                return (seen[target - x], i)\n"
        "            seen[x] = i\n"
    ),
    "Average": "import sys\ndata = sys.stdin.buffer.read().split()\nn = int(data[0])\n"
    "print(sum(map(int, data[1:n + 1])) / n)",
}


def _title(prompt: str) -> str:
    for line in DATA.read_text().splitlines():
        record = json.loads(line)
        if record["question_content"] in prompt:
            return str(record["question_title"])
    raise AssertionError("no problem in the prompt")


def _fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


def _run(policy: ReplyPolicy, **kw: Any) -> list[ItemResult]:
    opts = EvalOptions(**{"concurrency": 3, **kw, "params": {"data": str(DATA), **kw.get("params", {})}})
    LiveCodeBenchSuite().check(opts)
    return asyncio.run(LiveCodeBenchSuite().run(policy, opts, lambda done, total: None))


def test_right_programs_pass_every_public_and_private_test() -> None:
    policy = ReplyPolicy(lambda prompt: _fenced(RIGHT[_title(prompt)]))
    results = _run(policy)
    assert [r.item_id for r in results] == ["fixture_abc001_a", "fixture_lc_1", "fixture_abc002_b"]
    assert [r.scores for r in results] == [(1.0,)] * 3, [r.detail["failures"] for r in results]
    assert [r.detail["tests"] for r in results] == [3, 3, 2]
    assert [r.detail["mode"] for r in results] == ["stdin", "functional", "stdin"]
    assert [r.category for r in results] == ["easy", "medium", "hard"]
    assert "### Format: You will use the following starter code" in policy.prompts[1]
    assert "Read the inputs from stdin" in policy.prompts[0]


def test_wrong_programs_fail_at_the_first_failing_test() -> None:
    wrong = {
        "Sum of Two": "a, b = map(int, input().split())\nprint(a + b if a > 0 else 1)",  # fails private test 0
        "pair-with-target-sum": RIGHT["pair-with-target-sum"].replace(
            "seen[target - x], i", "i, seen[target - x]"
        ),
        "Average": "n = int(input())\nprint(sum(map(int, input().split())) // n)",
    }
    results = _run(ReplyPolicy(lambda prompt: _fenced(wrong[_title(prompt)])))
    assert [r.scores for r in results] == [(0.0,)] * 3
    assert [r.detail["tests_passed"] for r in results] == [[1], [0], [0]]
    assert all("wrong answer" in r.detail["failures"][0] for r in results)
    assert results[0].detail["errors"] == 0


def test_no_code_a_crash_and_a_loop_score_zero() -> None:
    replies = {
        "Sum of Two": "I would add the numbers.",
        "pair-with-target-sum": _fenced(
            "class Solution:\n    def pairSum(self, nums, target):\n        return 1 / 0"
        ),
        "Average": _fenced("while True:\n    pass"),
    }
    results = _run(ReplyPolicy(lambda prompt: replies[_title(prompt)]), params={"timeout_s": 1.0})
    assert [r.scores for r in results] == [(0.0,)] * 3
    failures = [r.detail["failures"][0] for r in results]
    assert failures[0] == "no code block in the reply"
    assert "ZeroDivisionError" in failures[1]
    assert "timeout" in failures[2]


def test_selection_by_difficulty_id_and_contest_window() -> None:
    policy = ReplyPolicy(lambda prompt: _fenced(RIGHT[_title(prompt)]))
    assert [r.item_id for r in _run(policy, tasks=("easy", "fixture_lc_1"))] == [
        "fixture_abc001_a",
        "fixture_lc_1",
    ]
    window = _run(policy, params={"start_date": "2024-09-01", "end_date": "2024-12-31"})
    assert [r.item_id for r in window] == ["fixture_lc_1"]
    with pytest.raises(EvalError, match="unknown livecodebench parameter"):
        _run(policy, params={"bogus": 1})


def test_extraction_and_test_case_formats() -> None:
    assert extract_code("```python\na = 1\n```\ntext\n```python\nb = 2\n```") == "b = 2"
    assert extract_code("no fences") == ""
    plain = json.dumps([{"input": "1", "output": "2", "testtype": "stdin"}])
    packed = base64.b64encode(zlib.compress(pickle.dumps(plain))).decode()
    assert parse_cases(plain, "x") == parse_cases(packed, "x")

    class Evil:
        def __reduce__(self) -> tuple[Any, tuple[str]]:
            return (os.getcwd, ())  # type: ignore[return-value]

    hostile = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(EvalError, match="refused global"):
        parse_cases(hostile, "private_test_cases")
    with pytest.raises(EvalError, match="neither JSON nor"):
        parse_cases("not a test list", "private_test_cases")


def test_spade_eval_livecodebench_from_the_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable, "-m", "spade.cli", "eval", "livecodebench", "--data", str(DATA.parent),
            "--model.backend", "scripted", "--json", "--out", str(tmp_path / "r"),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert (last["suite"], last["n"], last["score"]) == (
        "livecodebench",
        3,
        0.0,
    )  # the scripted model writes no code
    assert set(last["by_category"]) == {"easy", "medium", "hard"}
