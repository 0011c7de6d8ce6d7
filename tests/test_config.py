"""Configuration: presets, cross-field validation, JSON round trip and command-line parsing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spade.config import (
    CPU_TINY,
    PAPER,
    PRESETS,
    ConfigError,
    DesignerConfig,
    ModelConfig,
    PlayConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
    from_json,
    preset,
    to_json,
)
from spade.train_cli import parse_config


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


def test_cpu_tiny_is_small_and_leans_on_edit_mode() -> None:
    assert CPU_TINY.model.model == "embedded"
    assert CPU_TINY.designer.edit_fraction >= 0.5
    assert CPU_TINY.trainer.lora_rank > 0
    assert CPU_TINY.play.action_mode == "lenient"
    assert CPU_TINY.play.demos >= 1  # the 135M model imitates a solved episode (SPEC §7)
    assert CPU_TINY.designer.edit_format == "lines"
    assert CPU_TINY.designer.max_tokens <= 64  # a line edit, not a file


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
        ({"reward": RewardConfig(delay=500)}, "must be smaller than steps"),
        ({"model": ModelConfig(backend="openai")}, "--model.base-url"),
        ({"rollout": RolloutConfig(hint_plays_per_env=0)}, "hint_plays_per_env >= 1"),
        ({"model": ModelConfig(threads=-1)}, "model.threads must be >= 0"),
        ({"play": PlayConfig(demos=-1)}, "play.demos must be >= 0"),
    ],
)
def test_cross_field_checks_say_how_to_fix(change: dict[str, object], fix: str) -> None:
    with pytest.raises(ConfigError, match=fix):
        dataclasses.replace(PAPER, **change)  # type: ignore[arg-type]


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
    with pytest.raises(SystemExit) as exit_:
        parse_config(["--rollout.plays-per-env", "1"])
    assert exit_.value.code == 2
    assert "plays_per_env must be >= 2" in capsys.readouterr().err


def test_resume_takes_no_other_options(tmp_path: Path) -> None:
    _, resume = parse_config(["--resume", str(tmp_path)])
    assert resume == tmp_path
    with pytest.raises(ConfigError, match="drop the other options"):
        parse_config(["--resume", str(tmp_path), "--steps", "2"])


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER.steps = 3  # type: ignore[misc]
    assert TrainConfig().run_dir == Path("runs") / "spade"
