"""The self-play loop end to end with the scripted backend: metrics, failures as data, resume after SIGKILL."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from spade import envs, stopping
from spade.checker import Checker, CheckReport, FindingCode
from spade.config import (
    CheckerConfig,
    DesignerConfig,
    EvalConfig,
    MemoryConfig,
    ModelConfig,
    PlayConfig,
    RewardConfig,
    RolloutConfig,
    ScriptedConfig,
    TrainConfig,
)
from spade.design import check, designer, phase
from spade.memory.archive import EnvStatus, Memory
from spade.modes.fixed_pool import FixedPool, next_batch
from spade.play.rollout import reset_options
from spade.run.loop import PolicyFailedError, train
from spade.run.state import LoopState
from spade.rundir import RunDir
from spade.sandbox import Limits, Sandbox
from spade.scoring import rewards
from spade.scoring.credit import PendingCredit
from spade.scoring.samples import constant_share, pending
from spade.scoring.stats import EnvStats
from spade.types import Completion, EnvSource

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
    "--reward.variant", "blend",
    "--reward.delay", "1",  # checkpoints then hold pending credit with its window of plays
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
        model=ModelConfig(backend="scripted", scripted=ScriptedConfig(behaviour=behaviour)),
        play=PlayConfig(action_mode="boxed", max_turns=6, turn_tokens=256, context_tokens=16384),
        designer=DesignerConfig(envs_per_regen=3, regen_interval=2, skills_per_regen=2, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=4, hint_plays_per_env=4),
        reward=RewardConfig(variant="regret"),
        checker=CheckerConfig(probe_episodes=2, exploit_episodes=3),
        sandbox=Limits(call_timeout_s=1.0, load_timeout_s=2.0),
    )
    return TrainConfig(**{**{f: getattr(cfg, f) for f in cfg.__dataclass_fields__}, **over})  # type: ignore[arg-type]


def _stable(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    # engine/* counts batches (timing-dependent); sft/cached says whether a resumed run reused the warm start
    skip = ("time/", "speed/", "resources/", "engine/", "sft/cached")
    return [{k: v for k, v in r.items() if not k.startswith(skip)} for r in rows]


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
    for key in ("designer/valid_rate", "designer/regret_mean", "designer/regret_se", "agent/win_rate",
                "agent/win_rate_hint", "memory/size", "time/design_s", "time/check_s", "time/play_s",
                "time/update_s"):  # fmt: skip
        assert key in first, key
    assert first["designer/valid_rate"] == 1.0
    assert 0.0 <= first["designer/novelty_min"] <= first["designer/novelty_mean"] <= 1.0
    assert any("loss/agent" in r for r in rows)
    assert any("loss/designer" in r for r in rows)
    # the scripted agent always wins with the hint and rarely without it: regret is large and positive
    assert first["agent/win_rate_hint"] == 1.0
    assert first["designer/regret_mean"] > 0.3
    assert first["designer/regret_measured"] == 6  # every design valid, hinted and played
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


def test_design_retries_fill_slots_and_keep_every_failed_attempt(tmp_path: Path) -> None:
    once = DesignerConfig(envs_per_regen=10, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    retried = dataclasses.replace(once, attempts=3)
    first = train(scripted_config(tmp_path, "mixed", steps=1, name="once", designer=once)).read_metrics()[0]
    again = train(scripted_config(tmp_path, "mixed", steps=1, name="retry", designer=retried)).read_metrics()[
        0
    ]
    assert first["designer/attempts_mean"] == 1.0
    assert first["designer/slots_filled"] == first["designer/valid_rate"] < 1.0
    # the first attempts are the same designs; each rejected slot was designed again with a fresh document
    assert again["designer/attempts_mean"] > 1.0
    assert again["designer/slots_filled"] > first["designer/slots_filled"]
    assert again["designer/envs"] == round(10 * again["designer/attempts_mean"])
    valid = round(again["designer/valid_rate"] * again["designer/envs"])
    assert valid == round(10 * again["designer/slots_filled"])  # one valid design per filled slot
    # every attempt, failed ones included, is credited and trained (the penalty ranks them below the valid)
    assert again["designer/credited"] == again["designer/envs"] == again["designer/samples_kept"]
    assert len(list((tmp_path / "retry" / "envs").glob("s00000_*.py"))) == valid


def test_extra_plays_go_to_constant_groups_only_and_lower_their_share(tmp_path: Path) -> None:
    base = scripted_config(tmp_path, "valid", steps=2, name="base", rollout=RolloutConfig(plays_per_env=2))
    more = dataclasses.replace(base, name="more", rollout=RolloutConfig(plays_per_env=2, extra_plays=4))
    rows = {c.name: train(c).read_metrics() for c in (base, more)}
    before, after = rows["base"][0], rows["more"][0]  # step 0: the same policy plays the same first games
    constant = round(before["agent/constant_group_share"] * before["agent/plays"] / 2)  # groups of 2
    assert constant > 0
    assert before["agent/extra_plays"] == 0.0
    assert after["agent/extra_plays"] == 4 * constant  # 4 more plays of every constant group, none else
    assert after["agent/plays"] == before["agent/plays"] + after["agent/extra_plays"]
    assert after["agent/constant_group_share"] < before["agent/constant_group_share"]
    assert sum(r["agent/constant_group_share"] for r in rows["more"]) < sum(
        r["agent/constant_group_share"] for r in rows["base"]
    )


def test_a_rejected_design_is_checked_unless_its_code_was_never_extracted() -> None:
    def outcome(valid: bool, reason: str) -> phase.DesignOutcome:
        return phase.DesignOutcome("e", "logic", "edit", valid, "e", None, reason)

    stats = {"e": EnvStats(4, 1, 1.0, None)}
    assert not pending(outcome(False, "extract_unchanged"), stats, 3).checked  # the shown line, repeated
    assert not pending(outcome(False, "extract_no_code"), stats, 3).checked
    assert pending(outcome(False, "UNCHANGED_GAME"), stats, 3).checked  # ran, but changed nothing played
    assert pending(outcome(False, "merged"), stats, 3).checked
    assert not pending(outcome(True, ""), stats, 3).checked


def test_constant_group_share_counts_groups_not_plays() -> None:
    ids = ["a", "a", "a", "b", "b", "c", "c"]
    adv = rewards.agent_advantages([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0], ids)
    assert constant_share(ids, adv.drop_N.tolist()) == pytest.approx(2 / 3)  # a and c constant, b not
    assert constant_share([], []) == 0.0


def _wait_for_rows(proc: subprocess.Popen[bytes], metrics: Path, rows: int) -> bool:
    """Wait until ``metrics`` holds ``rows`` lines (True) or the process ends (False)."""
    while proc.poll() is None:
        if metrics.exists() and len(metrics.read_bytes().splitlines()) >= rows:
            return True
        time.sleep(0.01)
    return False


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
    step_s = (time.perf_counter() - started) / 4
    rng = random.Random(7)
    kills, resume = 0, False
    metrics = tmp_path / "killed" / "metrics.jsonl"
    for attempt in range(4):  # kill at random points; each run resumes the previous one
        # Kill by progress, not by a clock: once this run added 1-2 metrics rows, then a random fraction of a
        # step later (none on the first attempt, so at least one kill happens however loaded the machine is).
        rows = (len(metrics.read_bytes().splitlines()) if metrics.exists() else 0) + rng.randrange(1, 3)
        delay = 0.0 if attempt == 0 else rng.uniform(0.0, 0.8) * step_s
        proc = _spawn(tmp_path, resume)
        if _wait_for_rows(proc, metrics, rows):
            time.sleep(delay)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                kills += 1
        proc.wait()
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


def test_metrics_are_json_lines(tmp_path: Path) -> None:
    run = train(scripted_config(tmp_path, "valid", steps=1))
    for line in run.metrics_path.read_text().splitlines():
        row = json.loads(line)
        assert all(isinstance(v, int | float) for v in row.values())


def test_the_engine_gives_back_its_cache_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each update, and at steps without one, so sampling never piles onto the last step's cache."""
    from spade.scripted.policy import ScriptedPolicy  # noqa: PLC0415

    calls: list[int] = []
    monkeypatch.setattr(ScriptedPolicy, "release_memory", lambda self: calls.append(1), raising=False)
    rows = train(scripted_config(tmp_path, "valid", steps=3)).read_metrics()
    assert len(calls) == len(rows) == 3


