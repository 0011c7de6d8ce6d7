"""The sampled-token budget (``sampled_token_budget``): a run ends at the step its sampled tokens reach it,
and a resumed run keeps the count, so it stops where an uninterrupted one does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripted_run import tiny_config
from spade.config import ConfigError, TrainConfig
from spade.run.loop import train
from spade.rundir import RunDir


def _rows(run: RunDir) -> list[dict[str, float]]:
    return [r for r in run.read_metrics() if "agent/plays" in r]


def _step_tokens(row: dict[str, float]) -> float:
    keys = ("agent/sampled_tokens", "designer/sampled_tokens", "hint/sampled_tokens")
    return sum(row.get(k, 0.0) for k in keys)


def test_budget_counts_agent_designer_and_hint_tokens(tmp_path: Path) -> None:
    rows = _rows(train(tiny_config(tmp_path, steps=3)))
    assert len(rows) == 3
    total = 0.0
    for row in rows:
        total += _step_tokens(row)
        assert row["budget/sampled_tokens"] == total
    assert rows[0]["designer/sampled_tokens"] > 0  # a regeneration step counts its designs
    assert any(r.get("hint/sampled_tokens", 0.0) > 0 for r in rows)  # so does a step that wrote hints


def test_budget_ends_the_run_early_and_resume_keeps_the_count(tmp_path: Path) -> None:
    full = _rows(train(tiny_config(tmp_path, name="full", steps=5)))
    budget = int(full[1]["budget/sampled_tokens"]) + 1  # reached during the third step
    stopped = _rows(train(tiny_config(tmp_path, name="budget", steps=5, sampled_token_budget=budget)))
    assert [r["step"] for r in stopped] == [0, 1, 2]
    assert stopped[-1]["budget/sampled_tokens"] >= budget > stopped[-2]["budget/sampled_tokens"]
    # step 2's designs are due at step 3 (delay 1): the budget's last step credits them, as the last step does
    assert full[2].get("designer/credited", 0.0) == 0.0
    assert stopped[2]["designer/credited"] == 3.0

    # killed after one step, then resumed: the count continues from the checkpoint
    run = train(tiny_config(tmp_path, name="resumed", steps=1, sampled_token_budget=budget))
    state = json.loads((run.latest_checkpoint() or run.root / "missing").joinpath("state.json").read_text())
    assert state["sampled_tokens"] == int(full[0]["budget/sampled_tokens"])
    resumed = _rows(train(TrainConfig(runs_dir=tmp_path, name="resumed"), resume=True, steps=5))
    assert [r["budget/sampled_tokens"] for r in resumed] == [r["budget/sampled_tokens"] for r in stopped]

    # a finished run resumed again does no further step
    again = _rows(train(TrainConfig(runs_dir=tmp_path, name="resumed"), resume=True, steps=5))
    assert len(again) == 3


def test_negative_budget_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sampled_token_budget"):
        tiny_config(tmp_path, sampled_token_budget=-1)
