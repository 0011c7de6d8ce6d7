"""Multi-turn play: games and tool use, token accounting, and every way an episode can end."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from spade import envs
from spade.cli.play import ended_line
from spade.config import PlayConfig
from spade.play.agent import Episode, play_episode
from spade.sandbox import Limits, Sandbox
from spade.sandbox.inprocess import InProcessSandbox
from spade.scripted.policy import ByteTemplate
from spade.types import Completion, FinishReason, PlayStatus, SamplingParams, status_words


class CannedPolicy:
    """Replies from a list, recording the prompts it saw (byte tokens)."""

    def __init__(self, replies: Sequence[str], finish: FinishReason = "stop") -> None:
        self.template = ByteTemplate()
        self.replies = list(replies)
        self.finish = finish
        self.prompts: list[str] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        out = []
        for p in prompts:
            self.prompts.append(self.template.decode(p))
            text = self.replies.pop(0) if self.replies else "\\boxed{0}"
            if self.finish == "error":
                out.append(Completion("", (), (), "error", error="server gone"))
                continue
            ids = (*text.encode(), 256)
            out.append(Completion(text, ids, tuple(-0.5 for _ in ids), self.finish))
        return out

    def load_weights(self, path: Path) -> None:
        del path


def solution_of(name: str, seed: int) -> list[str]:
    env = envs.make(name)
    env.reset(seed=seed)
    solution = env.solution()
    assert isinstance(solution, list)
    return solution


def play(name: str, policy: CannedPolicy, cfg: PlayConfig, seed: int = 3, hint: str | None = None) -> object:
    source = envs.spec(name).source()

    async def run() -> object:
        with InProcessSandbox() as sb:
            env = await sb.aopen(source)
            try:
                return await play_episode(
                    policy, env, Episode(name, seed, hint), cfg, is_tool_env=env.meta.is_tool_env
                )
            finally:
                await env.aclose()

    return asyncio.run(run())


CFG = PlayConfig(max_turns=30, turn_tokens=512, context_tokens=200_000)


def test_game_won_with_boxed_actions_and_exact_token_accounting() -> None:
    replies = [f"Thinking... \\boxed{{{a}}}" for a in solution_of("countdown", 3)]
    policy = CannedPolicy(replies)
    t = play("countdown", policy, CFG)
    assert t.status is PlayStatus.TERMINATED
    assert t.success
    assert t.episode_return == 1.0
    assert len(t.transitions) == len(replies)
    # every sampled reply appears verbatim under mask 1, with its recorded logprobs
    sampled = [tok for tok, m in zip(t.tokens_T, t.mask_T, strict=True) if m]
    assert sampled == [tok for r in replies for tok in (*r.encode(), 256)]
    assert {lp for lp, m in zip(t.sample_logprobs_T, t.mask_T, strict=True) if m} == {-0.5}
    # and the stream is the prompt the policy saw at the last turn, plus that reply
    assert ByteTemplate().decode(t.tokens_T).startswith(policy.prompts[-1])


def test_tool_env_won_through_native_tool_calls_and_answer() -> None:
    actions = solution_of("release_pipeline", 5)
    t = play("release_pipeline", CannedPolicy(actions), CFG, seed=5)
    assert t.success, [tr.observation for tr in t.transitions][-3:]
    assert any(tr.action == "tool_calls" for tr in t.transitions)


def test_hint_is_injected_in_the_first_observation_only() -> None:
    policy = CannedPolicy(["\\boxed{1 + 1}"])
    play(
        "countdown",
        policy,
        PlayConfig(max_turns=1, turn_tokens=64, context_tokens=100_000),
        hint="Work backwards",
    )
    assert "HINT: Work backwards" in policy.prompts[0]


@pytest.mark.parametrize(
    ("finish", "cfg", "status"),
    [
        ("error", CFG, PlayStatus.MODEL_ERROR),
        ("length", CFG, PlayStatus.LENGTH),
        ("stop", PlayConfig(max_turns=3, turn_tokens=64, context_tokens=100_000), PlayStatus.TURN_BUDGET),
        ("stop", PlayConfig(max_turns=30, turn_tokens=64, context_tokens=1_200), PlayStatus.CONTEXT_BUDGET),
    ],
)
def test_every_budget_and_failure_is_a_status(
    finish: FinishReason, cfg: PlayConfig, status: PlayStatus
) -> None:
    policy = CannedPolicy(["\\boxed{garbage}"] * 40, finish=finish)
    t = play("switchboard", policy, cfg)
    assert t.status is status
    assert not t.success


def test_every_status_reads_as_words_where_a_person_sees_it() -> None:
    for status in PlayStatus:
        words = status_words(status)
        assert words == status_words(status.value)
        assert status.value not in words  # words, not the code again
    assert ended_line(PlayStatus.CONTEXT_BUDGET, 2) == (
        "Episode ended after 2 turns: the context budget ran out (play.context_tokens)"
    )
    assert ended_line(PlayStatus.TURN_BUDGET, 1).startswith(
        "Episode ended after 1 turn: the agent's turn budget"
    )
    assert status_words("from_a_newer_version") == "from_a_newer_version"


def test_crashing_environment_is_recorded_not_raised() -> None:
    source = (
        "from spade.env import TextEnv\n\nclass Boom(TextEnv):\n    def _reset(self, options):\n"
        "        return 'go', {}\n\n    def step(self, action):\n        raise RuntimeError('boom')\n\nENV = Boom\n"
    )

    async def run() -> object:
        with Sandbox(limits=Limits(call_timeout_s=2.0)) as sb:
            env = await sb.aopen(source)
            try:
                return await play_episode(
                    CannedPolicy(["\\boxed{1}"]), env, Episode("boom", 1), CFG, is_tool_env=False
                )
            finally:
                await env.aclose()

    t = asyncio.run(run())
    assert t.status is PlayStatus.ENV_ERROR
    assert "crash" in t.error


def test_cut_reply_can_still_act_and_earns_graded_format_credit() -> None:
    cfg = PlayConfig(max_turns=2, turn_tokens=64, context_tokens=100_000, on_length="act", format_reward=0.1)
    policy = CannedPolicy(["rambling \\boxed{1 + 1}", "no box at all"], finish="length")
    t = play("countdown", policy, cfg)
    assert len(t.transitions) == 2  # both cut replies were played
    assert t.status is PlayStatus.TURN_BUDGET
    assert t.episode_return == pytest.approx(0.05)  # one of two replies well-formed


def test_lenient_mode_credits_concise_unboxed_actions() -> None:
    cfg = PlayConfig(
        max_turns=2, turn_tokens=64, context_tokens=100_000, action_mode="lenient", format_reward=0.1
    )
    policy = CannedPolicy(
        ["I think the move is\n3 + 3", "Let me explain at great length why this is a hard puzzle."]
    )
    t = play("countdown", policy, cfg)
    assert t.episode_return == pytest.approx(0.05)  # the concise reply counts, the rambling one does not
