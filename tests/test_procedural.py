"""Procedural-pool baseline: the difficulty controller, the Reasoning-Gym task environments in the real
sandbox, and short ``--mode procedural`` runs with the scripted backend (levels, metrics, resume, bad input)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spade import modes
from spade.cli.train import parse_config
from spade.config import ConfigError, ModelConfig, PlayConfig, ProceduralConfig, RolloutConfig, TrainConfig
from spade.config import DesignerConfig as Designer
from spade.envs import rg_tasks
from spade.modes.procedural import TaskLevel, observe, outcomes, update
from spade.play.demos import demos_by_env
from spade.run.loop import train
from spade.run.state import LoopState
from spade.rundir import RunDir
from spade.sandbox import Limits, Sandbox
from spade.scripted import policy as scripted
from spade.types import PlayStatus, Trajectory

ROOT = Path(__file__).resolve().parents[1]
RULE = {"window": 4, "upper": 0.75, "lower": 0.25}


# -- the controller ----------------------------------------------------------------------------------------


def test_a_full_window_at_or_above_upper_moves_up_and_clears_the_window() -> None:
    assert update(TaskLevel(0, 3), [True, True, True, False], **RULE) == TaskLevel(1, 3, ())


def test_a_window_that_is_not_full_decides_nothing() -> None:
    assert update(TaskLevel(0, 3), [True, True, True], **RULE) == TaskLevel(0, 3, (True, True, True))


def test_a_full_window_at_or_below_lower_moves_down_and_clears_the_window() -> None:
    state = TaskLevel(2, 3, (False, False))
    assert update(state, [False, True], **RULE) == TaskLevel(1, 3, ())


def test_the_window_slides_over_the_newest_episodes() -> None:
    # (F, F, F) + four wins: the newest four are all wins -> up, though 4 of 7 overall is only 0.57.
    assert update(TaskLevel(1, 3, (False,) * 3), [True] * 4, **RULE) == TaskLevel(2, 3, ())
    # a rate between the bounds keeps the level and the newest four outcomes
    kept = update(TaskLevel(1, 3, (True, True)), [False, True, False], **RULE)
    assert kept == TaskLevel(1, 3, (True, False, True, False))


def test_levels_are_clamped_to_the_curriculum_and_the_window_keeps_sliding() -> None:
    assert update(TaskLevel(3, 3), [True] * 5, **RULE) == TaskLevel(3, 3, (True,) * 4)
    assert update(TaskLevel(0, 3), [False] * 4, **RULE) == TaskLevel(0, 3, (False,) * 4)


def test_observe_updates_played_tasks_and_reports_levels_rates_and_moves() -> None:
    cfg = ProceduralConfig(tasks=("chain_sum", "gcd", "products"), **RULE)
    levels = {
        "chain_sum": TaskLevel(0, 10),
        "gcd": TaskLevel(2, 3, (False,) * 3),
        "products": TaskLevel(1, 10),
    }
    played = {"rg:chain_sum": [True] * 4, "rg:gcd": [False], "rg:unknown": [True], "rg:products": []}
    new, metrics = observe(levels, played, cfg)
    assert new == {"chain_sum": TaskLevel(1, 10), "gcd": TaskLevel(1, 3), "products": TaskLevel(1, 10)}
    assert metrics == {
        "procedural/win_rate/chain_sum": 1.0,
        "procedural/win_rate/gcd": 0.0,
        "procedural/level/chain_sum": 1.0,
        "procedural/level/gcd": 1.0,
        "procedural/level/products": 1.0,
        "procedural/level_mean": 1.0,
        "procedural/level_ups": 1.0,
        "procedural/level_downs": 1.0,
    }


def test_outcomes_leave_out_crashed_and_hinted_plays() -> None:
    def t(
        env: str, success: bool, status: PlayStatus = PlayStatus.TERMINATED, hinted: bool = False
    ) -> Trajectory:
        return Trajectory(env, 0, hinted, status, (), float(success), success)

    plays = [
        t("rg:a", True),
        t("rg:a", False, PlayStatus.ENV_ERROR),
        t("rg:a", False),
        t("rg:b", True, hinted=True),
    ]
    assert outcomes(plays) == {"rg:a": [True, False]}


def test_controller_state_round_trips_in_the_loop_state() -> None:
    state = LoopState(step=3, current=["rg:gcd"], mode={"gcd": TaskLevel(2, 3, (True, False)).to_dict()})
    assert LoopState.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    old = state.to_dict()
    old["levels"] = old.pop("mode")  # a checkpoint written before modes had a state of their own
    assert LoopState.from_dict(old) == state
    del old["levels"]  # a checkpoint written before procedural mode existed
    assert LoopState.from_dict(old).mode == {}


# -- levels and environments -------------------------------------------------------------------------------


def test_levels_come_from_the_packages_curriculum() -> None:
    levels = [json.loads(x) for x in rg_tasks.task_levels("basic_arithmetic")]
    assert len(levels) == 5  # num_terms has 5 levels, num_digits 4: the longest attribute
    assert levels[0] == {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    assert levels[-1] == {"min_terms": 2, "max_terms": 6, "min_digits": 1, "max_digits": 4}
    assert rg_tasks.task_levels("gsm_symbolic") == ("{}",)  # no curriculum: one level, the defaults


@pytest.fixture(scope="module")
def rg_sandbox() -> Iterator[Sandbox]:
    with Sandbox(limits=rg_tasks.sandbox_limits(Limits())) as box:
        yield box


def test_task_environment_runs_in_the_real_sandbox_and_resets_reproducibly(rg_sandbox: Sandbox) -> None:
    code = rg_tasks.task_source("chain_sum").code
    observations = []
    for seed, level in ((5, 0), (5, 0), (6, 0), (5, 9)):
        with rg_sandbox.open(code, filename="<rg:chain_sum>") as env:
            assert env.meta.difficulty_levels == 11
            obs, info = env.reset(seed=seed, options={"difficulty": level})
            assert info == {"task": "chain_sum", "level": level}
            assert rg_tasks.ASK in obs
            observations.append(obs)
    assert observations[0] == observations[1]
    assert observations[0] != observations[2]
    terms = [len(re.findall(r"\d+", o.split("problem:")[1].split("=")[0])) for o in observations]
    assert terms[0] == 2
    assert terms[3] >= 2


def test_solution_wins_and_a_wrong_answer_gets_feedback_then_loses(rg_sandbox: Sandbox) -> None:
    code = rg_tasks.task_source("products").code
    with rg_sandbox.open(code) as env:
        env.reset(seed=11, options={"difficulty": 1})
        (answer,) = env.solution()
        assert env.step(answer) == ("Correct!", 1.0, True, False, {})
    with rg_sandbox.open(code) as env:
        env.reset(seed=11, options={"difficulty": 1})
        obs, reward, terminated, truncated, _ = env.step(answer + "1")
        assert "incorrect" in obs
        assert rg_tasks.ASK.lower() in obs.lower()
        assert (reward, terminated, truncated) == (0.0, False, False)
        obs, reward, terminated, _, _ = env.step("not a number")
        assert (obs, reward, terminated) == ("Incorrect.", 0.0, True)
    for typed in (f"so <answer>{answer}</answer>", f"\\boxed{{ {answer} }}"):  # answer tags, a typed box
        with rg_sandbox.open(code) as env:
            env.reset(seed=11, options={"difficulty": 1})
            assert env.step(typed)[1] == 1.0


def test_worked_demonstrations_are_solved_episodes_at_the_played_level(rg_sandbox: Sandbox) -> None:
    code = rg_tasks.task_source("leg_counting").code
    demos = asyncio.run(
        demos_by_env(
            rg_sandbox, [("rg:leg_counting", code, 3)], n=1, options={"difficulty": 2}, max_actions=4
        )
    )
    ((demo,),) = demos.values()
    assert len(demo.turns) == 1
    assert demo.final == "Correct!"
    assert "how many legs" in demo.turns[0][0]


def test_spade_play_plays_a_task_in_the_sandbox_at_a_level() -> None:
    def play(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "spade.cli", "play", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    won = play("rg:chain_sum", "--solver", "scripted", "--seed", "3", "--difficulty", "2")
    assert won.returncode == 0, won.stderr
    assert "Result: won (reward +1.00)" in won.stdout
    bad = play("rg:chain_summ")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "spade play: rg:chain_summ: 'chain_summ' is not a Reasoning-Gym task; did you mean chain_sum, "
        "decimal_chain_sum? (`spade eval --list-tasks`)"
    ]


# -- configuration -------------------------------------------------------------------------------------------


def test_an_unknown_task_is_a_config_error_with_close_matches() -> None:
    with pytest.raises(ConfigError, match="'chain_summ' is not a Reasoning-Gym task; did you mean chain_sum"):
        modes.make(TrainConfig(mode="procedural", procedural=ProceduralConfig(tasks=("chain_summ",))))
    modes.make(TrainConfig(procedural=ProceduralConfig(tasks=("chain_summ",))))  # only in procedural mode


@pytest.mark.parametrize(
    "over", [{"window": 0}, {"upper": 0.3, "lower": 0.5}, {"upper": 1.5}, {"start_level": -1}, {"tasks": ()}]
)
def test_bad_controller_settings_are_config_errors(over: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="procedural"):
        modes.make(TrainConfig(mode="procedural", procedural=ProceduralConfig(**over)))  # type: ignore[arg-type]


def test_a_missing_reasoning_gym_says_to_install_the_eval_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym.factory", None)
    with pytest.raises(ConfigError, match=r"install the eval extra, pip install -e '\.\[eval\]'"):
        modes.make(TrainConfig(mode="procedural"))


def test_bad_task_name_on_the_command_line_exits_2_with_one_line(tmp_path: Path) -> None:
    args = ["train", "--mode", "procedural", "--model.backend", "scripted", "--runs-dir", str(tmp_path)]
    out = subprocess.run([sys.executable, "-m", "spade.cli", *args, "--procedural.tasks", "gcd", "chain_summ"],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "spade train: procedural.tasks: 'chain_summ' is not a Reasoning-Gym task; did you mean chain_sum, "
        "decimal_chain_sum? (`spade eval --list-tasks`)"
    ]
    assert not any(tmp_path.iterdir())


# -- training ------------------------------------------------------------------------------------------------


def _config(tmp_path: Path, name: str = "proc", steps: int = 3) -> TrainConfig:
    return TrainConfig(
        name=name,
        runs_dir=tmp_path,
        steps=steps,
        mode="procedural",
        model=ModelConfig(backend="scripted"),
        play=PlayConfig(action_mode="boxed", max_turns=4, turn_tokens=256, context_tokens=16384),
        designer=Designer(envs_per_regen=2, regen_interval=1),
        rollout=RolloutConfig(plays_per_env=4),
        procedural=ProceduralConfig(tasks=("chain_sum", "products"), **RULE),  # type: ignore[arg-type]
    )


def test_levels_rise_for_a_policy_that_always_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    always = classmethod(lambda cls, cfg, *, seed=0: cls(behaviour=cfg.scripted.behaviour, skill=1.0))
    monkeypatch.setattr(scripted.ScriptedPolicy, "from_config", always)
    run = train(_config(tmp_path))
    rows = run.read_metrics()
    assert [r["agent/win_rate"] for r in rows] == [1.0, 1.0, 1.0]
    # both tasks are played every step, four wins fill the window: one level up per step
    assert [r["procedural/level/chain_sum"] for r in rows] == [1.0, 2.0, 3.0]
    assert [r["procedural/level/products"] for r in rows] == [1.0, 2.0, 3.0]
    assert [r["procedural/level_mean"] for r in rows] == [1.0, 2.0, 3.0]
    assert all(r["procedural/level_ups"] == 2.0 and r["procedural/win_rate/chain_sum"] == 1.0 for r in rows)
    assert not any(k.startswith("designer/") for r in rows for k in r)  # agent only: no designer
    state = json.loads((run.checkpoints / "step_3" / "state.json").read_text())
    assert state["mode"]["chain_sum"] == {"level": 3, "top": 10, "window": []}
    glossary = (ROOT / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`([a-z_]+(?:/[A-Za-z_<>]+)*)`", glossary))
    families = tuple(d.split("<")[0] for d in documented if "<" in d)
    keys = {k for r in rows for k in r}
    assert {k for k in keys if k not in documented and not k.startswith(families)} == set()


def _args(tmp_path: Path, name: str) -> list[str]:
    return ["--mode", "procedural", "--model.backend", "scripted", "--steps", "6", "--runs-dir", str(tmp_path),
            "--play.action-mode", "boxed", "--play.max-turns", "4", "--play.turn-tokens", "256",
            "--play.context-tokens", "16384", "--designer.envs-per-regen", "2", "--designer.regen-interval", "1",
            "--rollout.plays-per-env", "4", "--procedural.tasks", "chain_sum", "products", "basic_arithmetic",
            "--procedural.window", "4", "--procedural.upper", "0.75", "--procedural.lower", "0.25",
            "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0", "--name", name]  # fmt: skip


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "spade.cli", "train", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _levels(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.items() if k.startswith(("procedural/", "agent/win_rate"))} for r in rows]


def test_sigkill_then_resume_keeps_the_levels(tmp_path: Path) -> None:
    reference, _ = parse_config(_args(tmp_path, "reference"))  # the same command line, in this process
    train(reference)
    proc = _spawn(*_args(tmp_path, "killed"))
    metrics = tmp_path / "killed" / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if metrics.exists() and len(metrics.read_bytes().splitlines()) >= 2:
            os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    resumed = _spawn("--resume", str(tmp_path / "killed"))
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read().decode()[-2000:] if resumed.stderr else ""
    ref, got = RunDir(tmp_path / "reference").read_metrics(), RunDir(tmp_path / "killed").read_metrics()
    assert len(got) == 6
    assert _levels(got) == _levels(ref)
    assert any(r["procedural/level_mean"] != 0.0 for r in ref)  # the levels did move in this run
