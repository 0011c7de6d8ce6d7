"""In-training evaluation at sampled-token marks (``eval.at_tokens``) on the scripted backend."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spade.config import ConfigError, EvalConfig, TrainConfig
from spade.run.loop import train
from test_train import scripted_config

MARKS = (0, 1000, 3000, 7000)
"""The scripted fixed-pool run samples 1,700-1,800 tokens a step: marks at steps 0, 1, 2 and the run's end."""


def _cfg(tmp_path: Path, name: str = "run") -> TrainConfig:
    marks = EvalConfig(at_tokens=MARKS, suites=("envs:combination_lock",), limit=1)
    return scripted_config(tmp_path, "valid", name, steps=8, mode="fixed_pool", eval=marks,
                           sampled_token_budget=MARKS[-1])  # fmt: skip


def _marks(run_root: Path) -> dict[int, dict[str, int]]:
    out = {}
    for folder in sorted((run_root / "eval").iterdir()):
        s = json.loads((folder / "summary.json").read_text())
        out[s["mark"]] = {"updates": s["updates"], "sampled_tokens": s["sampled_tokens"]}
        assert folder.name == f"mark_{s['mark']}"
    return out


def test_each_mark_is_evaluated_once_at_the_first_step_that_reached_it_and_at_the_end(tmp_path: Path) -> None:
    run = train(_cfg(tmp_path))
    marks = _marks(run.root)
    assert sorted(marks) == list(MARKS)
    assert marks[0] == {"updates": 0, "sampled_tokens": 0}  # the warm start, before any update
    rows = [r for r in run.read_metrics() if "agent/plays" in r]
    tokens_before = [0] + [int(r["budget/sampled_tokens"]) for r in rows]  # at the top of each step
    for mark, seen in marks.items():
        first = next(i for i, t in enumerate(tokens_before) if t >= mark)
        assert seen == {"updates": first, "sampled_tokens": tokens_before[first]}
    assert marks[MARKS[-1]]["updates"] == len(rows)  # the budget ended the run: the last mark after it
    assert "eval/envs/score" in run.read_metrics()[-1]


def test_a_resumed_run_neither_redoes_nor_skips_a_mark(tmp_path: Path) -> None:
    whole = _marks(train(_cfg(tmp_path, "whole")).root)
    cfg = dataclasses.replace(_cfg(tmp_path, "cut"), steps=2)  # stopped after two steps (marks 0, 1000, 3000)
    first = train(cfg).root
    done = {p.parent.name: p.stat().st_mtime_ns for p in (first / "eval").glob("mark_*/summary.json")}
    assert set(_marks(first)) == {0, 1000, 3000}
    resumed = train(cfg, resume=True, steps=8).root
    assert _marks(resumed) == whole
    after = {p.parent.name: p.stat().st_mtime_ns for p in (first / "eval").glob("mark_*/summary.json")}
    assert all(after[name] == written for name, written in done.items())  # marks done before: not redone


@pytest.mark.parametrize(
    ("at_tokens", "every", "needle"),
    [((10, 5), 0, "increasing"), ((-1,), 0, "increasing"), ((0, 10), 2, "replaces eval.every")],
)
def test_bad_marks_are_refused_with_the_way_out(at_tokens: tuple[int, ...], every: int, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        EvalConfig(at_tokens=at_tokens, every=every).validate()
