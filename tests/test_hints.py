"""Hints: the prompt, cleaning, the leak filter, and one end-to-end hint call with a fake policy."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spade import envs
from spade.config import PAPER, RolloutConfig
from spade.design import hints, prompt_texts
from spade.design.hints import HintRequest
from spade.env import ToolEnv
from spade.types import Completion, Message, SamplingParams

CODE = (
    "class GuessEnv(TextEnv):\n    def _reset(self, options):\n        self.secret = self.rng.randint(1, 9)\n"
)
OBS = "Guess the secret number from 1 to 9. Valid actions: a number, or 'up' / 'down' to move the pointer."


def test_hint_prompt_shows_code_and_first_observation() -> None:
    msgs = hints.build_hint_messages(CODE, OBS, "games", max_words=42)
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == prompt_texts.HINT_SYSTEM_GAMES.format(max_words=42)
    assert "at most 42 words" in msgs[0]["content"]
    assert "Never state the answer" in msgs[0]["content"]
    assert CODE.rstrip() in msgs[1]["content"]
    assert OBS in msgs[1]["content"]
    tool = hints.build_hint_messages(CODE, OBS, "tool_use")
    assert "value-free plan" in tool[0]["content"]
    long_code = "\n".join(f"x{i} = {i}" for i in range(500))
    cut = hints.build_hint_messages(long_code, OBS, "games", code_chars=300)
    assert "x499" not in cut[1]["content"]
    assert "truncated for this prompt" in cut[1]["content"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Narrow the range by halving it each turn.", "Narrow the range by halving it each turn."),
        ("<think>the secret is 7 so say 7</think>Halve the range each turn.", "Halve the range each turn."),
        ("Hint: Halve the range.<|im_end|>", "Halve the range."),
        ("**HINT:**   Halve\n the   range.", "Halve the range."),
        ('```json\n{"hint": "Halve the range."}\n```', "Halve the range."),
        ('{"hint": "Halve the range."}', "Halve the range."),
        ('{"advice": "Halve the range."}', '{"advice": "Halve the range."}'),
    ],
    ids=[
        "plain",
        "reasoning",
        "prefix-and-special-token",
        "bold-prefix-whitespace",
        "json-block",
        "json",
        "json-without-hint-key",
    ],
)
def test_clean_hint_keeps_the_useful_text(text: str, expected: str) -> None:
    assert hints.clean_hint(text) == (expected, "ok")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("<think>I will reveal that the answer is", "empty"),
        ("Hint:  <|im_end|>", "empty"),
        ("Use this:\n```python\nprint(env.secret)\n```", "contains_code"),
    ],
)
def test_clean_hint_rejects_unusable_text(text: str, reason: str) -> None:
    assert hints.clean_hint(text) == (None, reason)


def test_clean_hint_drops_quoted_code_and_keeps_the_advice() -> None:
    text = (
        "```python\nLEVELS = ((3, 12, 12),)\n```\nGuess the middle of the range each turn.\n```python\nx = 1"
    )
    assert hints.clean_hint(text) == ("Guess the middle of the range each turn.", "ok")


def test_clean_hint_caps_length_at_a_sentence_or_word_boundary() -> None:
    text = "First sentence here. Second sentence is longer than the rest. Third one."
    hint, reason = hints.clean_hint(text, max_chars=50)
    assert (hint, reason) == ("First sentence here.", "capped")
    hint, reason = hints.clean_hint("word " * 100, max_chars=42)
    assert reason == "capped"
    assert hint is not None
    assert hint.endswith("word ...")
    assert len(hint) <= 46


@pytest.mark.parametrize(
    ("hint", "solution", "public", "reason"),
    [
        # the whole winning sequence, in order, with different spacing
        ("Try 7+9 first, then 16 * 2.", ["7 + 9", "16 * 2"], [], "leak_sequence"),
        ("Play 16*2 after 7+9.", ["7 + 9", "16 * 2"], [], "leak_final_action"),
        ("Start with 7+9; then think.", ["7 + 9", "16 * 2"], [], None),
        # a one-action solution: the answer itself, even a single character
        ("The number is 7.", ["7"], [], "leak_sequence"),
        ("The number is \\boxed{7}.", ["\\boxed{7}"], [], "leak_sequence"),
        ("There are 17 numbers; halve the range.", ["7"], [], None),
        # final multi-character action, unless the agent is shown it anyway
        ("Finally submit PARIS.", ["look", "paris"], [], "leak_final_action"),
        ("Answer with the city name; Parisian cafes are a red herring.", ["look", "paris"], [], None),
        ("Move up when stuck.", ["left", "up"], [OBS], None),
        ("Move up when stuck.", ["left", "up"], [], "leak_final_action"),
        ("Go left, then up.", ["left", "up"], [OBS], "leak_sequence"),
        # single-character final action of a longer sequence is too common to reject
        ("Press a key, then b.", ["x", "y", "b"], [], None),
        # tool use: the final answer inside <answer> is unwrapped; protocol words in the task are public
        (
            "Look up the order, then answer ORD-991.",
            ['<tool_call>{"name": "f"}</tool_call>', "<answer>ORD-991</answer>"],
            [],
            "leak_final_action",
        ),
        (
            "Finish by answering done.",
            ['<tool_call>{"name": "f"}</tool_call>', "<answer>done</answer>"],
            ["When all steps are complete, submit <answer>done</answer>."],
            None,
        ),
        ("Anything at all.", [], [], None),
        ("Anything at all.", ["", "  "], [], None),
    ],
)
def test_leak_reason(hint: str, solution: list[str], public: list[str], reason: str | None) -> None:
    assert hints.leak_reason(hint, solution, public) == reason


def test_clean_hint_applies_the_leak_filter() -> None:
    assert hints.clean_hint("The secret is 7.", ["7"]) == (None, "leak_sequence")
    assert hints.clean_hint("The secret is 7.", None) == ("The secret is 7.", "ok")
    assert hints.clean_hint("<think>it is 7</think>Halve the range.", ["7"]) == ("Halve the range.", "ok")


class FakeTemplate:
    def render(
        self, messages: Sequence[Message], tools: Any = None, *, add_generation_prompt: bool = True
    ) -> list[int]:
        return [len(str(m["content"])) % 1000 for m in messages] + [7]

    def decode(self, token_ids: Sequence[int]) -> str:
        return ""


class FakePolicy:
    def __init__(self, completions: list[Completion]) -> None:
        self.template = FakeTemplate()
        self.completions = completions
        self.params: list[SamplingParams] = []
        self.prompts: list[list[int]] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        self.params.append(params)
        self.prompts.extend(list(p) for p in prompts)
        return self.completions[: len(prompts)]

    def load_weights(self, path: Path) -> None:
        raise NotImplementedError


def test_a_hint_prefix_starts_the_reply_and_the_continuation_is_the_hint() -> None:
    from spade.scripted.policy import ByteTemplate  # noqa: PLC0415

    policy = FakePolicy([Completion(" guess the middle of what is left.", (1,), (-0.1,), "stop")])
    policy.template = ByteTemplate()  # type: ignore[assignment] # a template that encodes text
    request = HintRequest("env-0", CODE, OBS, "games", ("7",))
    params = SamplingParams(temperature=0.3, max_tokens=8)
    out = asyncio.run(hints.write_hints(policy, [request], params, prefix="Hint:"))
    assert policy.template.decode(policy.prompts[0]).endswith("<|assistant|>Hint:")
    assert out[0].hint == "guess the middle of what is left."
    plain = FakePolicy([Completion("x y z w", (1,), (-0.1,), "stop")])
    plain.template = ByteTemplate()  # type: ignore[assignment]
    asyncio.run(hints.write_hints(plain, [request], params))
    assert not policy.template.decode(plain.prompts[0]).endswith("Hint:")


def test_write_hints_end_to_end() -> None:
    def req(i: int) -> HintRequest:
        return HintRequest(f"env-{i}", CODE, OBS, "games", ("7",))

    policy = FakePolicy(
        [
            Completion("<think>secret 7</think>Halve the range each turn.", (1, 2), (-0.1, -0.2), "stop"),
            Completion("It is 7.", (3,), (-0.3,), "stop"),
            Completion("<think>long reasoning that never", (4, 5, 6), (-0.1, -0.1, -0.1), "length"),
            Completion("", (), (), "error", error="timeout"),
        ]
    )
    params = SamplingParams(temperature=0.3, max_tokens=64)
    out = asyncio.run(hints.write_hints(policy, [req(i) for i in range(4)], params))
    assert policy.params == [params]
    assert [(h.env_id, h.hint, h.reason) for h in out] == [
        ("env-0", "Halve the range each turn.", "ok"),
        ("env-1", None, "leak_sequence"),
        ("env-2", None, "truncated"),
        ("env-3", None, "model_error"),
    ]
    assert out[0].completion.startswith("<think>")
    assert out[0].mask_T[-2:] == (1, 1)
    assert out[0].sample_logprobs_T[-2:] == (-0.1, -0.2)
    assert OBS in out[0].messages[1]["content"]
    metrics = hints.hint_metrics(out)
    assert metrics["hint/accepted_rate"] == 0.25
    assert metrics["hint/leak_sequence_rate"] == 0.25
    reasons = {k: v for k, v in metrics.items() if k.endswith("_rate") and k != "hint/accepted_rate"}
    assert sum(reasons.values()) == pytest.approx(1.0)
    assert metrics["hint/sampled_tokens"] == 2 + 1 + 3  # every completion token of the three that came back
    assert hints.hint_metrics([]) == {}
    with pytest.raises(RuntimeError, match="1 completions for 2 prompts"):
        asyncio.run(hints.write_hints(FakePolicy(policy.completions[:1]), [req(0), req(1)], params))


@pytest.mark.parametrize("name", envs.names())
def test_leak_filter_over_the_seed_library(name: str) -> None:
    """Spelling out a seed environment's solution is caught; generic strategy advice passes."""
    env = envs.make(name)
    for seed in (0, 1, 2):
        obs, _ = env.reset(seed=seed)
        raw = env.solution()
        solution = [raw] if isinstance(raw, str) else list(raw)
        spelled = "Do exactly this: " + "; then ".join(solution) + "."
        assert hints.leak_reason(spelled, solution, [obs]) == "leak_sequence"
        generic = (
            "Read the feedback after each action carefully and plan a few steps ahead before committing."
        )
        assert hints.leak_reason(generic, solution, [obs]) is None
        if isinstance(env, ToolEnv):
            answer = hints._action_text(solution[-1])
            assert hints.leak_reason(f"The answer is {answer}.", solution, [obs]) == "leak_final_action"


