"""Named recipes: sets of fields laid over a preset (or a config file) before the command line's options.

``spade`` (the default) lays nothing: the preset as it is. ``released`` gives back the authors' released
code wherever it is known and spade chose otherwise, one field for each difference (the deviation table in
``docs/paper-recipe.md`` gives each one's reason). Options given on the command line still override a
recipe's fields.
"""

from __future__ import annotations

from typing import Any, Literal

from spade.config.errors import ConfigError
from spade.config.serial import from_dict, to_dict
from spade.config.train import TrainConfig

Recipe = Literal["spade", "released"]

RELEASED: dict[str, Any] = {
    "designer.train_rejected": False,  # rejection sampling: only accepted designs are trained
    "designer.example": "sketch",  # an interface sketch, not a complete worked example
    "designer.example_code_chars": 2000,  # memory examples show the first 2,000 characters
    "memory.warm_start": False,  # the archive starts empty
    "memory.top_up": False,  # unfilled slots stay empty: no replay of archived environments
    "memory.band_low": 0.15,  # prompt examples: win rate in [0.15, 0.85]
    "memory.band_high": 0.85,
    "rollout.hint_seeds": "own",  # hinted plays on seeds of their own
    "reward.regret_estimator": "difference_of_means",  # mean hinted minus mean unhinted
    "trainer.loss_aggregation": "sample_mean",  # Slime's per-sample mean
    "checker.review_temperature": 0.3,
    "checker.review_max_tokens": 16384,
    "checker.review_fail_open": True,  # no verdict, an empty reply or an error accepts
    "model.dtype": "bfloat16",
}
"""The released recipe's fields in every setting."""

RELEASED_TOOL_USE: dict[str, Any] = {
    "play.mask_malformed_tool_calls": True,  # SPADE_MASK_MALFORMED_TOOLCALL=1
    "rollout.compact_filter": True,  # --spade-compact-filter
}
"""And in the tool-use setting (the tool-use launchers' flags)."""

RECIPES: tuple[Recipe, ...] = ("spade", "released")


def recipe_fields(name: str, cfg: TrainConfig) -> dict[str, Any]:
    """The fields recipe ``name`` lays over ``cfg`` (dotted names), by ``cfg``'s setting.

    Raises:
        ConfigError: an unknown recipe.
    """
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; choose one of: {', '.join(RECIPES)}")
    if name == "spade":
        return {}
    return {**RELEASED, **(RELEASED_TOOL_USE if cfg.designer.setting == "tool_use" else {})}


def apply_recipe(cfg: TrainConfig, name: str) -> TrainConfig:
    """``cfg`` with recipe ``name``'s fields laid over it."""
    fields = recipe_fields(name, cfg)
    if not fields:
        return cfg
    data = to_dict(cfg)
    for dotted, value in fields.items():
        *sections, key = dotted.split(".")
        node = data
        for section in sections:
            node = node[section]
        node[key] = value
    return from_dict(TrainConfig, data)
