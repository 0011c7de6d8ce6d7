"""The released recipe's agent side: its prompt, its context stop rule, and thinking models whose earlier
reasoning the chat template leaves out (a Qwen3-style template fixture and the real SmolLM2 tokenizer)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from spade import envs
from spade.backends import prefix_cache_hit_rate
from spade.backends.embedded import resolve_model
from spade.backends.template import HFChatTemplate, TurnTemplate
from spade.config import PlayConfig, TrainConfig
from spade.play.agent import Episode, play_episode, reply_budget
from spade.play.prompts import GAME_SYSTEM, opening_messages, released_game_message
from spade.play.rollout import prompt_reuse
from spade.replies import parse_action, split_reasoning
from spade.sandbox.inprocess import InProcessSandbox
from spade.scoring.samples import agent_samples, score_agent
from spade.scripted.policy import ByteTemplate
from spade.types import Completion, PlayStatus, SamplingParams, Trajectory

QWEN3_STYLE = (Path(__file__).parent / "fixtures" / "chat_templates" / "qwen3_style.jinja").read_text()
CFG = PlayConfig(max_turns=30, turn_tokens=512, context_tokens=200_000)
RELEASED = replace(CFG, agent_prompt="released", stop_margin_tokens=64)


class Canned:
    """Replies from a list on any template, honouring ``max_tokens``; records prompts and parameters."""

    def __init__(self, template: TurnTemplate, replies: Sequence[str]) -> None:
        self.template = template
        self.replies = list(replies)
        self.prompts: list[tuple[int, ...]] = []
        self.params: list[SamplingParams] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        out = []
        for p in prompts:
            self.prompts.append(tuple(p))
            self.params.append(params)
            text = self.replies.pop(0) if self.replies else "\\boxed{0}"
            eot = self.template.end_of_turn_id
            ids = [*self.template.encode(text), *([] if eot is None else [eot])]
            finish = "stop" if len(ids) <= params.max_tokens else "length"
            ids = ids[: params.max_tokens]
            shown = text if finish == "stop" else self.template.decode(ids)  # engines drop special tokens
            out.append(Completion(shown, tuple(ids), tuple(-0.5 for _ in ids), finish))
        return out

    def load_weights(self, path: Path) -> None:
        del path


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer  # noqa: PLC0415 -- heavy import, keep collection fast

    return AutoTokenizer.from_pretrained(resolve_model("embedded"))


def solution_of(name: str, seed: int) -> list[str]:
    env = envs.make(name)
    env.reset(seed=seed)
    solution = env.solution()
    assert isinstance(solution, list)
    return solution


def first_observation(name: str, seed: int) -> str:
    return envs.make(name).reset(seed=seed)[0]


def play(name: str, policy: Canned, cfg: PlayConfig, seed: int = 3) -> Trajectory:
    async def run() -> Trajectory:
        with InProcessSandbox() as sb:
            env = await sb.aopen(envs.spec(name).source())
            try:
                return await play_episode(
                    policy, env, Episode(name, seed), cfg, is_tool_env=env.meta.is_tool_env
                )
            finally:
                await env.aclose()

    return asyncio.run(run())


# -- the released prompt -----------------------------------------------------------------------------------


def test_released_prompt_has_no_system_turn_and_asks_for_step_by_step_reasoning_in_a_box() -> None:
    actions = solution_of("countdown", 3)
    replies = [
        f"Let me reason step by step.\nThe move that helps is {a}.\nSo: \\boxed{{{a}}}" for a in actions
    ]
    policy = Canned(ByteTemplate(), replies)
    t = play("countdown", policy, RELEASED)
    assert t.success  # the released reply format is parsed: the first \boxed{} after the reasoning
    first = ByteTemplate().decode(policy.prompts[0])
    obs = first_observation("countdown", 3)
    assert first == (
        "<|user|>You are playing a language game. Make valid actions to win.\nObservation: "
        f"{obs}\nPlease reason step by step, and put your final answer within \\boxed{{}}.\n<|assistant|>"
    )
    # later observations are plain user messages
    second = ByteTemplate().decode(policy.prompts[1])
    assert second.endswith(f"<|user|>{t.transitions[0].observation}\n<|assistant|>")
    assert "<|system|>" not in second


def test_compact_prompt_is_kept_for_small_models_and_tool_envs_get_their_raw_observation() -> None:
    assert opening_messages("compact", "obs", is_tool_env=False) == [
        {"role": "system", "content": GAME_SYSTEM},
        {"role": "user", "content": "obs"},
    ]
    assert opening_messages("released", "obs", is_tool_env=False) == [
        {"role": "user", "content": released_game_message("obs")}
    ]
    assert opening_messages("released", "do the task", is_tool_env=True) == [
        {"role": "user", "content": "do the task"}
    ]
    with pytest.raises(ValueError, match="unknown agent prompt"):
        opening_messages("chatty", "obs", is_tool_env=False)  # type: ignore[arg-type]


def test_a_reply_restating_the_released_instruction_is_read_by_its_answer() -> None:
    reply = "I must put my final answer within \\boxed{}. Reasoning step by step, it is 7.\n\\boxed{7}"
    assert parse_action(reply, "boxed") == "7"
    assert parse_action("\\boxed{}", "boxed") == ""  # an empty box alone is still the (empty) action
    assert parse_action("<think>maybe \\boxed{2}</think>\n\nSo \\boxed{3}", "boxed") == "3"


# -- the context stop rule ---------------------------------------------------------------------------------


def test_reply_budget_released_and_whole_reply_rules() -> None:
    whole = PlayConfig(context_tokens=1000, turn_tokens=100)
    assert [reply_budget(n, whole) for n in (899, 900, 901)] == [100, 100, 0]
    margin = replace(whole, stop_margin_tokens=64)
    assert [reply_budget(n, margin) for n in (800, 900, 935, 936, 937)] == [100, 36, 1, 0, 0]


@pytest.mark.parametrize("margin", [None, 64])
def test_the_context_stops_an_episode_exactly_at_the_boundary(tokenizer: Any, margin: int | None) -> None:
    """With the real tokenizer: a first prompt of L tokens is played when the rule leaves one token of reply
    (L + 64 + 1 under the margin, L + turn_tokens under the whole-reply rule), and not one token sooner."""
    template = HFChatTemplate(tokenizer)
    obs = first_observation("switchboard", 3)
    length = len(
        template.render(opening_messages("compact", obs, is_tool_env=False), add_generation_prompt=True)
    )
    turn = 16
    fits = length + (margin + 1 if margin is not None else turn)
    for context, played in ((fits - 1, False), (fits, True)):
        cfg = PlayConfig(max_turns=1, turn_tokens=turn, context_tokens=context, stop_margin_tokens=margin)
        policy = Canned(template, ["\\boxed{garbage}"])
        t = play("switchboard", policy, cfg)
        assert len(policy.prompts) == int(played), (context, margin)
        if played:
            assert len(policy.prompts[0]) == length
            assert policy.params[0].max_tokens == (1 if margin is not None else turn)
        else:
            assert t.status is PlayStatus.CONTEXT_BUDGET
            assert t.transitions == ()


def test_under_the_margin_each_reply_gets_what_remains_and_the_episode_ends_on_context(
    tokenizer: Any,
) -> None:
    template = HFChatTemplate(tokenizer)
    cfg = PlayConfig(max_turns=30, turn_tokens=24, context_tokens=600, stop_margin_tokens=64, on_length="act")
    policy = Canned(template, ["I press a switch. \\boxed{garbage}"] * 30)
    t = play("switchboard", policy, cfg)
    assert t.status is PlayStatus.CONTEXT_BUDGET
    for prompt, params in zip(policy.prompts, policy.params, strict=True):
        assert params.max_tokens == min(24, 600 - len(prompt) - 64) >= 1
    assert reply_budget(len(t.tokens_T), cfg) == 0  # the next prompt left 64 or fewer tokens


# -- thinking models ---------------------------------------------------------------------------------------


def thinking_replies(actions: Sequence[str]) -> list[str]:
    return [
        f"<think>\nTurn {i}: I work out that {a} is the move.\n</think>\n\n\\boxed{{{a}}}"
        for i, a in enumerate(actions)
    ]


def test_thinking_turns_are_prompted_without_earlier_reasoning_and_trained_one_by_one(tokenizer: Any) -> None:
    template = HFChatTemplate(tokenizer, chat_template=QWEN3_STYLE, thinking=True)
    actions = solution_of("countdown", 3)
    replies = thinking_replies(actions)
    policy = Canned(template, replies)
    t = play("countdown", policy, RELEASED)
    assert t.success
    assert len(t.turns) == len(actions) == len(policy.prompts) > 1
    for k, (turn, prompt) in enumerate(zip(t.turns, policy.prompts, strict=True)):
        text = template.decode(prompt)
        assert all(f"Turn {j}:" not in text for j in range(len(actions)))  # no reasoning of earlier turns
        assert text.count("\\boxed{" + actions[0] + "}") == int(k > 0)  # but every earlier answer
        # each turn is its prompt (mask 0) then exactly the sampled reply with its logprobs (mask 1)
        assert turn.tokens_T[: len(prompt)] == prompt
        sampled = [tok for tok, m in zip(turn.tokens_T, turn.mask_T, strict=True) if m]
        assert sampled == [*template.encode(replies[k]), template.end_of_turn_id]
        assert {lp for lp, m in zip(turn.sample_logprobs_T, turn.mask_T, strict=True) if m} == {-0.5}
    # the prompt is the template's own rendering of the history, reasoning passed as reasoning_content
    history: list[dict[str, str]] = [
        {"role": "user", "content": released_game_message(first_observation("countdown", 3))}
    ]
    for reply, tr in zip(replies[:-1], t.transitions, strict=False):
        reasoning, answer = split_reasoning(reply)
        history += [
            {"role": "assistant", "content": answer, "reasoning_content": reasoning},
            {"role": "user", "content": tr.observation},
        ]
    assert policy.prompts[-1] == tuple(template.render(history, add_generation_prompt=True))
    # the stream keeps the record of everything sampled, reasoning included
    assert "Turn 0:" in template.decode(t.tokens_T)


def test_thinking_keeps_every_earlier_prompt_as_a_prefix_and_measures_the_reuse(tokenizer: Any) -> None:
    template = HFChatTemplate(tokenizer, chat_template=QWEN3_STYLE, thinking=True)
    actions = solution_of("countdown", 3)
    t = play("countdown", Canned(template, thinking_replies(actions)), RELEASED)
    reused = total = 0
    for prev, cur in zip(t.turns, t.turns[1:], strict=False):
        prompt = cur.mask_T.index(1)
        prev_prompt = prev.mask_T.index(1)
        assert cur.tokens_T[:prev_prompt] == prev.tokens_T[:prev_prompt]  # the cache keeps the whole prompt
        shared = next(i for i, (a, b) in enumerate(zip(prev.tokens_T, cur.tokens_T, strict=False)) if a != b)
        assert prev_prompt <= shared < len(prev.tokens_T)  # the reasoning is not reused
        reused, total = reused + shared, total + prompt
    rate = prompt_reuse([t])["speed/prompt_reuse"]
    assert rate == pytest.approx(reused / total)
    # the same episode as one token stream (thinking off) reuses every earlier request whole
    stream_template = HFChatTemplate(tokenizer, chat_template=QWEN3_STYLE)
    plain = play("countdown", Canned(stream_template, thinking_replies(actions)), RELEASED)
    assert not plain.turns
    assert rate < prompt_reuse([plain])["speed/prompt_reuse"] < 1.0


def test_each_thinking_turn_is_a_sample_with_the_episode_advantage(tokenizer: Any) -> None:
    template = HFChatTemplate(tokenizer, chat_template=QWEN3_STYLE, thinking=True)
    actions = solution_of("countdown", 3)
    won = play("countdown", Canned(template, thinking_replies(actions)), RELEASED)
    lost = play("countdown", Canned(template, ["<think>\nno idea\n</think>\n\n\\boxed{0}"] * 40), RELEASED)
    samples, metrics, _ = score_agent(TrainConfig(), [won, lost])
    want = [1.0] * len(won.turns) + [-1.0] * len(lost.turns)
    assert [s.advantage for s in samples] == pytest.approx(want, abs=1e-6)
    assert [s.tokens_T for s in samples] == [turn.tokens_T for turn in (*won.turns, *lost.turns)]
    assert len(agent_samples(won, 0.5)) == len(actions)
    assert metrics["agent/sampled_tokens"] == sum(sum(turn.mask_T) for turn in (*won.turns, *lost.turns))


def test_the_engine_hit_rate_is_the_play_phases_share_of_cached_prompt_tokens() -> None:
    before = {"engine/prompt_tokens": 1000.0, "engine/prompt_tokens_cached": 400.0}
    after = {"engine/prompt_tokens": 3000.0, "engine/prompt_tokens_cached": 1900.0}
    assert prefix_cache_hit_rate(before, after) == {"speed/prefix_cache_hit_rate": 0.75}
    assert prefix_cache_hit_rate(after, after) == {}  # no prompt taken
    assert prefix_cache_hit_rate({}, {"engine/calls": 3.0}) == {}  # an engine that does not count them
