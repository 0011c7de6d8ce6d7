"""Configuration: presets, cross-field validation, JSON and TOML round trips and command-line parsing."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from spade import modes
from spade.cli.train import config_cli, parse_config, run_cli
from spade.config import (
    CPU_TINY,
    PAPER,
    PAPER_TOOL,
    PRESETS,
    ConfigError,
    DesignerConfig,
    EvalConfig,
    EvalOptions,
    EvalSettings,
    MemoryConfig,
    ModelConfig,
    OpenAIConfig,
    PlayConfig,
    RewardConfig,
    RolloutConfig,
    TrainConfig,
    VLLMConfig,
    from_dict,
    from_json,
    preset,
    to_dict,
    to_json,
    to_toml,
)
from spade.run.preflight import check_names

FIXTURES = Path(__file__).parent / "fixtures" / "presets"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_json(name: str) -> None:
    cfg = preset(name)
    again = from_json(to_json(cfg))
    assert again == cfg
    assert isinstance(again.runs_dir, Path)
    assert isinstance(again.designer.skills, tuple)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_round_trip_through_toml(name: str) -> None:
    cfg = preset(name)
    loaded = tomllib.loads(to_toml(cfg))
    assert from_dict(TrainConfig, loaded) == cfg
    assert loaded == _without_none(to_dict(cfg))


def test_toml_leaves_out_unset_options_as_comments() -> None:
    cfg = dataclasses.replace(PAPER, eval=EvalConfig(limit=None))
    text = to_toml(cfg)
    assert "# difficulty: unset" in text
    assert "# limit: unset" in text
    assert tomllib.loads(text) == _without_none(to_dict(cfg))


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _without_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}


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
    # the 135M model imitates solved episodes (SPEC §7): in its prompt, or in a warm start before RL
    assert CPU_TINY.play.demos >= 1 or CPU_TINY.sft.episodes > 0
    assert CPU_TINY.designer.edit_format == "lines"
    assert CPU_TINY.designer.max_tokens <= 64  # a line edit, not a file


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="cpu-tiny"):
        preset("huge")


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        ({"rollout": RolloutConfig(plays_per_env=1)}, "plays_per_env must be >= 2"),
        ({"reward": RewardConfig(delay=-1)}, "reward.delay must be >= 0"),
        ({"designer": DesignerConfig(tool_contract="multi_turn")}, "set designer.setting=tool_use"),
        (
            {"memory": MemoryConfig(enabled=False), "designer": DesignerConfig(edit_fraction=0.5)},
            "set designer.edit_fraction=0",
        ),
        ({"model": ModelConfig(threads=-1)}, "model.threads must be >= 0"),
        ({"play": PlayConfig(demos=-1)}, "play.demos must be >= 0"),
        ({"model": ModelConfig(vllm=VLLMConfig(block_size=24))}, "a multiple of 16"),
        (
            {"model": ModelConfig(max_concurrency=64, vllm=VLLMConfig(max_batched_tokens=32))},
            "at least model.max_concurrency",
        ),
        ({"model": ModelConfig(vllm=VLLMConfig(cpu_bind="cores 0 and 1"))}, "a core list like '0-3'"),
    ],
)
def test_cross_field_checks_say_how_to_fix(change: dict[str, object], fix: str) -> None:
    with pytest.raises(ConfigError, match=fix):
        dataclasses.replace(PAPER, **change)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        ({"model": ModelConfig(backend="openai")}, "--model.openai.base-urls"),
        ({"rollout": RolloutConfig(hint_plays_per_env=0)}, "hint_plays_per_env >= 1"),
    ],
)
def test_a_mode_checks_the_settings_it_needs(change: dict[str, object], fix: str) -> None:
    """Self-play's own checks run whenever the registry makes the mode (the CLI, the loop)."""
    cfg = dataclasses.replace(PAPER, **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=fix):
        modes.make(cfg)
    modes.make(dataclasses.replace(cfg, mode="fixed_pool"))  # an agent-only mode needs neither


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        ({"designer": DesignerConfig(skills=("juggling",))}, "choose from"),
        (
            {"designer": DesignerConfig(setting="tool_use", skills=("logical_deduction",))},
            "not tool_use skills",
        ),
    ],
)
def test_names_are_checked_against_their_registries(change: dict[str, object], fix: str) -> None:
    cfg = dataclasses.replace(PAPER, **change)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=fix):
        check_names(cfg)


