"""A fixed scripted-backend run of each mode gives the metrics recorded in tests/fixtures/scripted_metrics/.

The recordings were made before the loop was split into modes (issue #31): a refactor of the loop must leave
every numeric metric as it was. Metrics that measure the machine (time, speed, memory use) or depend on the
batching of concurrent requests are left out of the comparison.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from spade.cli.train import run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "scripted_metrics"
EXCLUDED = ("time/", "speed/", "resources/", "engine/", "sft/cached", "sft/cache_rebuilt", "designer/novelty",
            "designer/reward_spurious", "designer/reward_real_mean")  # fmt: skip
"""Prefixes of metrics not compared: wall-clock times and rates, the process's memory, the engine's request
batching (it depends on timing), whether the warm start's cache already existed on this machine, and the
novelty and reward-source metrics (measured since the recording; every other value must stay as recorded)."""
COMMON = [
    "--model.backend", "scripted",
    "--steps", "3",
    "--play.action-mode", "boxed",
    "--play.max-turns", "6",
    "--play.turn-tokens", "256",
    "--play.context-tokens", "16384",
    "--designer.envs-per-regen", "2",
    "--designer.regen-interval", "2",
    "--designer.skills-per-regen", "2",
    "--designer.max-tokens", "4096",
    "--rollout.plays-per-env", "4",
    "--rollout.hint-plays-per-env", "4",
    "--reward.variant", "blend",
    "--reward.delay", "1",
    "--checker.probe-episodes", "2",
    "--checker.exploit-episodes", "3",
    "--corpus.no-enabled",
    "--sandbox.call-timeout-s", "1.0",
    "--sandbox.load-timeout-s", "2.0",
]  # fmt: skip
MODES = {
    "selfplay": ["--mode", "selfplay", "--designer.edit-fraction", "0"],
    "fixed_pool": ["--mode", "fixed_pool", "--rollout.no-fill-batch"],  # recorded before the batch was filled
    "procedural": ["--mode", "procedural", "--procedural.tasks", "chain_sum", "products",
                   "--procedural.window", "4", "--procedural.upper", "0.75", "--procedural.lower", "0.25"],
}  # fmt: skip


def scripted_args(mode: str, runs_dir: Path) -> list[str]:
    """The command line (after ``spade train``) of the recorded run of ``mode``."""
    return [*COMMON, *MODES[mode], "--runs-dir", str(runs_dir), "--name", mode]


def compared(row: dict[str, object]) -> dict[str, float]:
    """The numeric metrics of a row that are compared."""
    return {
        k: float(v)  # type: ignore[arg-type]
        for k, v in row.items()
        if isinstance(v, int | float) and not k.startswith(EXCLUDED)
    }


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_scripted_run_gives_the_recorded_metrics(tmp_path: Path, mode: str) -> None:
    assert run_cli(scripted_args(mode, tmp_path)) == 0
    got = [json.loads(line) for line in (tmp_path / mode / "metrics.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (FIXTURES / f"{mode}.jsonl").read_text().splitlines()]
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(map(compared, got), map(compared, want), strict=True)):
        assert sorted(g) == sorted(w), f"step {step}: metric names differ"
        off = {k: (g[k], w[k]) for k in w if not math.isclose(g[k], w[k], rel_tol=1e-5, abs_tol=1e-6)}
        assert off == {}, f"step {step}: (got, recorded) differ"


def test_a_fixed_pool_smaller_than_the_batch_fills_it(tmp_path: Path) -> None:
    """cpu-tiny's pool is one game: with ``rollout.fill_batch`` it gets the plays of the whole batch (2
    environments × 4 plays), as self-play's step would play, instead of its own 4."""
    args = [a for a in scripted_args("fixed_pool", tmp_path) if a != "--rollout.no-fill-batch"]
    assert run_cli(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "fixed_pool" / "metrics.jsonl").read_text().splitlines()]
    recorded = [json.loads(line) for line in (FIXTURES / "fixed_pool.jsonl").read_text().splitlines()]

    def first_plays(rows: list[dict[str, float]]) -> list[float]:  # before the constant groups' extra plays
        return [r["agent/plays"] - r["agent/extra_plays"] for r in rows]

    assert first_plays(recorded) == [4.0, 4.0, 4.0]
    assert first_plays(rows) == [8.0, 8.0, 8.0]
