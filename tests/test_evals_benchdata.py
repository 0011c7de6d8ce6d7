"""Benchmarks read from a local copy (``--data``): AIME and GPQA-Diamond on fixtures in the published formats."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_policy_double import ReplyPolicy
from spade.config import EvalOptions
from spade.evals.aime import AIMESuite, parse_integer, score_reply
from spade.evals.base import EvalError, ItemResult
from spade.evals.gpqa import GPQADiamondSuite, extract_boxed_choice, extract_choice
from spade.evals.registry import make_suite

FIXTURES = Path(__file__).parent / "fixtures" / "benchdata"
AIME = FIXTURES / "aime.jsonl"
AIME_RELEASE = FIXTURES / "aime_release" / "aime_2026.jsonl"
"""The release's prepared layout (``prompt`` messages + ``label``); line 3 is blank, so record 2 is line 4."""
RELEASE_ANSWERS = {"remainder": 43, "divisors": 9, "binom": 120}
GPQA = FIXTURES / "gpqa_diamond.csv"
AIME_ANSWERS = {"0": 24, "1": 0, "2": 37, "3": 56}
GPQA_RIGHT = {"recFixture0001": "The photon", "recFixture0002": "sp3", "recFixture0003": "The mitochondrion"}


def _run(suite: Any, policy: ReplyPolicy, data: Path, **kw: Any) -> list[ItemResult]:
    opts = EvalOptions(**{"params": {"data": str(data)}, "concurrency": 4, **kw})
    suite.check(opts)
    return asyncio.run(suite.run(policy, opts, lambda done, total: None))


def spade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spade.cli", *args], capture_output=True, text=True, timeout=300, check=False
    )


# ------------------------------------------------------------------ AIME


def test_aime_integer_rule() -> None:
    assert parse_integer("024") == 24
    assert parse_integer(" 1{,}000 ".replace("{,}", ",")) == 1000
    assert parse_integer("\\text{37}") == 37
    assert parse_integer("$56$") == 56
    assert parse_integer("\\frac{1}{2}") is None
    assert parse_integer("37.5") is None
    assert parse_integer(None) is None
    assert score_reply("so \\boxed{12} no wait \\boxed{37}", 37) == (1.0, "37")
    assert score_reply("\\boxed{37} then \\boxed{12}", 37) == (0.0, "12")
    assert score_reply("the answer is 37", 37) == (0.0, None)


def _aime_answer(right: bool):
    def answer(prompt: str) -> str:
        for line in AIME.read_text().splitlines():
            record = json.loads(line)
            if record["problem"] in prompt:
                value = AIME_ANSWERS[str(record["id"])]
                return f"Step by step... \\boxed{{{value if right else value + 1}}}"
        raise AssertionError("problem not in the prompt")

    return answer


def test_aime_scores_right_and_wrong_answers() -> None:
    right = _run(AIMESuite(), ReplyPolicy(_aime_answer(True)), AIME)
    assert [r.item_id for r in right] == ["0", "1", "2", "3"]
    assert [r.scores for r in right] == [(1.0,)] * 4
    assert {r.category for r in right} == {"2024", "2025"}
    assert right[0].detail["expected"] == "24"
    wrong = _run(AIMESuite(), ReplyPolicy(_aime_answer(False)), AIME)
    assert [r.scores for r in wrong] == [(0.0,)] * 4


def test_aime_prompt_selection_and_parquet(tmp_path: Path) -> None:
    policy = ReplyPolicy(_aime_answer(True))
    results = _run(AIMESuite(), policy, AIME, tasks=("2025",), limit=1)
    assert [r.item_id for r in results] == ["2"]
    assert (
        "diagonal.\nPlease reason step by step, and put your final answer within \\boxed{}."
        in policy.prompts[0]
    )
    records = [json.loads(line) for line in AIME.read_text().splitlines()]
    table = pa.Table.from_pylist(
        [{"ID": f"2024-I-{r['id']}", "Problem": r["problem"], "Answer": int(r["answer"])} for r in records]
    )
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "train-00000-of-00001.parquet")
    results = _run(AIMESuite(), ReplyPolicy(_aime_answer(True)), tmp_path / "data")
    assert [r.item_id for r in results] == [f"2024-I-{k}" for k in range(4)]
    assert all(r.scores == (1.0,) for r in results)


