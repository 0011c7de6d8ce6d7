"""Config options by dotted name and the runtime options."""

from __future__ import annotations

import pytest

from spade.config import CPU_TINY, ConfigError, TrainConfig
from spade.config.options import (
    RUNTIME_OPTIONS,
    changed_options,
    option_values,
    result_settings,
    with_options,
)


def test_every_runtime_option_names_an_option_of_the_config() -> None:
    assert set(RUNTIME_OPTIONS) <= set(option_values(TrainConfig()))
    assert len(set(RUNTIME_OPTIONS)) == len(RUNTIME_OPTIONS)


def test_options_are_set_and_compared_by_dotted_name() -> None:
    cfg = with_options(CPU_TINY, {"model.threads": 1, "model.vllm.cpu_bind": "auto", "seed": 3})
    assert (cfg.model.threads, cfg.model.vllm.cpu_bind, cfg.seed) == (1, "auto", 3)
    assert cfg.model.vllm.kv_cache_gib == CPU_TINY.model.vllm.kv_cache_gib
    assert changed_options(CPU_TINY, cfg) == {"model.threads": 1, "model.vllm.cpu_bind": "auto", "seed": 3}
    assert changed_options(cfg, cfg) == {}


def test_setting_an_unknown_or_invalid_option_says_so() -> None:
    with pytest.raises(ConfigError, match=r"ModelConfig has no options \['thread'\]"):
        with_options(CPU_TINY, {"model.thread": 1})
    with pytest.raises(ConfigError, match=r"model\.threads must be >= 0"):
        with_options(CPU_TINY, {"model.threads": -1})


def test_result_settings_leave_the_runtime_options_out() -> None:
    settings = result_settings(CPU_TINY, "trainer")
    assert "compact_heap" not in settings
    assert settings["lora_rank"] == CPU_TINY.trainer.lora_rank
