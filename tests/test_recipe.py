"""``--recipe released``: the authors' released values on every paper preset, and each switch it sets."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

from spade.checker.findings import CheckReport, FindingCode
from spade.cli.train import parse_config
from spade.config import PAPER, TrainConfig, from_dict, to_dict
from spade.config.errors import ConfigError
from spade.config.recipes import RELEASED, RELEASED_TOOL_USE, apply_recipe, recipe_fields
from spade.design.check import Checks
from spade.design.prompt_texts import GAMES_SKETCH
from spade.design.prompts import DesignRequest, build_design_messages
from spade.play.agent import FORMAT_REMINDER
from spade.play.rollout import episode_seeds, hint_seeds
from spade.run.loop import train
from spade.scoring.samples import score_agent
from spade.training.grpo import ClipConfig, grpo_loss_parts
from spade.types import Completion, PlayStatus, SamplingParams, Trajectory
from test_agent import CFG, CannedPolicy, play, solution_of
from test_presets import _rows, small_paper

# The release's values, read from its launchers and code (cmd/games/train_spade_*.sh,
# cmd/tool_use/_train_spade_blend.sh, the orchestrators): every paper preset under --recipe released.
RELEASE_GAMES: dict[str, Any] = {
    "steps": 400,
    "designer.envs_per_regen": 24,
    "designer.regen_interval": 4,
    "designer.skills_per_regen": 3,
    "designer.attempts": 5,
    "designer.max_tokens": 16384,
    "designer.temperature": 0.6,
    "designer.top_p": 0.95,
    "designer.top_k": 20,
    "designer.doc_tokens": 6000,
    "designer.hint_mode": "code",
    "designer.hint_max_tokens": 4096,
    "designer.hint_temperature": 0.3,
    "designer.memory_examples": 2,
    "designer.negative_examples": 1,
    "designer.example_code_chars": 2000,
    "designer.train_rejected": False,
    "designer.example": "sketch",
    "rollout.plays_per_env": 8,
    "rollout.hint_plays_per_env": 16,
    "rollout.hint_seeds": "own",
    "rollout.compact_filter": False,
    "play.max_turns": 25,
    "play.temperature": 0.6,
    "play.top_p": 0.95,
    "play.top_k": 20,
    "play.agent_prompt": "released",
    "play.mask_malformed_tool_calls": False,
    "model.max_context": 32768,
    "model.thinking": False,
    "model.dtype": "bfloat16",
    "reward.variant": "blend",
    "reward.blend_plateau_weight": 0.6,
    "reward.blend_regret_norm": 0.15,
    "reward.plateau_low": 0.4,
    "reward.plateau_high": 0.6,
    "reward.plateau_ramp": 0.25,
    "reward.delay": 4,
    "reward.designer_scale_cap": 50.0,
    "reward.regret_estimator": "difference_of_means",
    "reward.lp_ema": 0.85,
    "reward.lp_baseline": "updated",
    "trainer.lr": 1e-6,
    "trainer.weight_decay": 0.1,
    "trainer.adam_betas": [0.9, 0.98],
    "trainer.clip_low": 0.2,
    "trainer.clip_high": 0.28,
    "trainer.kl_coef": 0.0,
    "trainer.tis_fresh": True,
    "trainer.loss_aggregation": "sample_mean",
    "memory.capacity": 200,
    "memory.warm_start": False,
    "memory.top_up": False,
    "memory.band_low": 0.15,
    "memory.band_high": 0.85,
    "memory.example_pool": 10,
    "checker.llm_review": False,
}
RELEASE: dict[str, dict[str, Any]] = {
    "paper": RELEASE_GAMES,
    "paper-tool": {
        **RELEASE_GAMES,
        "designer.regen_interval": 8,
        "designer.skills_per_regen": 6,
        "designer.setting": "tool_use",
        "designer.tool_contract": "multi_turn",
        "designer.hint_max_tokens": 2048,
        "designer.doc_tokens": 4000,
        "reward.delay": 8,
        "trainer.kl_coef": 0.005,
        "checker.llm_review": True,
        "checker.review_temperature": 0.3,
        "checker.review_max_tokens": 16384,
        "checker.review_fail_open": True,
        "play.mask_malformed_tool_calls": True,
        "rollout.compact_filter": True,
    },
    "paper-8b": {
        **RELEASE_GAMES,
        "model.thinking": True,
        "trainer.kl_coef": 0.005,
        "designer.max_tokens": 20000,
    },
}


def _get(config: dict[str, Any], dotted: str) -> Any:
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def test_print_config_of_the_released_paper_recipe_holds_the_releases_values() -> None:
    cmd = [sys.executable, "-m", "spade.cli", "train", "--preset", "paper", "--recipe", "released",
           "--print-config", "--json"]  # fmt: skip
    printed = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    wrong = {k: (_get(printed, k), v) for k, v in RELEASE["paper"].items() if _get(printed, k) != v}
    assert not wrong, wrong


@pytest.mark.parametrize("name", ["paper", "paper-tool", "paper-8b"])
def test_every_paper_preset_under_the_released_recipe_holds_the_releases_values(name: str) -> None:
    cfg, _ = parse_config(["--preset", name, "--recipe", "released"])
    config = to_dict(cfg)
    wrong = {k: (_get(config, k), v) for k, v in RELEASE[name].items() if _get(config, k) != v}
    assert not wrong, wrong


def test_the_default_recipe_changes_nothing_and_flags_still_override_the_released_one() -> None:
    assert (
        parse_config(["--preset", "paper"])[0] == parse_config(["--preset", "paper", "--recipe", "spade"])[0]
    )
    cfg, _ = parse_config(["--preset", "paper", "--recipe", "released", "--designer.example", "worked"])
    assert cfg.designer.example == "worked"
    assert cfg.designer.train_rejected is False
    # every field the recipe names exists, and each differs from spade's own paper preset
    released = apply_recipe(PAPER, "released")
    assert released != PAPER
    changed = {k for k in RELEASED if _get(to_dict(released), k) != _get(to_dict(PAPER), k)}
    assert changed == set(RELEASED)
    assert set(recipe_fields("released", dataclasses.replace(PAPER))) == set(RELEASED)
    tool, _ = parse_config(["--preset", "paper-tool"])
    assert set(recipe_fields("released", tool)) == set(RELEASED) | set(RELEASED_TOOL_USE)


def test_an_unknown_recipe_and_a_recipe_on_resume_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown recipe 'bogus'; choose one of: spade, released"):
        apply_recipe(PAPER, "bogus")
    cfg, _ = parse_config(
        ["--model.backend", "scripted", "--runs-dir", str(tmp_path), "--name", "r", "--steps", "1"]
    )
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.json").write_text(json.dumps(to_dict(cfg)))
    with pytest.raises(ConfigError, match="--recipe"):
        parse_config(["--resume", str(tmp_path / "r"), "--recipe", "released"])


# -- each switch ----------------------------------------------------------------------------------------


def test_rejected_attempts_are_trained_by_default_and_not_under_rejection_sampling(tmp_path: Path) -> None:
    rows = {}
    for train_rejected in (True, False):
        cfg = small_paper(tmp_path, "mixed", name=f"rejected-{train_rejected}")
        cfg = dataclasses.replace(
            cfg, designer=dataclasses.replace(cfg.designer, train_rejected=train_rejected)
        )
        rows[train_rejected] = _rows(train(cfg).root)[0]
    for row in rows.values():
        assert 0 < row["designer/valid_rate"] < 1
    assert rows[True]["designer/credited"] == rows[True]["designer/envs"]
    accepted = round(rows[False]["designer/valid_rate"] * rows[False]["designer/envs"])
    assert rows[False]["designer/credited"] == accepted


def test_without_top_up_a_regeneration_plays_only_its_own_valid_designs(tmp_path: Path) -> None:
    cfg = small_paper(tmp_path, "mixed", name="no-top-up")
    cfg = dataclasses.replace(cfg, memory=dataclasses.replace(cfg.memory, top_up=False))
    row = _rows(train(cfg).root)[0]
    assert 0 < row["designer/valid_rate"] < 1
    valid = round(row["designer/valid_rate"] * row["designer/envs"])
    assert row["agent/plays"] == 2 * valid


def test_hinted_plays_on_seeds_of_their_own_share_none_with_the_unhinted_arm(tmp_path: Path) -> None:
    assert not set(hint_seeds(0, 3, "e1", 16)) & set(episode_seeds(0, 3, "e1", 16))
    cfg = small_paper(tmp_path, "valid", name="own-seeds")
    cfg = dataclasses.replace(cfg, rollout=dataclasses.replace(cfg.rollout, hint_seeds="own"))
    row = _rows(train(cfg).root)[0]
    assert row["agent/win_rate_hint"] == 1.0  # the hinted arm still plays, on other instances
    with pytest.raises(ConfigError, match=r"designer\.hint_mode=code"):
        parse_config(["--rollout.hint-seeds", "own", "--designer.hint-mode", "instance"])


def test_the_games_sketch_is_an_outline_of_the_interface_shown_as_one() -> None:
    ast.parse(GAMES_SKETCH)  # an outline, but Python
    for part in ("ENV = ", "def solution(self)", "max_turns = 12"):
        assert part in GAMES_SKETCH
    req = DesignRequest(skill="spatial_reasoning", mode="generate", worked_example=GAMES_SKETCH, sketch=True)
    user = build_design_messages(req)[1]["content"]
    assert "AN OUTLINE of this interface" in user
    assert GAMES_SKETCH in user
    assert "A COMPLETE WORKED EXAMPLE" not in user


def test_sample_mean_weighs_every_sample_alike_whatever_its_length() -> None:
    # two samples with a loss of 1 per token (advantage -1, ratio 1): lengths 1 and 3
    new = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([-1.0, -3.0])
    kwargs = {"clip": ClipConfig(0.2, 0.28), "tis_cap": 2.0, "tis_on_B": torch.zeros(2)}
    token = grpo_loss_parts(new, new, new, adv, mask, **kwargs)
    per_sample = grpo_loss_parts(new, new, new, adv, mask, weights_B=1.0 / mask.sum(1), **kwargs)
    assert float(token.loss_sum) / token.tokens == pytest.approx((1 + 3 * 3) / 4)
    assert float(per_sample.loss_sum) / 2 == pytest.approx((1 + 3) / 2)
    assert per_sample.pg_sum == token.pg_sum  # the metrics stay token sums


def test_the_compact_filter_drops_unfinished_plays_after_their_advantages() -> None:
    def traj(ret: float, status: PlayStatus) -> Trajectory:
        return Trajectory("e", 0, False, status, (), ret, ret > 0, (1, 2, 3), (0, 1, 1), (0.0, -0.1, -0.1))

    plays = [
        traj(1.0, PlayStatus.TERMINATED),
        traj(0.0, PlayStatus.TRUNCATED),
        traj(0.0, PlayStatus.TERMINATED),
    ]
    kept, _, _ = score_agent(PAPER, plays)
    cfg = dataclasses.replace(PAPER, rollout=dataclasses.replace(PAPER.rollout, compact_filter=True))
    compact, metrics, _ = score_agent(cfg, plays)
    assert len(kept) == 3
    assert len(compact) == 2
    assert metrics["agent/compacted"] == 1.0
    assert [s.advantage for s in compact] == [kept[0].advantage, kept[2].advantage]


def test_a_malformed_tool_call_is_not_trained_and_the_format_is_recalled() -> None:
    actions = solution_of("release_pipeline", 5)
    malformed = "<tool_call>{not json</tool_call>"
    cfg = dataclasses.replace(CFG, mask_malformed_tool_calls=True)
    for mask in (True, False):
        policy = CannedPolicy([malformed, *actions])
        t = play("release_pipeline", policy, dataclasses.replace(cfg, mask_malformed_tool_calls=mask), seed=5)
        assert t.success
        trained = bytes(tok for tok, m in zip(t.tokens_T, t.mask_T, strict=True) if m and tok < 256)
        assert (malformed.encode() in trained) is not mask
        assert (FORMAT_REMINDER in policy.prompts[1]) is mask


class _Reviewer:
    """Replies with one review text, recording the sampling parameters."""

    def __init__(self, text: str, finish: str = "stop") -> None:
        self.template = CannedPolicy([]).template
        self.text, self.finish = text, finish
        self.params: list[SamplingParams] = []

    async def sample(self, prompts: Any, params: SamplingParams) -> list[Completion]:
        self.params.append(params)
        return [Completion(self.text, (1,), (0.0,), cast(Any, self.finish)) for _ in prompts]


@pytest.mark.parametrize(
    ("reply", "finish", "closed", "open_"),
    [("\\boxed{ACCEPT}", "stop", True, True), ("\\boxed{REJECT}", "stop", False, False),
     ("", "stop", False, True), ("I think so.", "stop", False, True), ("", "error", False, True)],
)  # fmt: skip
def test_the_review_fails_closed_by_default_and_open_as_released(
    reply: str, finish: str, closed: bool, open_: bool
) -> None:
    design = SimpleNamespace(skill="mathematical_reasoning", code="ENV = None")
    for fail_open, accepted in ((False, closed), (True, open_)):
        reviewer = _Reviewer(reply, finish)
        checks = Checks(
            cast(Any, None), cast(Any, None), cast(Any, None), cast(Any, reviewer), 0,
            review=True, review_tokens=16384, review_temperature=0.3, review_fail_open=fail_open,
        )  # fmt: skip
        report = asyncio.run(checks.reviewed([cast(Any, design)], [CheckReport(True, ())]))[0]
        assert report is not None
        assert report.ok is accepted, (reply, finish, fail_open)
        if not accepted:
            assert report.codes == (FindingCode.LLM_REVIEW,)
        assert (reviewer.params[0].temperature, reviewer.params[0].max_tokens) == (0.3, 16384)


def test_the_review_settings_reach_the_checks_from_the_config() -> None:
    cfg, _ = parse_config(["--preset", "paper-tool", "--recipe", "released"])
    assert (cfg.checker.review_temperature, cfg.checker.review_max_tokens, cfg.checker.review_fail_open) == (
        0.3, 16384, True,
    )  # fmt: skip
    assert from_dict(TrainConfig, to_dict(cfg)) == cfg  # the new fields round-trip through config.json
