"""Configuration: presets, cross-field validation, JSON round trip and command-line parsing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from spade.config import (
    CPU_TINY,
    PAPER,
    PAPER_TOOL,
    PRESETS,
    ConfigError,
    DesignerConfig,
    MemoryConfig,
    ModelConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
    from_json,
    preset,
    to_json,
)
from spade.train_cli import parse_config, run_cli


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_json(name: str) -> None:
    cfg = preset(name)
    again = from_json(to_json(cfg))
    assert again == cfg
    assert isinstance(again.runs_dir, Path)
    assert isinstance(again.designer.skills, tuple)


def test_paper_preset_holds_the_released_recipe() -> None:
    d, r, p = PAPER.designer, PAPER.rollout, PAPER.play
    assert (d.envs_per_regen, d.regen_interval) == (24, 4)
    assert (r.plays_per_env, r.hint_plays_per_env) == (8, 16)
    assert (p.max_turns, p.context_tokens, p.temperature) == (25, 32768, 0.6)
    assert PAPER.trainer.lr == 1e-6
    assert (PAPER.trainer.clip_low, PAPER.trainer.clip_high) == (0.2, 0.28)
    assert (PAPER.steps, PAPER.memory.capacity) == (400, 200)
    assert PAPER.reward.variant == "blend"


def test_paper_preset_has_room_for_a_paper_sized_design() -> None:
    d, p, t = PAPER.designer, PAPER.play, PAPER.trainer
    assert PAPER.model.max_context == p.context_tokens == 32768
    assert (d.max_tokens, d.hint_max_tokens, d.doc_tokens) == (16384, 4096, 6000)
    assert (d.top_p, d.top_k, p.top_p, p.top_k) == (0.95, 20, 0.95, 20)
    assert (t.weight_decay, t.tis_fresh, t.tis_cap, t.kl_coef) == (0.1, True, 2.0, 0.0)
    assert PAPER.reward.delay == 4
    assert d.hint_mode == "code"  # instance-agnostic hints, as the authors write them
    assert (d.setting, d.tool_contract, d.skills_per_regen) == ("games", "single", 3)


def test_paper_tool_preset_holds_the_tool_use_recipe() -> None:
    d, r, t = PAPER_TOOL.designer, PAPER_TOOL.reward, PAPER_TOOL.trainer
    assert (d.setting, d.tool_contract) == ("tool_use", "multi_turn")
    assert (d.envs_per_regen, d.regen_interval, d.skills_per_regen, r.delay) == (24, 8, 6, 8)
    assert (t.kl_coef, t.weight_decay, t.tis_fresh) == (0.005, 0.1, True)
    assert PAPER_TOOL.checker.llm_review
    assert (d.hint_max_tokens, d.doc_tokens, d.max_tokens) == (2048, 4000, 16384)
    assert PAPER_TOOL.model.max_context == 32768
    assert (PAPER_TOOL.rollout.plays_per_env, PAPER_TOOL.rollout.hint_plays_per_env) == (8, 16)


@pytest.mark.parametrize(
    ("flags", "check"),
    [
        (["--designer.no-train"], lambda c: not c.designer.train),
        (["--memory.no-enabled"], lambda c: not c.memory.enabled),
        (["--corpus.no-enabled"], lambda c: not c.corpus.enabled),
        (
            [
                "--designer.skills",
                "mathematical_reasoning",
                "pattern_recognition",
                "--designer.skills-per-regen",
                "2",
            ],
            lambda c: c.designer.skills == ("mathematical_reasoning", "pattern_recognition"),
        ),
        (["--designer.hint-mode", "instance"], lambda c: c.designer.hint_mode == "instance"),
    ],
)
def test_paper_ablations_are_single_switches(flags: list[str], check: Any) -> None:
    for name in ("paper", "paper-tool") if "skills" not in flags[0] else ("paper",):
        cfg, _ = parse_config(["--preset", name, *flags])
        assert check(cfg)
        default, _ = parse_config(["--preset", name])
        assert not check(default)


def test_cpu_tiny_is_small_and_leans_on_edit_mode() -> None:
    assert CPU_TINY.model.model == "embedded"
    assert CPU_TINY.designer.edit_fraction >= 0.5
    assert CPU_TINY.trainer.lora_rank > 0
    assert CPU_TINY.play.action_mode == "lenient"


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="cpu-tiny"):
        preset("huge")


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        ({"rollout": RolloutConfig(plays_per_env=1)}, "plays_per_env must be >= 2"),
        ({"designer": DesignerConfig(skills=("juggling",))}, "choose from"),
        (
            {"designer": DesignerConfig(setting="tool_use", skills=("logical_deduction",))},
            "not tool_use skills",
        ),
        ({"reward": RewardConfig(delay=-1)}, "reward.delay must be >= 0"),
        ({"designer": DesignerConfig(tool_contract="multi_turn")}, "set designer.setting=tool_use"),
        (
            {"memory": MemoryConfig(enabled=False), "designer": DesignerConfig(edit_fraction=0.5)},
            "set designer.edit_fraction=0",
        ),
        ({"model": ModelConfig(backend="openai")}, "--model.base-url"),
        ({"rollout": RolloutConfig(hint_plays_per_env=0)}, "hint_plays_per_env >= 1"),
    ],
)
def test_cross_field_checks_say_how_to_fix(change: dict[str, object], fix: str) -> None:
    with pytest.raises(ConfigError, match=fix):
        dataclasses.replace(PAPER, **change)  # type: ignore[arg-type]


def test_a_delay_longer_than_the_run_is_allowed() -> None:
    # Pending designer samples are flushed at the end of a run, so `--preset paper --steps 2` is valid.
    assert dataclasses.replace(PAPER, steps=2).reward.delay == 4


def test_from_json_rejects_unknown_fields() -> None:
    text = to_json(PAPER).replace('"steps"', '"stepz"')
    with pytest.raises(ConfigError, match="unknown TrainConfig fields"):
        from_json(text)


def test_command_line_overrides_a_preset() -> None:
    cfg, resume = parse_config(["--preset", "paper", "--steps", "7", "--designer.edit-fraction", "0.5"])
    assert resume is None
    assert cfg.steps == 7
    assert cfg.designer.edit_fraction == 0.5
    assert cfg.designer.envs_per_regen == PAPER.designer.envs_per_regen


def test_command_line_validation_errors_exit_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--rollout.plays-per-env", "1"]) == 2
    assert "plays_per_env must be >= 2" in capsys.readouterr().err


def test_resume_takes_no_other_options(tmp_path: Path) -> None:
    _, resume = parse_config(["--resume", str(tmp_path)])
    assert resume == tmp_path
    with pytest.raises(ConfigError, match="drop the other options"):
        parse_config(["--resume", str(tmp_path), "--seed", "2"])


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER.steps = 3  # type: ignore[misc]
    assert TrainConfig().run_dir == Path("runs") / "spade"
