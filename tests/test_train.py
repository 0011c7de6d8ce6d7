"""The self-play loop end to end with the scripted backend: metrics, failures as data, resume after SIGKILL."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spade.config import (
    CheckerConfig,
    DesignerConfig,
    ModelConfig,
    PlayConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
)
from spade.rundir import RunDir
from spade.sandbox import Limits
from spade.train import train

SCRIPTED_FLAGS = [
    "--model.backend", "scripted",
    "--steps", "4",
    "--play.action-mode", "boxed",
    "--play.max-turns", "6",
    "--play.turn-tokens", "256",
    "--play.context-tokens", "16384",
    "--designer.envs-per-regen", "3",
    "--designer.regen-interval", "2",
    "--designer.skills-per-regen", "2",
    "--designer.max-tokens", "4096",
    "--rollout.plays-per-env", "4",
    "--rollout.hint-plays-per-env", "4",
    "--reward.variant", "regret",
    "--checker.probe-episodes", "2",
    "--checker.exploit-episodes", "3",
    "--corpus.no-enabled",
    "--sandbox.call-timeout-s", "1.0",
    "--sandbox.load-timeout-s", "2.0",
]  # fmt: skip


def scripted_config(
    tmp_path: Path, behaviour: str = "mixed", name: str = "run", **over: object
) -> TrainConfig:
    cfg = TrainConfig(
        name=name,
        runs_dir=tmp_path,
        steps=4,
        model=ModelConfig(backend="scripted", scripted_behaviour=behaviour),
        play=PlayConfig(action_mode="boxed", max_turns=6, turn_tokens=256, context_tokens=16384),
        designer=DesignerConfig(envs_per_regen=3, regen_interval=2, skills_per_regen=2, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=4, hint_plays_per_env=4),
        reward=RewardConfig(variant="regret"),
        checker=CheckerConfig(probe_episodes=2, exploit_episodes=3),
        sandbox=Limits(call_timeout_s=1.0, load_timeout_s=2.0),
    )
    return TrainConfig(**{**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}, **over})  # type: ignore[arg-type]


def _stable(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "speed/", "resources/"))} for r in rows]


def _memory_dump(run_dir: Path) -> list[tuple[object, ...]]:
    db = sqlite3.connect(run_dir / "memory.sqlite")
    envs = db.execute("SELECT env_id, code_hash, status, hint FROM envs ORDER BY env_id").fetchall()
    hist = db.execute(
        "SELECT env_id, step, win_rate, regret, plays FROM history ORDER BY env_id, step"
    ).fetchall()
    db.close()
    return [*envs, *hist]


def test_valid_designs_give_regret_and_metrics(tmp_path: Path) -> None:
    designer = DesignerConfig(envs_per_regen=6, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    run = train(scripted_config(tmp_path, "valid", designer=designer))
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    first = rows[0]
    for key in ("designer/valid_rate", "designer/regret_mean", "agent/win_rate", "agent/win_rate_hint",
                "memory/size", "time/design_s", "time/check_s", "time/play_s", "time/update_s"):  # fmt: skip
        assert key in first, key
    assert first["designer/valid_rate"] == 1.0
    assert any("loss/agent" in r for r in rows)
    assert any("loss/designer" in r for r in rows)
    # the scripted agent always wins with the hint and rarely without it: regret is large and positive
    assert first["agent/win_rate_hint"] == 1.0
    assert first["designer/regret_mean"] > 0.3
    assert (run.root / "envs").glob("s00000_*.py")
    assert run.latest_checkpoint() is not None


@pytest.mark.parametrize("behaviour", ["hostile", "broken"])
def test_hostile_and_broken_designs_are_counted_and_penalised(tmp_path: Path, behaviour: str) -> None:
    designer = DesignerConfig(envs_per_regen=10, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    rows = train(scripted_config(tmp_path, behaviour, steps=2, designer=designer)).read_metrics()
    first = rows[0]
    rejected = {
        k.removeprefix("designer/rejected/"): v
        for k, v in first.items()
        if k.startswith("designer/rejected/")
    }
    assert sum(rejected.values()) == 10
    assert len(rejected) >= 2, rejected  # counted under their own checker / sandbox codes
    if behaviour == "hostile":
        assert "TIMEOUT" in rejected, rejected  # loops are contained by the sandbox, not waited out
    assert first["designer/valid_rate"] == 0.0
    assert first["designer/reward_mean"] == pytest.approx(-0.5)  # the configured invalid penalty
    assert all(r["agent/plays"] > 0 for r in rows)  # the agent kept training on archived environments
    audit = list((tmp_path / "run" / "envs" / "rejected").glob("*.py"))
    assert len(audit) >= 1


def test_mixed_designs_keep_valid_and_reject_the_rest(tmp_path: Path) -> None:
    designer = DesignerConfig(envs_per_regen=10, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    first = train(scripted_config(tmp_path, "mixed", steps=1, designer=designer)).read_metrics()[0]
    assert 0.0 < first["designer/valid_rate"] < 1.0
    assert any(k.startswith("designer/rejected/") for k in first)


def _spawn(tmp_path: Path, resume: bool) -> subprocess.Popen[bytes]:
    args = ["--resume", str(tmp_path / "killed")] if resume else [*SCRIPTED_FLAGS, "--name", "killed",
                                                                     "--runs-dir", str(tmp_path)]  # fmt: skip
    cmd = [sys.executable, "-m", "spade.cli", "train", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def test_sigkill_at_random_points_then_resume_matches_uninterrupted(tmp_path: Path) -> None:
    reference = [*SCRIPTED_FLAGS, "--name", "reference", "--runs-dir", str(tmp_path)]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spade.cli", "train", *reference],
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    duration = time.perf_counter() - started
    rng = random.Random(7)
    kills, resume = 0, False
    for _ in range(4):  # kill at random points; each run resumes the previous one
        proc = _spawn(tmp_path, resume)
        try:
            proc.wait(timeout=rng.uniform(0.5, duration))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            kills += 1
        resume = (tmp_path / "killed" / "config.json").exists()
        if proc.returncode == 0:
            break
    if proc.returncode != 0:  # then let the last resume finish
        proc = _spawn(tmp_path, resume)
        assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
    assert kills >= 1
    ref, got = RunDir(tmp_path / "reference"), RunDir(tmp_path / "killed")
    assert _stable(got.read_metrics()) == _stable(ref.read_metrics())
    assert _memory_dump(got.root) == _memory_dump(ref.root)


def test_resume_refuses_extra_options(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "spade.cli", "train", "--resume", str(tmp_path), "--steps", "3"],
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 2
    assert "drop the other options" in out.stderr


def test_metrics_are_json_lines(tmp_path: Path) -> None:
    run = train(scripted_config(tmp_path, "valid", steps=1))
    for line in run.metrics_path.read_text().splitlines():
        row = json.loads(line)
        assert all(isinstance(v, int | float) for v in row.values())


@pytest.mark.parametrize("setting", ["games", "tool_use"])
def test_fixed_pool_baseline_trains_the_agent_only(tmp_path: Path, setting: str) -> None:
    designer = DesignerConfig(setting=setting, envs_per_regen=3, regen_interval=2)  # type: ignore[arg-type]
    cfg = scripted_config(tmp_path, "valid", steps=2, mode="fixed_pool", designer=designer)
    rows = train(cfg).read_metrics()
    assert [r["step"] for r in rows] == [0, 1]
    assert all("designer/envs" not in r for r in rows)
    assert rows[0]["agent/plays"] == 3 * 4
    assert rows[0].get("agent/status/env_error", 0.0) == 0.0


def test_fixed_pool_from_an_official_format_folder(tmp_path: Path) -> None:
    pool = tmp_path / "pool" / "games"
    pool.mkdir(parents=True)
    fixtures = Path(__file__).parents[1] / "src" / "spade" / "envs" / "official_fixtures"
    for f in fixtures.glob("game_*.py"):
        (pool / f.name).write_text(f.read_text())
    cfg = scripted_config(tmp_path, "valid", steps=1, mode="fixed_pool", pool=str(pool.parent))
    row = train(cfg).read_metrics()[0]
    assert row["agent/plays"] == 3 * 4
    assert row.get("agent/status/env_error", 0.0) == 0.0


def test_llm_review_rung_fails_closed_and_is_counted(tmp_path: Path) -> None:
    designer = DesignerConfig(envs_per_regen=8, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    checker = CheckerConfig(probe_episodes=2, exploit_episodes=3, llm_review=True)
    row = train(
        scripted_config(tmp_path, "valid", steps=1, designer=designer, checker=checker)
    ).read_metrics()[0]
    assert row["designer/rejected/LLM_REVIEW"] >= 1
    assert 0.0 < row["designer/valid_rate"] < 1.0
