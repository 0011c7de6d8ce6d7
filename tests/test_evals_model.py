"""Evaluation through a real model (a tiny random Llama on the hf backend): the path every backend takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade.config import EvalOptions, ModelConfig
from spade.evals.policies import PolicySource
from spade.evals.results import read_results
from spade.evals.runner import SuiteRequest, evaluate

pytestmark = pytest.mark.slow


def test_tiny_model_on_reasoning_gym_and_an_environment(
    tmp_path: Path, tiny_dir: Path, one_torch_thread: None
) -> None:
    source = PolicySource(model=ModelConfig(backend="hf", model=str(tiny_dir), device="cpu"))
    requests = [
        SuiteRequest(
            "math",
            EvalOptions(episodes=2, limit=2, max_tokens=6, temperature=0.7, tasks=("chain_sum",), fewshot=1),
        ),
        SuiteRequest(
            "envs",
            EvalOptions(
                episodes=1,
                max_tokens=6,
                tasks=("countdown",),
                params={"max_turns": 2, "context_tokens": 2048},
            ),
        ),
    ]
    reports = evaluate(requests, source, out=tmp_path / "r")
    math, envs = reports
    assert math.summary.total.n == 4
    assert math.summary.errors == 0
    turns = math.items[0].detail["episodes"][0]["turns"]
    assert 1 <= len(turns) <= 2
    assert all(t["finish"] in ("stop", "length") for t in turns)
    assert 0.0 < math.in_flight_share <= 1.0
    assert envs.summary.total.n == 1
    assert envs.items[0].detail["episodes"][0]["status"] in (
        "length",
        "turn_budget",
        "terminated",
        "truncated",
    )
    assert envs.summary.errors == 0
    back = read_results(tmp_path / "r")
    assert set(back.items) == {"math", "envs"}