def test_a_library_call_of_train_checks_the_names_before_writing(tmp_path: Path) -> None:
    from scripted_run import tiny_config  # noqa: PLC0415 - a test helper module beside this one
    from spade.run.loop import train  # noqa: PLC0415 - the loop, needed by this test only

    cfg = tiny_config(tmp_path, designer=DesignerConfig(skills=("juggling",)))
    with pytest.raises(ConfigError, match="choose from"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_preset_files_hold_todays_values() -> None:
    """Each presets/<name>.toml loads to the values the preset had when it was Python (fixtures/presets)."""
    for name, cfg in PRESETS.items():
        expected = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
        assert to_dict(cfg) == expected, name
        assert from_dict(TrainConfig, expected) == cfg


def test_a_delay_longer_than_the_run_is_allowed() -> None:
    # Pending designer samples are flushed at the end of a run, so `--preset paper --steps 2` is valid.
    assert dataclasses.replace(PAPER, steps=2).reward.delay == 4


def test_from_json_rejects_unknown_fields() -> None:
    text = to_json(PAPER).replace('"steps"', '"stepz"')
    with pytest.raises(ConfigError, match=r"unknown options \[.stepz.\]"):
        from_json(text)


def test_command_line_overrides_a_preset() -> None:
    cfg, resume = parse_config(["--preset", "paper", "--steps", "7", "--designer.edit-fraction", "0.5"])
    assert resume is None
    assert cfg.steps == 7
    assert cfg.designer.edit_fraction == 0.5
    assert cfg.designer.envs_per_regen == PAPER.designer.envs_per_regen


def test_baseline_modes_get_a_run_name_of_their_own_unless_named() -> None:
    assert parse_config(["--preset", "cpu-tiny"])[0].run_dir == Path("runs/cpu-tiny")  # make train's run
    assert parse_config(["--mode", "fixed_pool"])[0].name == "cpu-tiny-fixed_pool"
    assert parse_config(["--preset", "paper", "--mode", "procedural"])[0].name == "paper-procedural"
    assert parse_config(["--mode", "fixed_pool", "--name", "fixed"])[0].name == "fixed"
    assert parse_config(["--mode=fixed_pool", "--name=cpu-tiny"])[0].name == "cpu-tiny"


def test_command_line_validation_errors_exit_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--rollout.plays-per-env", "1"]) == 2
    assert "plays_per_env must be >= 2" in capsys.readouterr().err


def test_unknown_names_on_the_command_line_exit_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--model.backend", "tgi"]) == 2
    assert "spade train: unknown model.backend 'tgi'; choose one of: hf, vllm" in capsys.readouterr().err
    assert config_cli(["paper", "--eval.suites", "mystery"]) == 2
    assert "spade config: eval.suites ['mystery'] are unknown; choose from: envs" in capsys.readouterr().err


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PAPER.steps = 3  # type: ignore[misc]
    assert TrainConfig().run_dir == Path("runs") / "spade"


# -- per-backend sections, the backend registry, old run directories -----------------------------------------


def test_backend_options_live_in_their_sections_on_the_command_line() -> None:
    cfg, _ = parse_config(
        ["--model.backend", "openai", "--model.openai.base-urls", "http://a:1/v1,http://b:2/v1",
         "http://c:3/v1", "--model.openai.reprobe-s", "3", "--model.vllm.kv-cache-gib", "0.25"]
    )  # fmt: skip
    assert cfg.model.openai.base_urls == ("http://a:1/v1", "http://b:2/v1", "http://c:3/v1")
    assert cfg.model.openai.reprobe_s == 3.0
    assert cfg.model.vllm.kv_cache_gib == 0.25
    with pytest.raises(ConfigError, match="not http"):
        OpenAIConfig(base_urls=("127.0.0.1:8000",))
    with pytest.raises(ConfigError, match="twice"):
        OpenAIConfig(base_urls=("http://a/v1", "http://a/v1"))


@pytest.mark.parametrize("bf16_cpu", [True, False])
def test_the_engine_samples_in_bfloat16_only_where_asked_or_where_the_cpu_has_bf16(
    bf16_cpu: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch  # noqa: PLC0415

    from spade.backends.vllm_engine import engine_dtype  # noqa: PLC0415

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16_cpu)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)

    def resolved(choice: Any, **model: Any) -> str:
        return engine_dtype(ModelConfig(vllm=VLLMConfig(dtype=choice), **model))

    assert resolved("model") == "float32"
    assert resolved("model", dtype="float16") == "float16"
    assert resolved("auto", device="cpu") == ("bfloat16" if bf16_cpu else "float32")
    assert resolved("bfloat16", device="cpu") == "bfloat16"
    assert resolved("float32") == "float32"
    assert CPU_TINY.model.vllm.dtype == "auto"
    assert CPU_TINY.model.dtype == "float32"