def test_a_step_whose_every_play_fails_in_the_model_stops_the_run_resumably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken engine answers every request with an error: the run stops instead of training on nothing."""
    from spade.scripted.policy import ScriptedPolicy  # noqa: PLC0415

    cfg = scripted_config(tmp_path, "valid", steps=2)
    train(dataclasses.replace(cfg, steps=1))

    async def broken(self: object, prompts: list[list[int]], params: object) -> list[Completion]:
        return [Completion("", (), (), "error", error="engine died") for _ in prompts]

    monkeypatch.setattr(ScriptedPolicy, "sample", broken)
    with pytest.raises(PolicyFailedError, match=r"step 1: all 12 plays failed in the model.*engine died"):
        train(cfg, resume=True, steps=2)
    assert len(RunDir(cfg.run_dir).read_metrics()) == 1  # the failed step left nothing behind
    monkeypatch.undo()  # the engine works again
    assert [r["step"] for r in train(cfg, resume=True, steps=2).read_metrics()] == [0, 1]


@pytest.mark.parametrize(
    ("mode", "eval_every"),
    [("selfplay", 0), ("fixed_pool", 0), ("fixed_pool", 1)],
    ids=["design", "play", "eval"],
)
def test_replies_cut_by_a_stop_request_stop_the_run_and_are_not_scored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, eval_every: int
) -> None:
    """An engine ends its batch at once on a stop request, with error replies: the phase that asked for
    them must stop the run there, not count them as failed designs, failed plays or wrong answers."""
    from spade.scripted.policy import ScriptedPolicy  # noqa: PLC0415

    async def cut(self: object, prompts: list[list[int]], params: object) -> list[Completion]:
        stopping.request("SIGINT")  # Ctrl-C while the batch was sampled
        return [Completion("", (), (), "error", error="stopped") for _ in prompts]

    async def never(*_: object) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(ScriptedPolicy, "sample", cut)
    # The watcher cancels the run at its next await; when the phase's last batch was the one cut, nothing is
    # awaited before its replies are scored (as with hf): without the watcher, every phase meets that case.
    monkeypatch.setattr(stopping, "_watch", never)
    cfg = scripted_config(tmp_path, "valid", steps=1, mode=mode, eval=EvalConfig(every=eval_every, limit=2))
    try:
        with pytest.raises(stopping.Interrupted, match="stopped by SIGINT"):
            train(cfg)
    finally:
        stopping.clear()
    run = RunDir(cfg.run_dir)
    assert run.read_metrics() == []
    assert not (run.root / "eval").exists()  # no scores of cut replies
    assert run.resume_point().step == 0


@pytest.mark.parametrize(
    ("mode", "line"),
    [
        ("fixed_pool", "step 0: next batch of the fixed pool (agent only: nothing is designed)"),
        ("procedural", "step 0: next batch of Reasoning-Gym tasks at their current levels (agent only"),
    ],
)
def test_agent_only_modes_say_what_they_do_and_summarise_no_designer(
    tmp_path: Path, mode: str, line: str
) -> None:
    flags = [*SCRIPTED_FLAGS, "--mode", mode, "--steps", "1", "--runs-dir", str(tmp_path), "--name", mode]
    out = subprocess.run([sys.executable, "-m", "spade.cli", "train", *flags], capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert line in out.stdout
    assert "design\n" not in out.stdout
    assert "Summary of 1 step:\n  agent: win rate" in out.stdout  # no designer line
    assert "designer:" not in out.stdout
    assert "designer sample" not in out.stdout  # the update line counts only the roles the mode trains
    assert "with hint" not in out.stdout


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
    # The scripted review rejects 5-question quizzes, a third of the designs by a hash of their prompts: 16
    # designs leave (2/3)^16 < 0.2% for a set of prompts (they change with the seed games) with no rejection.
    designer = DesignerConfig(envs_per_regen=16, regen_interval=2, skills_per_regen=2, max_tokens=4096)
    checker = CheckerConfig(probe_episodes=2, exploit_episodes=3, llm_review=True)
    row = train(
        scripted_config(tmp_path, "valid", steps=1, designer=designer, checker=checker)
    ).read_metrics()[0]
    assert row["designer/rejected/LLM_REVIEW"] >= 1, row
    assert 0.0 < row["designer/valid_rate"] < 1.0


# -- fixed pool, delayed credit, regret error, typed state -------------------------------------------------


def _pool_memory(tmp_path: Path, n: int) -> Memory:
    memory = Memory.in_run_dir(tmp_path)
    memory.warm_start(EnvSource(f"X = {i}\n", "logic", f"pool_{i:03d}") for i in range(n))
    return memory


def _played(memory: Memory, env_ids: Sequence[str], step: int) -> None:
    """Each environment played 4 times at ``step``, won once (what the loop records after a step)."""
    for env_id in env_ids:
        memory.record_stats(env_id, step, 0.25, None, 4)


def test_fixed_pool_covers_a_pool_of_100_within_ceil_100_over_24_regenerations(tmp_path: Path) -> None:
    cfg = TrainConfig(
        runs_dir=tmp_path, mode="fixed_pool", designer=DesignerConfig(envs_per_regen=24, regen_interval=2)
    )
    covered = []
    with _pool_memory(tmp_path, 100) as memory:
        for step in range(0, 2 * math.ceil(100 / 24), 2):  # regenerations at steps 0, 2, ..., 8
            current = next_batch(cfg, memory, step)
            assert len(set(current)) == 24
            _played(memory, current, step)
            covered.append(FixedPool().metrics(cfg, memory)["pool/covered"])
    assert covered == pytest.approx([0.24, 0.48, 0.72, 0.96, 1.0])


def test_fixed_pool_replay_option_explores_half_and_replays_half(tmp_path: Path) -> None:
    memory_cfg = MemoryConfig(pool_order="replay")
    cfg = TrainConfig(
        runs_dir=tmp_path,
        mode="fixed_pool",
        memory=memory_cfg,
        designer=DesignerConfig(envs_per_regen=4, regen_interval=1),
    )
    with _pool_memory(tmp_path, 10) as memory:
        first = next_batch(cfg, memory, 0)
        _played(memory, first, 0)
        second = next_batch(cfg, memory, 1)
    assert len(set(first)) == len(set(second)) == 4
    assert len(set(second) & set(first)) == 2  # PLR replay of played environments
    assert len(set(second) - set(first)) == 2  # exploration of unplayed ones


def test_fixed_pool_run_reports_pool_coverage(tmp_path: Path) -> None:
    designer = DesignerConfig(envs_per_regen=4, regen_interval=1)
    games = len(envs.names("games"))  # the seed library's games (more than 4, at most 8)
    rows = train(
        scripted_config(tmp_path, "valid", steps=2, mode="fixed_pool", designer=designer)
    ).read_metrics()
    assert [r["pool/covered"] for r in rows] == pytest.approx([4 / games, 1.0])


def test_fixed_pool_from_another_runs_archive(tmp_path: Path) -> None:
    source = train(scripted_config(tmp_path, "valid", name="source", steps=1))
    valid = {r.env_id for r in Memory.in_run_dir(source.root).records(status=EnvStatus.VALID)}
    cfg = scripted_config(
        tmp_path, "valid", name="baseline", steps=2, mode="fixed_pool", pool=str(source.root)
    )
    rows = train(cfg).read_metrics()
    assert all(r["agent/plays"] == 3 * 4 for r in rows)
    assert rows[0].get("agent/status/env_error", 0.0) == 0.0
    with Memory.in_run_dir(cfg.run_dir) as memory:
        pool = {r.env_id for r in memory.records(status=EnvStatus.VALID)}
    assert pool == {f"pool_{e}" for e in valid}
    assert rows[-1]["pool/covered"] == pytest.approx(3 / len(pool))  # one regeneration of 3


def test_designer_seeds_are_the_only_seeds_archived_and_the_fixed_pool(tmp_path: Path) -> None:
    designer = DesignerConfig(skills=("logical_deduction",), seeds=("combination_lock",), envs_per_regen=2)
    for mode in ("selfplay", "fixed_pool"):
        cfg = scripted_config(tmp_path, "valid", name=mode, steps=1, mode=mode, designer=designer)
        train(cfg)
        with Memory.in_run_dir(cfg.run_dir) as memory:
            seeds = {r.env_id for r in memory.records() if r.is_seed}
        assert seeds == {"seed:combination_lock"}  # not seating, the skill's other seed


def test_delayed_credit_uses_the_window_and_flushes_at_the_end(tmp_path: Path) -> None:
    # designs at steps 0 and 2 (3 each); delay 3: step 0's are due at step 3, step 2's are flushed then
    rows = train(
        scripted_config(tmp_path, "valid", reward=RewardConfig(variant="blend", delay=3))
    ).read_metrics()
    assert [r.get("designer/credited", 0.0) for r in rows] == [0.0, 0.0, 0.0, 6.0]
    last = rows[-1]
    assert last["designer/staleness_mean"] == pytest.approx((3 * 3 + 3 * 1) / 6)
    # every environment is played 4 times at its creation step and the next (then replaced): 8 plays
    assert last["designer/window_plays_mean"] == pytest.approx(8.0)
    assert "designer/samples_kept" in last


def test_a_delay_longer_than_the_run_is_flushed_at_the_last_step(tmp_path: Path) -> None:
    cfg = scripted_config(tmp_path, "valid", steps=2, reward=RewardConfig(variant="blend", delay=4))
    rows = train(cfg).read_metrics()
    assert [r.get("designer/credited", 0.0) for r in rows] == [0.0, 3.0]
    assert rows[1]["designer/staleness_mean"] == 1.0


def test_regret_from_every_play_has_a_smaller_error(tmp_path: Path) -> None:
    # The scripted agent always wins with the hint, so here only the unhinted-only plays (seeds 4-7) can
    # narrow the estimate: the shared-seeds-only estimator ignores them.
    errors = {}
    for method in ("paired", "control_variate"):
        cfg = scripted_config(
            tmp_path, "valid", name=method, steps=1, rollout=RolloutConfig(plays_per_env=8, hint_plays_per_env=4),
            reward=RewardConfig(variant="regret", regret_estimator=method),  # type: ignore[arg-type]
        )  # fmt: skip
        errors[method] = train(cfg).read_metrics()[0]["designer/regret_se"]
    assert 0.0 < errors["control_variate"] < errors["paired"]


def test_loop_state_round_trips_through_json() -> None:
    state = LoopState(
        step=5,
        current=["a", "b"],
        credit=[PendingCredit("r", "a", "logic", 4, True, regret=0.2, plays=8, wins=3, return_sum=2.0)],
        lp_ema={"logic": 0.3},
        corpus={"cursor": 7},
    )
    assert LoopState.from_dict(json.loads(json.dumps(state.to_dict()))) == state


def test_an_edit_that_changes_nothing_played_is_rejected_as_unchanged(tmp_path: Path) -> None:
    parent = envs.spec("combination_lock").source()
    lines = parent.splitlines(keepends=True)
    row = {i: line for i, line in enumerate(lines) if line.strip() == "(3, 12, 12),"}
    (first,) = row  # the level played at play.difficulty 0
    last = first + 3  # the hardest level, not played

    def edit(i: int, text: str) -> str:
        return "".join([*lines[:i], text, *lines[i + 1 :]])

    codes = {
        "comment": edit(first - 2, "(2, 13, 12),\n"),  # the comment above LEVELS: a bare tuple, no rule
        "unplayed": edit(last, "    (4, 90, 28),\n"),
        "played": edit(first, "    (2, 12, 12),\n"),
    }
    designs = [
        designer.Design((), "edit", "logical_deduction", "lock", None, "", code, "ok", "")
        for code in codes.values()
    ]
    designs.append(dataclasses.replace(designs[0], mode="generate", parent_id=None))
    ok = CheckReport(ok=True, findings=())
    cfg = scripted_config(tmp_path, play=PlayConfig(difficulty=0, max_turns=20))
    memory = SimpleNamespace(get=lambda env_id: SimpleNamespace(code=parent))

    async def run() -> list[CheckReport | None]:
        with Sandbox() as box:
            checks = check.Checks(
                Checker(cfg.checker, cfg.play),
                box,
                memory,
                None,
                cfg.seed,
                max_turns=cfg.play.max_turns,  # type: ignore[arg-type]
                options=reset_options(cfg.play, None),
            )
            return await checks.reject_unchanged(designs, [ok] * len(designs), step=0)

    reports = asyncio.run(run())
    assert [r is not None and r.ok for r in reports] == [False, False, True, True]
    for r in reports[:2]:
        assert r is not None
        assert [f.code for f in r.fatal] == [FindingCode.UNCHANGED_GAME]
        assert "changes nothing the agent plays" in r.fatal[0].message