def test_code_only_hint_prompt_shows_no_instance() -> None:
    msgs = hints.build_hint_messages(CODE, None, "games", max_words=42)
    assert msgs[0]["content"] == prompt_texts.HINT_SYSTEM_GAMES_CODE.format(max_words=42)
    assert "every instance" in " ".join(msgs[0]["content"].split())
    assert CODE.rstrip() in msgs[1]["content"]
    assert "First observation" not in msgs[1]["content"]
    tool = hints.build_hint_messages(CODE, None, "tool_use")
    assert tool[0]["content"] == prompt_texts.HINT_SYSTEM_TOOLS_CODE.format(max_words=80)
    assert "value-free plan" in tool[0]["content"]
    assert "every instance" in " ".join(tool[0]["content"].split())


def test_code_only_hints_are_still_checked_against_a_played_instance() -> None:
    code_only = HintRequest("env-0", CODE, None, "games", ("up", "7"), public=(OBS,))
    policy = FakePolicy(
        [
            Completion("Press up, then answer 7.", (1,), (-0.1,), "stop"),
            Completion("Move the pointer up first.", (2,), (-0.1,), "stop"),  # 'up' is shown in OBS
            Completion("Answer done once every step is complete.", (3,), (-0.1,), "stop"),
        ]
    )
    tool = HintRequest(
        "env-2", CODE, None, "tool_use", ("<tool_call>{}</tool_call>", "<answer>done</answer>")
    )
    out = asyncio.run(
        hints.write_hints(policy, [code_only, code_only, tool], SamplingParams(temperature=0.3, max_tokens=8))
    )
    assert [h.reason for h in out] == ["leak_sequence", "ok", "ok"]  # 'done' is the protocol word, no secret
    assert "First observation" not in out[0].messages[1]["content"]


