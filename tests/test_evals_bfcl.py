"""The BFCL suite: selection, decoding, the package's checkers, and multi-turn episodes run in the sandbox."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.backends import make_policy
from spade.config import EvalOptions, ModelConfig
from spade.evals import bfcl_data
from spade.evals.base import EvalError, ItemResult
from spade.evals.bfcl import BFCLSuite, renders_tools
from spade.evals.bfcl_decode import DecodeError, decode_ast_prompting, decode_execute_prompting, to_tools

_ROLE = re.compile(r"<\|(\w+)\|>")


def _items(category: str) -> dict[str, bfcl_data.Item]:
    return {i.id: i for i in bfcl_data.load_category(category)}


def _call_text(call: dict[str, Any]) -> str:
    """A ground-truth call written out with the first acceptable value of each parameter."""
    ((name, params),) = call.items()
    args = [
        f"{k}={next(v for v in opts if v != '')!r}"
        for k, opts in params.items()
        if any(v != "" for v in opts)
    ]
    return f"{name}({', '.join(args)})"


def _flat(call: dict[str, Any]) -> bool:
    """Whether a ground-truth call has no nested-dict options (so :func:`_call_text` can write it)."""
    return not any(isinstance(v, dict) for opts in next(iter(call.values())).values() for v in opts)


def _run(policy: ReplyPolicy, tasks: tuple[str, ...], **kw: Any) -> list[ItemResult]:
    opts = EvalOptions(tasks=tasks, **{"concurrency": 4, "params": {"mode": "prompt"}, **kw})
    return asyncio.run(BFCLSuite().run(policy, opts, lambda done, total: None))


def _single_turn_answer(items: dict[str, bfcl_data.Item], wrong: bool = False) -> ReplyPolicy:
    def answer(text: str) -> str:
        item = next((i for i in items.values() if i.entry["question"][0][-1]["content"] in text), None)
        if item is None:
            return "not one of the chosen items"
        calls = [_call_text(c) for c in item.ground_truth]
        if wrong:
            calls = [re.sub(r"=([^,)]+)", "='not the answer'", c, count=1) for c in calls]
        return "[" + ", ".join(calls) + "]"

    return ReplyPolicy(answer)


# -- single turn ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "category", ["simple_python", "multiple", "parallel", "parallel_multiple", "live_simple"]
)
def test_ground_truth_answers_score_one_and_wrong_ones_zero(category: str) -> None:
    first = list(_items(category).values())[:12]
    picked = {i.id: i for i in first if all(_flat(c) for c in i.ground_truth)}
    chosen = tuple(picked)
    assert len(chosen) >= 6
    right = _run(_single_turn_answer(picked), (category,), limit=12)
    by_id = {r.item_id: r for r in right}
    assert all(by_id[k].scores == (1.0,) for k in chosen), [
        by_id[k].detail for k in chosen if by_id[k].score < 1
    ]
    wrong = _run(_single_turn_answer(picked, wrong=True), (category,), limit=12)
    assert all(r.scores == (0.0,) for r in wrong if r.item_id in picked)


def test_irrelevance_passes_without_a_call_and_relevance_with_one() -> None:
    refuse = ReplyPolicy(lambda _: "None of the functions can answer this.")
    assert all(r.scores == (1.0,) for r in _run(refuse, ("irrelevance",), limit=5))
    assert all(r.scores == (0.0,) for r in _run(refuse, ("live_relevance",), limit=3))
    call = ReplyPolicy(lambda _: "[some_function(x=1)]")
    results = _run(call, ("irrelevance",), limit=3)
    assert all(r.scores == (0.0,) for r in results)
    assert results[0].detail["episodes"][0]["error_type"] == "irrelevance_error:decoder_success"
    assert all(r.scores == (1.0,) for r in _run(call, ("live_relevance",), limit=3))


def test_native_tool_calls_with_dotted_names() -> None:
    item = _items("simple_python")["simple_python_1"]  # math.factorial(number=5)
    assert renders_tools(ReplyPolicy(str).template)  # the byte template shows tools: auto picks fc
    tools = to_tools(item.entry["function"])
    assert tools[0]["function"]["name"] == "math_factorial"

    def reply(number: int) -> ReplyPolicy:
        call = {"name": "math_factorial", "arguments": {"number": number}}
        return ReplyPolicy(lambda _: f"<tool_call>{json.dumps(call)}</tool_call>")

    results = _run(reply(5), ("simple_python",), limit=2, params={})
    assert results[1].scores == (1.0,)
    assert results[1].detail["mode"] == "fc"
    assert _run(reply(6), ("simple_python",), limit=2, params={})[1].scores == (0.0,)
    no_call = _run(ReplyPolicy(lambda _: "5"), ("simple_python",), limit=1, params={"mode": "fc"})
    assert no_call[0].detail["episodes"][0]["error_type"] == "ast_decoder:decoder_failed"


def test_a_checker_that_raises_fails_the_item_not_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> dict[str, Any]:
        raise TypeError("unhashable answer")

    monkeypatch.setattr(bfcl_data, "ast_checker", lambda: broken)
    results = _run(ReplyPolicy(lambda _: "[f(x=1)]"), ("simple_python",), limit=2)
    assert [r.scores for r in results] == [(0.0,), (0.0,)]
    assert results[0].detail["episodes"][0]["error_type"] == "ast_checker:raised"


def test_decoder_evaluates_no_model_code() -> None:
    assert decode_ast_prompting("[f(a=2*3, b=-1, c='x'+'y', d=[1, (2, 3)], e={'k': None})]") == [
        {"f": {"a": 6, "b": -1, "c": "xy", "d": [1, (2, 3)], "e": {"k": None}}}
    ]
    assert decode_ast_prompting("```\nmath.sqrt(x=4)\n```") == [{"math.sqrt": {"x": 4}}]
    for hostile in [
        "[f(x=__import__('os').getpid() + 1)]",
        "[f(x=10**10**10)]",
        "[f(x=lambda: 1)]",
        "hello there",
    ]:
        with pytest.raises(DecodeError):
            decode_ast_prompting(hostile)
    # a call inside an argument stays text: it reaches the executor as a string literal
    assert decode_execute_prompting("[cd(folder=__import__('os').getcwd())]") == [
        "cd(folder=\"__import__('os').getcwd()\")"
    ]


def test_bad_input_is_one_clear_error() -> None:
    policy = ReplyPolicy(lambda _: "")
    cases = [
        (EvalOptions(tasks=("simple",)), "BFCL v4 calls it 'simple_python'"),
        (EvalOptions(tasks=("nope",)), "known: simple_python, multiple"),
        (EvalOptions(tasks=("simple_java",)), "tree-sitter"),
        (EvalOptions(params={"mode": "xml"}), "'auto', 'prompt' or 'fc'"),
        (EvalOptions(params={"max_steps": 0}), "positive int"),
        (EvalOptions(params={"colour": 1}), "unknown bfcl parameter"),
        (EvalOptions(fewshot=1), "fewshot 0"),
    ]
    for opts, message in cases:
        with pytest.raises(EvalError, match=message):
            asyncio.run(BFCLSuite().run(policy, opts, lambda d, t: None))


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bfcl_eval.utils", None)
    with pytest.raises(EvalError, match="pip install --no-deps bfcl-eval"):
        bfcl_data.load_category("simple_python")


def test_the_packages_checker_is_imported_privately() -> None:
    bfcl_data.ast_checker()
    assert "bfcl_eval.constants.model_config" not in sys.modules
    assert "bfcl_eval.eval_checker.ast_eval.ast_checker" not in sys.modules


# -- multi turn -------------------------------------------------------------------------------------------


def _multi_turn_policy(items: dict[str, bfcl_data.Item], turn_reply: Any) -> ReplyPolicy:
    """Answers each user turn with ``turn_reply(item, turn)``, then ends the turn with plain text."""

    def answer(text: str) -> str:
        item = next((i for i in items.values() if i.entry["question"][0][0]["content"] in text), None)
        roles = _ROLE.findall(text)
        if item is None or roles[-2] != "user":  # the last message is a tool result: the turn is done
            return "Done."
        return turn_reply(item, roles.count("user") - 1)

    return ReplyPolicy(answer)


def _keyword_only(item: bfcl_data.Item) -> bool:
    calls = [c for turn in item.ground_truth for c in turn]
    return all(re.fullmatch(r"\w+\(\s*(\w+\s*=.*)?\)", c) for c in calls)


MULTI = {k: v for k, v in list(_items("multi_turn_base").items())[:30] if _keyword_only(v)}
MULTI_IDS = tuple(list(MULTI)[:4])


def test_multi_turn_ground_truth_passes_state_and_response_checks() -> None:
    policy = _multi_turn_policy(MULTI, lambda item, turn: "[" + ", ".join(item.ground_truth[turn]) + "]")
    results = _run(policy, ("multi_turn_base",), limit=30)
    scored = {r.item_id: r for r in results}
    for item_id in MULTI_IDS:
        assert scored[item_id].scores == (1.0,), scored[item_id].detail


def test_miss_func_turns_hand_over_the_held_out_functions() -> None:
    items = {k: v for k, v in list(_items("multi_turn_miss_func").items())[:6] if _keyword_only(v)}
    policy = _multi_turn_policy(items, lambda item, turn: "[" + ", ".join(item.ground_truth[turn]) + "]")
    results = _run(policy, ("multi_turn_miss_func",), limit=6)
    assert all(r.scores == (1.0,) for r in results if r.item_id in items), [r.detail for r in results]
    assert any("I have updated some more functions" in p for p in policy.prompts)


def test_multi_turn_state_check_catches_a_wrong_state() -> None:
    item_id = next(k for k in MULTI if "GorillaFileSystem" in MULTI[k].entry["involved_classes"])
    item = MULTI[item_id]

    def sabotage(it: bfcl_data.Item, turn: int) -> str:
        calls = list(it.ground_truth[turn])
        if it.id == item_id and turn == len(it.ground_truth) - 1:
            calls.append("mkdir(dir_name='not_in_the_ground_truth')")
        return "[" + ", ".join(calls) + "]"

    results = _run(_multi_turn_policy({item_id: item}, sabotage), ("multi_turn_base",), limit=30)
    result = next(r for r in results if r.item_id == item_id)
    assert result.scores == (0.0,)
    assert result.detail["episodes"][0]["error_type"] == "multi_turn:instance_state_mismatch"


def test_multi_turn_silence_fails_and_step_budget_force_quits() -> None:
    silent = _multi_turn_policy(MULTI, lambda item, turn: "I will not call anything.")
    results = _run(silent, ("multi_turn_base",), limit=2)
    assert results[0].detail["episodes"][0]["error_type"] == "multi_turn:empty_turn_model_response"
    chatty = ReplyPolicy(lambda _: "[ls(a=True)]")  # never ends a turn
    results = _run(chatty, ("multi_turn_base",), limit=1, params={"mode": "prompt", "max_steps": 3})
    assert results[0].scores == (0.0,)
    assert results[0].detail["episodes"][0]["error_type"] == "multi_turn:force_terminated"
    assert len(results[0].detail["episodes"][0]["replies"]) == 4


def test_hostile_calls_are_contained_by_the_sandbox(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    # BFCL's executor evaluates call strings: ``inspect`` is in its namespace and ``inspect.os`` is ``os``.
    hostile = ReplyPolicy(lambda _: f"[inspect.os.remove(path={str(victim)!r})]")
    results = _run(hostile, ("multi_turn_base",), limit=1)
    assert results[0].scores == (0.0,)
    assert results[0].detail["episodes"][0]["error_type"] == "sandbox:forbidden"
    assert victim.read_text() == "keep me"


@pytest.mark.slow
def test_embedded_model_on_a_few_items(one_torch_thread: None) -> None:
    policy = make_policy(ModelConfig())
    opts = EvalOptions(tasks=("simple_python", "multi_turn_base"), limit=2, max_tokens=32, concurrency=4)
    results = asyncio.run(BFCLSuite().run(policy, opts, lambda d, t: None))
    assert [r.category for r in results] == ["simple_python"] * 2 + ["multi_turn_base"] * 2
    for r in results:
        assert r.detail["mode"] == "prompt"  # SmolLM2's template ignores tools
        assert r.scores[0] in (0.0, 1.0)
    assert all(r.detail["episodes"][0]["replies"] for r in results[:2])
    for r in results[2:]:  # BFCL's multi-turn function docs alone exceed the default 2048-token context
        episode = r.detail["episodes"][0]
        assert episode["error_type"] == "model_error"
        assert "context window" in episode["error"]
