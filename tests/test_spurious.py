"""The designer controls: spurious rewards (``designer.reward``) and no designer training (``designer.train``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spade.cli.train import parse_config
from spade.config.errors import ConfigError
from spade.modes import selfplay
from spade.run.loop import train
from spade.scoring.credit import spurious_rewards

REWARDS = [0.5, -1.0, 0.25, 0.0, 1.0, 0.75, -0.25]
REGENS = [3, 3, 3, 3, 6, 6, 6]  # two regenerations: four samples designed at step 3, three at step 6


def test_shuffled_rewards_are_each_regenerations_own_rewards_moved_among_its_samples() -> None:
    out = spurious_rewards(REWARDS, REGENS, "shuffled", seed=0)
    assert sorted(out[:4]) == sorted(REWARDS[:4])  # the same multiset, within each regeneration
    assert sorted(out[4:]) == sorted(REWARDS[4:])
    assert out[:4] != tuple(REWARDS[:4])  # never the designs' own rewards
    assert out[4:] != tuple(REWARDS[4:])
    assert out == spurious_rewards(REWARDS, REGENS, "shuffled", seed=0)  # seeded: a resume credits the same
    others = {spurious_rewards(REWARDS, REGENS, "shuffled", seed=s) for s in range(1, 12)}
    assert len(others | {out}) > 1  # another seed, another permutation
    for seed in range(50):  # two samples: always swapped; one: its own reward
        assert spurious_rewards([1.0, 0.0], [2, 2], "shuffled", seed) == (0.0, 1.0)
        assert spurious_rewards([0.3], [2], "shuffled", seed) == (0.3,)


def test_random_rewards_are_uniform_in_each_regenerations_range_and_regret_is_untouched() -> None:
    out = spurious_rewards(REWARDS, REGENS, "random", seed=4)
    assert all(-1.0 <= r <= 0.5 for r in out[:4])
    assert all(-0.25 <= r <= 1.0 for r in out[4:])
    assert not set(out) & set(REWARDS)  # draws, not the rewards themselves
    assert out == spurious_rewards(REWARDS, REGENS, "random", seed=4)
    assert out != spurious_rewards(REWARDS, REGENS, "random", seed=5)
    assert spurious_rewards(REWARDS, REGENS, "regret", seed=4) == tuple(REWARDS)
    with pytest.raises(ValueError, match="7 rewards for 2 regeneration steps"):
        spurious_rewards(REWARDS, [3, 6], "shuffled", seed=0)


FLAGS = ["--preset", "paper", "--model.backend", "scripted", "--model.scripted.behaviour", "mixed",
         "--steps", "1", "--reward.delay", "0", "--designer.envs-per-regen", "6",
         "--designer.skills-per-regen", "1", "--designer.max-tokens", "4096", "--designer.attempts", "1",
         "--rollout.plays-per-env", "2", "--rollout.hint-plays-per-env", "2", "--checker.probe-episodes", "2",
         "--checker.exploit-episodes", "3", "--sandbox.call-timeout-s", "2.0"]  # fmt: skip
"""The paper preset at test size, credited at once (delay 0) so one step shows the designer update."""


def _first_row(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])


def test_a_shuffled_run_trains_the_designer_on_its_rewards_permuted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    real_credit, real_score = selfplay.cr.credit_rewards, selfplay.score_designer

    def credit_spy(*args: Any, **kw: Any) -> Any:
        seen["real"] = real_credit(*args, **kw)[0]
        return real_credit(*args, **kw)

    def score_spy(cfg: Any, due: Any, rewards: Any, *args: Any) -> Any:
        seen["credited"] = tuple(rewards)
        samples, metrics = real_score(cfg, due, rewards, *args)
        seen["advantages"] = [s.advantage for s in samples]
        return samples, metrics

    monkeypatch.setattr(selfplay.cr, "credit_rewards", credit_spy)
    monkeypatch.setattr(selfplay, "score_designer", score_spy)
    cfg, _ = parse_config(
        [*FLAGS, "--designer.reward", "shuffled", "--runs-dir", str(tmp_path), "--name", "s"]
    )
    row = _first_row(train(cfg).root)
    real, credited = seen["real"], seen["credited"]
    assert len(set(real)) > 1  # a mixed designer: valid and rejected designs, rewards that differ
    assert sorted(credited) == sorted(real)
    assert credited != real
    advantages = seen["advantages"]
    assert len(advantages) == len(credited)  # every design trained, on its credited (permuted) reward
    for i, j in [(i, j) for i in range(len(credited)) for j in range(len(credited))]:
        if credited[i] > credited[j]:
            assert advantages[i] > advantages[j]
    assert row["designer/reward_spurious"] == 1.0
    assert row["designer/reward_mean"] == pytest.approx(row["designer/reward_real_mean"])
    assert row["designer/samples_kept"] == len(credited)


def test_the_untrained_designer_control_designs_and_is_credited_but_never_trained(tmp_path: Path) -> None:
    cfg, _ = parse_config([*FLAGS, "--designer.no-train", "--runs-dir", str(tmp_path), "--name", "frozen"])
    row = _first_row(train(cfg).root)
    assert row["designer/envs"] == 6
    assert row["designer/credited"] == 6
    assert row["designer/reward_spurious"] == 0.0
    assert row["designer/samples_kept"] == 0
    assert "loss/designer" not in row
    with pytest.raises(ConfigError, match=r"drop one of --designer.no-train and --designer.reward"):
        parse_config(
            [*FLAGS, "--designer.no-train", "--designer.reward", "random", "--runs-dir", str(tmp_path)]
        )