@pytest.mark.parametrize("mode", ["code", "instance"])
def test_hint_requests_code_only_or_one_per_seed(mode: str) -> None:
    """Code mode asks once, from the code alone; instance mode asks once per hinted seed, with its instance."""
    from spade.play.rollout import episode_seeds  # noqa: PLC0415
    from spade.sandbox.inprocess import InProcessSandbox  # noqa: PLC0415

    name = "countdown"  # its first observation shows the instance (a hidden-state game's would not)
    cfg = dataclasses.replace(
        PAPER,
        designer=dataclasses.replace(PAPER.designer, hint_mode=mode),  # type: ignore[arg-type]
        rollout=RolloutConfig(plays_per_env=2, hint_plays_per_env=3),
    )
    record: Any = SimpleNamespace(env_id="env-a", code=envs.spec(name).source())
    with InProcessSandbox() as box:
        hinter = hints.Hinter(
            cfg.designer,
            None,
            box,
            None,
            cfg.seed,
            hint_plays=cfg.rollout.hint_plays_per_env,  # type: ignore[arg-type]
        )
        requests = asyncio.run(hinter.requests(record, 4))
    env = envs.make(name)
    observations = [env.reset(seed=s)[0] for s in episode_seeds(cfg.seed, 4, "env-a", 3)]
    assert len(set(observations)) > 1
    assert all(r is not None for r in requests)
    if mode == "code":
        assert [(r.first_observation, r.public) for r in requests if r] == [(None, (observations[0],))]
    else:
        assert [r.first_observation for r in requests if r] == observations


