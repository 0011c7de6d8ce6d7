"""The paper presets run end to end with the scripted backend, and each paper ablation is one working switch."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spade.cli.train import parse_config
from spade.config import (
    PAPER,
    CheckerConfig,
    MemoryConfig,
    ModelConfig,
    RolloutConfig,
    ScriptedConfig,
    TrainConfig,
)
from spade.design import phase, request
from spade.modes import selfplay
from spade.run.loop import train
from spade.sandbox import Limits

SMALL = [
    "--model.backend", "scripted",
    "--model.scripted.behaviour", "valid",
    "--steps", "2",
    "--designer.envs-per-regen", "3",
    "--rollout.plays-per-env", "2",
    "--rollout.hint-plays-per-env", "2",
    "--checker.probe-episodes", "2",
    "--checker.exploit-episodes", "3",
    "--sandbox.call-timeout-s", "2.0",
]  # fmt: skip
"""Sizes shrunk for a fast test; everything else is the preset."""


@pytest.mark.parametrize(("behaviour", "valid"), [("valid", 1.0), ("broken", 0.0), ("hostile", 0.0)])
def test_the_scripted_designer_writes_cpu_tinys_line_edits(
    tmp_path: Path, behaviour: str, valid: float
) -> None:
    """cpu-tiny's designer rewrites numbered lines of combination_lock: `valid` must pass the checker there
    (it used to answer with a whole quiz module, which the lines format refuses), the others must not."""
    flags = ["--preset", "cpu-tiny", "--model.backend", "scripted", "--model.scripted.behaviour", behaviour,
             "--steps", "1", "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0"]  # fmt: skip
    cfg, _ = parse_config([*flags, "--runs-dir", str(tmp_path), "--name", behaviour])
    row = _rows(train(cfg).root)[0]
    # every slot of a valid regeneration filled at once; a rejected design is retried (designer.attempts 2)
    want = 4 if behaviour == "valid" else 4 * cfg.designer.attempts
    assert row["designer/envs"] == want
    assert row["designer/valid_rate"] == valid, {k: v for k, v in row.items() if "rejected" in k}


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("name", ["paper", "paper-tool"])
def test_paper_presets_run_end_to_end_with_the_scripted_backend(tmp_path: Path, name: str) -> None:
    cfg, _ = parse_config(["--preset", name, *SMALL, "--runs-dir", str(tmp_path), "--name", "run"])
    run = train(cfg)
    rows = _rows(run.root)
    assert [r["step"] for r in rows] == [0, 1]
    first = rows[0]
    assert 3 <= first["designer/envs"] <= 3 * 5  # 3 slots, a rejected design retried up to 5 times
    assert first["designer/attempts_mean"] == first["designer/envs"] / 3
    assert first["designer/valid_rate"] > 0
    assert first["agent/win_rate_hint"] == 1.0  # the code-only hint reaches every hinted seed
    assert first["hint/accepted_rate"] == 1.0
    saved = json.loads((run.root / "config.json").read_text())
    assert saved["model"]["max_context"] == 32768
    assert saved["designer"]["hint_mode"] == "code"
    sources = [p.read_text() for p in (run.root / "envs").glob("s00000_*.py")]
    assert sources
    if name == "paper-tool":  # designed to the multi-turn contract and reviewed by the model
        assert saved["checker"]["llm_review"]
        assert all("self.instructions" in s and "ToolEnv" in s for s in sources)
    else:
        assert all("TextEnv" in s for s in sources)


def small_paper(tmp_path: Path, behaviour: str = "valid", **over: Any) -> TrainConfig:
    """The paper preset at test size, credited immediately (delay 0) so one step shows the designer update.

    The corpus stays on: its documents make the design prompts differ, so a mixed scripted designer mixes."""
    base = dataclasses.replace(
        PAPER,
        runs_dir=tmp_path,
        name=over.pop("name", "run"),
        steps=over.pop("steps", 1),
        model=ModelConfig(
            backend="scripted", scripted=ScriptedConfig(behaviour=behaviour), max_context=32768
        ),
        designer=dataclasses.replace(PAPER.designer, envs_per_regen=6, skills_per_regen=1, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=2, hint_plays_per_env=2),
        reward=dataclasses.replace(PAPER.reward, delay=0, variant="regret"),
        checker=CheckerConfig(probe_episodes=2, exploit_episodes=3),
        sandbox=Limits(call_timeout_s=1.0, load_timeout_s=2.0),
    )
    return dataclasses.replace(base, **over)


def test_no_designer_training_still_designs_but_never_updates_the_designer(tmp_path: Path) -> None:
    trained = _rows(train(small_paper(tmp_path, "mixed", name="trained")).root)[0]
    frozen_cfg = small_paper(tmp_path, "mixed", name="frozen")
    frozen_cfg = dataclasses.replace(
        frozen_cfg, designer=dataclasses.replace(frozen_cfg.designer, train=False)
    )
    frozen = _rows(train(frozen_cfg).root)[0]
    for row in (trained, frozen):
        assert row["designer/envs"] >= 6  # 6 slots, retries included
        assert row["designer/credited"] == row["designer/envs"]
    assert trained["designer/samples_kept"] > 0
    assert "loss/designer" in trained
    assert frozen["designer/samples_kept"] == 0
    assert "loss/designer" not in frozen


def test_no_memory_plays_only_this_regenerations_designs(tmp_path: Path) -> None:
    rows = {}
    for enabled in (True, False):
        cfg = small_paper(tmp_path, "mixed", name=f"memory-{enabled}")
        cfg = dataclasses.replace(cfg, memory=MemoryConfig(enabled=enabled))
        rows[enabled] = _rows(train(cfg).root)[0]
    for row in rows.values():
        assert 0 < row["designer/valid_rate"] < 1
    valid = round(rows[False]["designer/valid_rate"] * rows[False]["designer/envs"])
    assert rows[False]["agent/plays"] == 2 * valid  # no replay of archived environments
    assert rows[True]["agent/plays"] == 2 * 6  # with memory the archive tops the batch up


class _NoMemory:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the no-memory ablation read memory.{name}")


def test_no_memory_prompts_show_no_examples() -> None:
    cfg = dataclasses.replace(PAPER, memory=MemoryConfig(enabled=False))
    requests = request.Requests(cfg.designer, _NoMemory(), None, steer=cfg.memory.enabled)  # type: ignore[arg-type]
    slot = request.Slot(0, "logical_deduction", "generate")
    req = requests.make(slot, random.Random(1), 0)
    assert (req.examples, req.negatives, req.document) == ((), (), None)


def test_no_memory_falls_back_to_seed_environments_only() -> None:
    cfg = dataclasses.replace(PAPER, memory=MemoryConfig(enabled=False))
    records = [
        SimpleNamespace(env_id="seed:a", is_seed=True),
        SimpleNamespace(env_id="s00000_01_x", is_seed=False),
        SimpleNamespace(env_id="seed:b", is_seed=True),
    ]
    memory: Any = SimpleNamespace(records=lambda status=None: records)
    fresh = phase.DesignOutcome("s00004_00_x", "x", "generate", True, "s00004_00_x", None, "")
    rejected = dataclasses.replace(fresh, env_id="s00004_01_x", valid=False)
    assert selfplay.fresh_only(cfg, memory, [fresh, rejected], 4) == ["s00004_00_x"]
    assert sorted(selfplay.fresh_only(cfg, memory, [rejected], 4)) == ["seed:a", "seed:b"]


def test_two_skills_design_only_for_the_chosen_pair(tmp_path: Path) -> None:
    pair = ("mathematical_reasoning", "pattern_recognition")
    cfg = small_paper(tmp_path, name="two", steps=2)
    cfg = dataclasses.replace(
        cfg,
        designer=dataclasses.replace(
            cfg.designer, skills=pair, skills_per_regen=2, envs_per_regen=4, regen_interval=1
        ),
    )
    run = train(cfg)
    designed = sorted(p.stem for p in (run.root / "envs").rglob("s0000*.py"))  # accepted or not
    assert len(designed) == 8
    assert {d.split("_", 2)[2] for d in designed} == set(pair)


def test_instance_hints_are_written_per_seed(tmp_path: Path) -> None:
    cfg = small_paper(tmp_path, name="instance")
    cfg = dataclasses.replace(cfg, designer=dataclasses.replace(cfg.designer, hint_mode="instance"))
    row = _rows(train(cfg).root)[0]
    assert row["hint/accepted_rate"] == 1.0
    assert row["agent/win_rate_hint"] == 1.0
