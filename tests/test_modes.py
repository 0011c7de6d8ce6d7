"""The mode registry: every built-in mode, and a new baseline added as one class and one ``register`` call."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scripted_run import tiny_config
from spade import modes
from spade.config import ConfigError, TrainConfig
from spade.modes import Mode, Regeneration
from spade.run.components import Components
from spade.run.loop import train
from spade.run.state import LoopState


class OneSeed(Mode):
    """A toy baseline: the agent plays one seed game at every step."""

    name = "one_seed"
    regen_line = "the one seed game again"

    async def regenerate(self, cfg: TrainConfig, c: Components, state: LoopState, step: int) -> Regeneration:
        del cfg, c, state, step
        return Regeneration(["seed:combination_lock"])


modes.register(OneSeed.name, OneSeed)


def test_every_registered_mode_is_made_by_its_name() -> None:
    assert {"selfplay", "fixed_pool", "procedural"} <= set(modes.names())
    for name in modes.names():
        mode = modes.make(dataclasses.replace(TrainConfig(), mode=name))  # type: ignore[arg-type]
        assert isinstance(mode, Mode)
        assert mode.name == name


def test_an_unknown_mode_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown mode .nope.; choose one of: .*selfplay"):
        modes.make(dataclasses.replace(TrainConfig(), mode="nope"))  # type: ignore[arg-type]


def test_a_registered_toy_mode_trains_through_the_real_loop(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "toy", steps=3, mode="one_seed")
    lines: list[str] = []
    rows = train(cfg, progress=lines.append).read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["agent/plays"] >= cfg.rollout.plays_per_env for r in rows)
    assert not any(k.startswith("designer/") for r in rows for k in r)  # agent only: nothing designed
    assert all(r["pool/covered"] > 0.0 for r in rows)  # the default metrics of an agent-only mode
    assert "step 0: the one seed game again" in lines
    assert modes.make(cfg).run_name("cpu-tiny") == "cpu-tiny-one_seed"