def _release_answer(right: bool):
    def answer(prompt: str) -> str:
        value = next(v for k, v in RELEASE_ANSWERS.items() if k in prompt)
        return f"Working... \\boxed{{{value if right else value + 1}}}"

    return answer


def test_aime_reads_the_release_jsonl_and_sends_its_prompt_as_is(tmp_path: Path) -> None:
    policy = ReplyPolicy(_release_answer(True))
    right = _run(AIMESuite(), policy, AIME_RELEASE)
    assert [r.item_id for r in right] == ["0", "1", "2"]
    assert [r.scores for r in right] == [(1.0,)] * 3
    assert [r.detail["expected"] for r in right] == ["43", "9", "120"]
    assert {r.category for r in right} == {"aime"}
    # The release's content already holds the instruction: it is not appended a second time.
    assert all(p.count("within \\boxed{}") == 1 for p in policy.prompts)
    assert "divided by $100$.\nPlease reason step by step" in policy.prompts[0]
    wrong = _run(AIMESuite(), ReplyPolicy(_release_answer(False)), AIME_RELEASE)
    assert [r.scores for r in wrong] == [(0.0,)] * 3
    # A folder mixing both layouts reads each record by its own fields.
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.jsonl").write_text(AIME_RELEASE.read_text())
    (tmp_path / "mixed" / "b.jsonl").write_text(AIME.read_text())
    assert len(_run(AIMESuite(), ReplyPolicy(lambda p: ""), tmp_path / "mixed")) == 7


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "Find x.", "label": "3"}', "'prompt' must be a chat message list"),
        ('{"prompt": [{"role": "user"}], "label": "3"}', "'prompt' must be a chat message list"),
        ('{"prompt": [{"role": "user", "content": "Find x."}], "label": "x+1"}', "has the label 'x\\+1'"),
        ('{"prompt": [{"role": "user", "content": "Find x."}]}', "no field 'label'"),
        ('{"prompt": [{"role": "user", "content": "Find x."}], "label": 3', "line 4 is not JSON"),
    ],
)
def test_a_malformed_release_line_names_file_and_line(line: str, message: str, tmp_path: Path) -> None:
    lines = AIME_RELEASE.read_text().splitlines()
    data = tmp_path / "aime_2026.jsonl"
    data.write_text("\n".join([*lines[:3], line]) + "\n")
    with pytest.raises(EvalError, match=message) as caught:
        AIMESuite().check(EvalOptions(params={"data": str(data)}))
    assert "aime_2026.jsonl" in str(caught.value)
    assert "line 4" in str(caught.value)


# ------------------------------------------------------------------ GPQA-Diamond


def _gpqa_answer(right: bool, boxed: bool = True):
    def answer(prompt: str) -> str:
        correct = next(text for text in GPQA_RIGHT.values() if text in prompt)
        letter = re.search(rf"^([A-D])\) {re.escape(correct)}$", prompt, re.MULTILINE)
        assert letter is not None
        chosen = letter.group(1) if right else "ABCD"[("ABCD".index(letter.group(1)) + 1) % 4]
        return (
            f"Thinking it through, \\boxed{{{chosen}}}"
            if boxed
            else f"Thinking it through.\nAnswer: {chosen}"
        )

    return answer


def test_gpqa_default_prompt_is_boxed_and_graded_by_the_boxed_letter() -> None:
    policy = ReplyPolicy(_gpqa_answer(True))
    right = _run(GPQADiamondSuite(), policy, GPQA)
    assert [r.item_id for r in right] == list(GPQA_RIGHT)
    assert [r.scores for r in right] == [(1.0,)] * 3
    assert [r.category for r in right] == ["Physics", "Chemistry", "Biology"]
    assert {r.detail["prompt"] for r in right} == {"boxed"}
    assert all(
        "(A, B, C or D), within \\boxed{}." in p and "Answer: $LETTER" not in p for p in policy.prompts
    )
    wrong = _run(GPQADiamondSuite(), ReplyPolicy(_gpqa_answer(False)), GPQA)
    assert [r.scores for r in wrong] == [(0.0,)] * 3
    # Under the boxed prompt an "Answer: X" line is no answer.
    unboxed = _run(GPQADiamondSuite(), ReplyPolicy(_gpqa_answer(True, boxed=False)), GPQA)
    assert [r.scores for r in unboxed] == [(0.0,)] * 3
    assert extract_boxed_choice("\\boxed{A} no, \\boxed{ \\text{(c)} }") == "C"
    assert extract_boxed_choice("\\boxed{$B$.}") == "B"
    assert extract_boxed_choice("\\boxed{B) sp3}") is None  # a choice's text is not a letter
    assert extract_boxed_choice("\\boxed{E}") is None
    assert extract_boxed_choice("Answer: B") is None