def test_every_backend_names_its_trainer() -> None:
    from spade.backends.registry import BACKENDS, TRAINERS  # noqa: PLC0415 - the registry under test

    assert set(TRAINERS) == set(BACKENDS)
    assert TRAINERS["scripted"] == "spade.scripted.trainer:ScriptedTrainer"


def test_unknown_backend_is_a_config_error_listing_the_registry() -> None:
    from spade.backends import BACKENDS, make_policy  # noqa: PLC0415 - the registry under test

    assert set(BACKENDS) == {"hf", "vllm", "openai", "scripted"}
    for build in (
        lambda: make_policy(ModelConfig(backend="tgi")),
        lambda: check_names(dataclasses.replace(PAPER, model=ModelConfig(backend="tgi"))),
    ):
        with pytest.raises(
            ConfigError, match=r"unknown model\.backend 'tgi'; choose one of: hf, vllm, openai"
        ):
            build()
    assert type(make_policy(ModelConfig(backend="scripted"))).__name__ == "ScriptedPolicy"


OLD_FLAT_MODEL = {
    "backend": "openai", "model": "embedded", "base_url": "http://10.0.0.5:8000/v1", "device": "auto",
    "dtype": "float32", "max_context": 4096, "request_timeout_s": 60.0, "outage_s": 30.0,
    "max_concurrency": 48, "request_retries": 5, "served_model": "base", "api_key_env": "MY_KEY",
    "server_token_ids": False, "max_lora_rank": 16, "kv_cache_gib": 0.5, "threads": 1,
    "scripted_behaviour": "valid",
}  # fmt: skip
"""``model`` of a config.json written before the per-backend sections (every flat field)."""


def test_old_flat_model_config_is_migrated_when_a_run_is_resumed(tmp_path: Path) -> None:
    import json  # noqa: PLC0415

    from spade.rundir import RunDir  # noqa: PLC0415

    old = json.loads(to_json(CPU_TINY))
    old["model"] = OLD_FLAT_MODEL
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(old))
    m = RunDir(run).load_config().model
    assert (m.backend, m.max_context, m.max_concurrency, m.threads) == ("openai", 4096, 48, 1)
    assert m.openai == OpenAIConfig(
        base_urls=("http://10.0.0.5:8000/v1",), served_model="base", api_key_env="MY_KEY",
        request_timeout_s=60.0, request_retries=5, outage_s=30.0, token_ids=False,
    )  # fmt: skip
    assert (m.vllm.max_lora_rank, m.vllm.kv_cache_gib, m.scripted.behaviour) == (16, 0.5, "valid")
    assert from_json(to_json(RunDir(run).load_config())) == RunDir(run).load_config()
    old["model"] = {**OLD_FLAT_MODEL, "backend": "hf", "base_url": ""}  # an hf run: no URL to carry over
    assert from_json(json.dumps(old)).model.openai.base_urls == ()


def test_eval_options_are_defined_once_and_keep_each_commands_defaults() -> None:
    from spade.cli.eval import EvalArgs, options  # noqa: PLC0415 - the command line under test

    shared = {f.name for f in dataclasses.fields(EvalSettings)}
    assert shared <= {f.name for f in dataclasses.fields(EvalArgs)}
    assert shared <= {f.name for f in dataclasses.fields(EvalConfig)}
    cli = options(EvalArgs())
    assert (cli.limit, cli.max_tokens) == (None, 512)  # `spade eval`: each suite's own count
    in_training = EvalOptions.of(EvalConfig(), tasks=("gcd",))
    assert (in_training.limit, in_training.max_tokens, in_training.tasks) == (8, 256, ("gcd",))
