"""Worked demonstrations: recorded from the scripted solution in the sandbox, on seeds never played."""

from __future__ import annotations

import asyncio

from spade import envs
from spade.config import PlayConfig
from spade.play.agent import Episode, play_episode
from spade.play.demos import DEMO_SEED_BASE, Demo, demo_messages, demo_seed, demos_by_env, record_demo
from spade.play.rollout import PlayJob, episode_seeds, run_jobs
from spade.sandbox import Sandbox
from spade.sandbox.inprocess import InProcessSandbox
from test_agent import CannedPolicy

NO_SOLUTION = """from spade.env import TextEnv


class NoScript(TextEnv):
    skill = "logical_deduction"
    max_turns = 3

    def _reset(self, options):
        return "Say anything.", {}

    def step(self, action):
        return self.end_turn("ok", 0.0)


ENV = NoScript
"""


def test_demo_seeds_never_collide_with_played_seeds() -> None:
    played = episode_seeds(0, 3, "countdown", 64)
    assert max(played) < DEMO_SEED_BASE
    seeds = {demo_seed("countdown", played, k) for k in range(4)}
    assert len(seeds) == 4
    assert min(seeds) >= DEMO_SEED_BASE
    assert demo_seed("countdown", played) != demo_seed("countdown", episode_seeds(0, 4, "countdown", 64))


def test_a_demo_is_the_scripted_win_of_another_instance() -> None:
    source = envs.spec("countdown").source()

    async def run() -> tuple[Demo | None, Demo | None, Demo | None]:
        with Sandbox() as sb:
            seed = DEMO_SEED_BASE + 5
            ok = await record_demo(sb, source, seed=seed, options={"difficulty": 0}, max_actions=8)
            short = await record_demo(sb, source, seed=seed, options={"difficulty": 0}, max_actions=1)
            none = await record_demo(sb, NO_SOLUTION, seed=seed, options=None, max_actions=8)
            return ok, short, none

    ok, short, none = asyncio.run(run())
    assert short is None
    assert none is None
    assert ok is not None
    env = envs.make("countdown")
    obs, _ = env.reset(seed=DEMO_SEED_BASE + 5, options={"difficulty": 0})
    assert ok.turns[0][0] == obs
    assert [a for _, a in ok.turns] == env.solution()
    assert "win" in ok.final.lower()


def test_the_agent_sees_the_demo_before_its_own_game() -> None:
    demo = Demo(
        (("Pick a door (1-3).", "2"), ("Door 2 is locked. Pick another.", "3")), "Door 3 opens. You win!"
    )
    msgs = demo_messages([demo])
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    assert msgs[1]["content"] == "\\boxed{2}"
    policy = CannedPolicy(["\\boxed{1 + 1}"] * 8)
    source = envs.spec("countdown").source()

    async def run() -> object:
        with InProcessSandbox() as sb:
            env = await sb.aopen(source)
            try:
                cfg = PlayConfig(max_turns=1, turn_tokens=64, context_tokens=100_000)
                return await play_episode(policy, env, Episode("c", 1, demos=(demo,)), cfg, is_tool_env=False)
            finally:
                await env.aclose()

    traj = asyncio.run(run())
    seen = policy.prompts[0]
    assert seen.index("Pick a door") < seen.index("Door 3 opens. You win!") < seen.index("Countdown")
    assert len(traj.transitions) == 1  # type: ignore[attr-defined]


def test_run_jobs_gives_every_play_of_an_env_the_same_demo() -> None:
    source = envs.spec("countdown").source()
    seeds = episode_seeds(0, 0, "countdown", 2)
    jobs = [PlayJob("countdown", source, s) for s in seeds] + [PlayJob("x", NO_SOLUTION, seeds[0])]
    policy = CannedPolicy(["\\boxed{1 + 1}"] * 50)
    cfg = PlayConfig(max_turns=1, turn_tokens=64, context_tokens=100_000, demos=1, difficulty=0)

    async def run() -> tuple[object, dict[str, tuple[Demo, ...]]]:
        with Sandbox() as sb:
            found = await demos_by_env(sb, [(j.env_id, j.source, j.seed) for j in jobs], n=1, options=None,
                                       max_actions=8)  # fmt: skip
            return await run_jobs(sb, policy, jobs, cfg, max_concurrent=4), found

    trajs, found = asyncio.run(run())
    assert len(found["countdown"]) == 1
    assert found["x"] == ()
    assert len(trajs) == 3  # type: ignore[arg-type]
    with_demo = [p for p in policy.prompts if "example game" in p]
    assert len(with_demo) == 2  # both countdown plays; the env without solution() plays without