def test_gpqa_simple_evals_prompt_is_an_option() -> None:
    policy = ReplyPolicy(_gpqa_answer(True, boxed=False))
    right = _run(GPQADiamondSuite(), policy, GPQA, params={"data": str(GPQA), "prompt": "simple-evals"})
    assert [r.scores for r in right] == [(1.0,)] * 3
    assert all(p.count("'Answer: $LETTER'") == 1 and "boxed" not in p for p in policy.prompts)
    boxed = ReplyPolicy(_gpqa_answer(True))
    scored = _run(GPQADiamondSuite(), boxed, GPQA, params={"data": str(GPQA), "prompt": "simple-evals"})
    assert [r.scores for r in scored] == [(0.0,)] * 3
    with pytest.raises(EvalError, match="unknown --param prompt=nope; choose from: boxed, simple-evals"):
        GPQADiamondSuite().check(EvalOptions(params={"data": str(GPQA), "prompt": "nope"}))


def test_gpqa_order_is_fixed_per_item_and_seed() -> None:
    a = _run(GPQADiamondSuite(), ReplyPolicy(_gpqa_answer(True)), GPQA)
    b = _run(GPQADiamondSuite(), ReplyPolicy(_gpqa_answer(True)), GPQA)
    assert [r.detail["choices"] for r in a] == [r.detail["choices"] for r in b]
    orders = {
        tuple(r.detail["choices"])
        for seed in range(6)
        for r in _run(GPQADiamondSuite(), ReplyPolicy(_gpqa_answer(True)), GPQA, seed=seed)[:1]
    }
    assert len(orders) > 1
    assert extract_choice("I think B.\nAnswer: $C$") == "C"
    assert extract_choice("answer: d") == "d"  # simple-evals' pattern keeps the case; "d" is not "D"
    assert extract_choice("The answer is C") is None


# ------------------------------------------------------------------ errors and the command line


@pytest.mark.parametrize("name", ["aime", "gpqa_diamond"])
def test_bad_data_is_one_clear_error(name: str, tmp_path: Path) -> None:
    suite = make_suite(name)
    with pytest.raises(EvalError, match="pass --data PATH"):
        suite.check(EvalOptions())
    with pytest.raises(EvalError, match="does not exist"):
        suite.check(EvalOptions(params={"data": str(tmp_path / "nope.jsonl")}))
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(EvalError, match="cannot read"):
        suite.check(EvalOptions(params={"data": str(tmp_path / "bad.jsonl")}))
    (tmp_path / "other.jsonl").write_text('{"text": "hello"}\n')
    with pytest.raises(EvalError, match="is it the published file"):
        suite.check(EvalOptions(params={"data": str(tmp_path / "other.jsonl")}))
    with pytest.raises(EvalError, match="unknown task"):
        suite.check(EvalOptions(params={"data": str(AIME if name == "aime" else GPQA)}, tasks=("nope",)))


def test_spade_eval_reads_data_from_the_command_line(tmp_path: Path) -> None:
    out = spade(
        "eval", "aime", "--data", str(AIME), "--model.backend", "scripted", "--json", "--out", str(tmp_path / "r"),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    # The scripted backend answers \boxed{0} to questions it does not know: right on problem 1 only.
    assert (last["suite"], last["n"], last["score"]) == ("aime", 4, 0.25)
    lines = [json.loads(line) for line in (tmp_path / "r" / "aime.jsonl").read_text().splitlines()]
    assert [line["scores"] for line in lines] == [[0.0], [1.0], [0.0], [0.0]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "aime"), "pass --data PATH"),
        (("eval", "aime", "--data", "/nonexistent/aime.jsonl"), "does not exist"),
        (("eval", "math", "--data", str(AIME)), "name exactly one of"),
        (("eval", "aime", "gpqa_diamond", "--data", str(AIME)), "name exactly one of"),
        (("eval", "gpqa_diamond", "--data", str(AIME)), "no field 'Question'"),
    ],
)
def test_bad_data_on_the_command_line_is_one_line(args: tuple[str, ...], message: str) -> None:
    out = spade(*args, "--model.backend", "scripted")
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert message in lines[0]