def test_played_hints_per_seed() -> None:
    from spade.design import DesignOutcome  # noqa: PLC0415

    shared = DesignOutcome("e", "logical_deduction", "generate", True, "e", "Eliminate.", "")
    assert shared.hints_for(3) == ["Eliminate."] * 3
    per_seed = dataclasses.replace(shared, seed_hints=("a", None))
    assert per_seed.hints_for(3) == ["a", None, None]


def test_a_long_environment_is_cut_to_fit_the_hint_prompt() -> None:
    from spade.scripted.policy import ByteTemplate  # noqa: PLC0415

    long_code = CODE + "".join(f"    def rule_{i}(self):\n        return {i}\n\n" for i in range(300))
    requests = [
        HintRequest("short", CODE, OBS, "games", ("7",)),
        HintRequest("long", long_code, OBS, "games"),
    ]
    policy = FakePolicy([Completion("Halve the range each turn.", (1,), (-0.1,), "stop")] * 2)
    policy.template = ByteTemplate()  # type: ignore[assignment] # one token per byte
    params = SamplingParams(temperature=0.3, max_tokens=8)
    out = asyncio.run(hints.write_hints(policy, requests, params, max_prompt_tokens=2000))
    assert len(long_code) > 2000
    assert all(len(p) <= 2000 for p in policy.prompts)
    shown = out[1].messages[1]["content"]
    assert "rule_0" in shown
    assert "rule_299" not in shown
    assert "truncated for this prompt" in shown
    assert out[0].messages[1]["content"].count(CODE) == 1  # the short one is shown whole
    assert "truncated" not in out[0].messages[1]["content"]
    assert [h.reason for h in out] == ["ok", "ok"]
    policy.prompts.clear()
    asyncio.run(hints.write_hints(policy, requests, params))  # no budget: the whole code
    assert len(policy.prompts[1]) > len(long_code)
