"""`spade eval` / `spade compare` as a user runs them, and evaluation during and after training (scripted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import tyro

from spade import envs
from spade.cli.eval import EvalArgs, options, suite_selections
from spade.config import (
    ConfigError,
    DesignerConfig,
    EvalConfig,
    EvalOptions,
    ModelConfig,
    PlayConfig,
    RolloutConfig,
    ScriptedConfig,
    TrainConfig,
)
from spade.evals.base import EvalError, ItemResult
from spade.evals.policies import PolicySource
from spade.evals.registry import SUITES
from spade.evals.runner import evaluate
from spade.run.loop import train
from spade.run.preflight import check_names
from spade.rundir import RunDir

DATA = Path(__file__).parent / "eval_data"


def scripted_run_config(tmp_path: Path, name: str, steps: int = 1, **over: object) -> TrainConfig:
    """A small scripted self-play run (seconds)."""
    return TrainConfig(
        name=name,
        runs_dir=tmp_path,
        steps=steps,
        model=ModelConfig(backend="scripted", scripted=ScriptedConfig(behaviour="valid")),
        play=PlayConfig(max_turns=6, turn_tokens=256, context_tokens=16384),
        designer=DesignerConfig(envs_per_regen=3, regen_interval=2, skills_per_regen=1, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=4, hint_plays_per_env=4),
        **over,  # type: ignore[arg-type]
    )


def spade(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spade.cli", *args], capture_output=True, text=True, timeout=300, check=False
    )


def _one_line_error(out: subprocess.CompletedProcess[str], text: str) -> None:
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert text in lines[0]


def test_json_lines_and_per_item_results(tmp_path: Path) -> None:
    out = spade("eval", f"envs:{DATA}", "--solver", "--episodes", "3", "--json", "--out", str(tmp_path / "r"))
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["suite"] == "envs"
    assert last["n"] == 6
    assert last["score"] == 1.0
    assert last["ci95"] == [1.0, 1.0]
    assert set(last["by_category"]) == {"mathematical_reasoning"}
    lines = (tmp_path / "r" / "envs.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["detail"]["episodes"][0]["seed"] >= 2**31


def test_readable_table_says_when_a_suite_measures_nothing(tmp_path: Path) -> None:
    out = spade(
        "eval", f"envs:{DATA}/quiz_one.py", "--model.backend", "scripted", "--model.scripted.behaviour",
        "valid", "--param", "difficulty=0", "--out", str(tmp_path / "r"), "--max-tokens", "64",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "envs" in out.stdout
    assert "score" in out.stdout


def test_params_after_one_flag_and_from_repeated_flags_add_up() -> None:
    args = tyro.cli(
        EvalArgs,
        args=["math", "--param", "a=1", "b=x", "--preset", "hard", "--param", "c=[2]", "--param", "a=3"],
    )
    assert options(args).params == {"preset": "hard", "a": 3, "b": "x", "c": [2]}


def test_envs_takes_the_files_folders_and_names_that_follow_it(tmp_path: Path) -> None:
    assert suite_selections(["envs", "pool", "a.py", "math"], ("x",)) == [
        ("envs", ("pool", "a.py")),
        ("math", ("x",)),
    ]
    assert suite_selections(["envs:sokoban", "a.py"]) == [("envs", ("sokoban", "a.py"))]
    assert suite_selections(["envs"], ("sokoban",)) == [("envs", ("sokoban",))]
    with pytest.raises(EvalError, match="go after the suite envs"):
        suite_selections(["math", "pool"])
    out = spade(
        "eval", "envs", str(DATA), "--solver", "--json", "--out", str(tmp_path / "r")
    )  # as docs/eval.md
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert (last["suite"], last["n"], last["score"]) == ("envs", 2, 1.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval", "bogus"), "unknown suite 'bogus'"),
        (("eval", "math", "bogus"), "go after the suite envs: `spade eval envs bogus`"),
        (("eval",), "name at least one suite"),
        (("eval", "reasoning_gym", "--tasks", "leg_countin"), "did you mean leg_counting"),
        (("eval", "reasoning_gym", "--tasks", "arc_1d", "--preset", "easy"), "no easy preset"),
        (("eval", "math", "--param", "nonsense"), "--param takes KEY=VALUE"),
        (("eval", "envs", "--run", "/nonexistent/run"), "not a readable run directory"),
        (("eval", "math", "--solver"), "only plays environments"),
        (("compare", "/nonexistent/a"), "at least two"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    _one_line_error(spade(*args), message)


@pytest.mark.slow  # loads a tokenizer through transformers in a subprocess (~10-30 s)
def test_a_server_that_is_down_fails_before_anything_is_written(tmp_path: Path, tiny_dir: Path) -> None:
    out = spade(
        "eval", "math:chain_sum", "--model.backend", "openai", "--model.openai.base-urls", "http://127.0.0.1:9/v1",
        "--model.model", str(tiny_dir), "--model.openai.served-model", "m", "--model.openai.request-retries", "0",
        "--out", str(tmp_path / "r"),
    )  # fmt: skip
    _one_line_error(out, "the policy cannot generate")
    assert list(tmp_path.iterdir()) == []


def test_existing_output_folder_is_kept(tmp_path: Path) -> None:
    (tmp_path / "r").mkdir()
    _one_line_error(spade("eval", "envs", "--solver", "--out", str(tmp_path / "r")), "already exists")


class BrokenSuite:
    """A suite that always fails (in-training evaluation must survive it)."""

    name = "broken"

    async def run(self, policy: object, opts: EvalOptions, progress: object) -> list[ItemResult]:
        raise RuntimeError("this suite is broken on purpose")


def test_in_training_evaluation_rows_broken_suites_and_compare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(SUITES, "broken", f"{__name__}:BrokenSuite")
    suites = (f"envs:{DATA}", "broken")
    runs = []
    for name, steps in (("short", 1), ("long", 3)):
        ev = EvalConfig(every=2, suites=suites, episodes=8, limit=None)
        runs.append(train(scripted_run_config(tmp_path, name=name, steps=steps, eval=ev)))
    rows = RunDir(runs[1].root).read_metrics()
    evals = [r for r in rows if "eval/envs/score" in r]
    assert [r["step"] for r in evals] == [0, 2, 3]  # step 0, every 2 steps, and after the last step
    assert all(r["eval/broken/error"] == 1.0 and r["eval/envs/error"] == 0.0 for r in evals)
    assert "eval/envs/mathematical_reasoning/score" in evals[0]
    assert sorted(p.name for p in (runs[1].root / "eval").iterdir()) == ["step_0", "step_2", "step_3"]
    assert [r["step"] for r in rows if "agent/win_rate" in r] == [0, 1, 2]

    out = spade("compare", str(runs[0].root), str(runs[1].root), "--json")
    assert out.returncode == 0, out.stderr
    (cmp,) = [json.loads(x) for x in out.stdout.splitlines()]
    assert cmp["suite"] == "envs"
    assert cmp["paired"] == 2
    assert cmp["ci95"][0] <= cmp["diff"] <= cmp["ci95"][1]
    table = spade("compare", str(runs[0].root), str(runs[1].root))
    assert table.returncode == 0
    assert "B − A" in table.stdout


def test_in_training_evaluation_reads_a_local_benchmark_copy_from_eval_data(tmp_path: Path) -> None:
    """``eval.data`` gives the suites that read a local copy their file, as `spade eval SUITE --data PATH`."""
    aime = Path(__file__).parent / "fixtures" / "benchdata" / "aime.jsonl"
    ev = EvalConfig(every=1, suites=("aime",), data=(f"aime={aime}",), limit=None)
    rows = train(scripted_run_config(tmp_path, name="aime", steps=1, eval=ev)).read_metrics()
    scored = [r for r in rows if "eval/aime/score" in r]
    assert [r["step"] for r in scored] == [0, 1]
    assert all(r["eval/aime/n"] == 4.0 and r["eval/aime/error"] == 0.0 for r in scored)
    with pytest.raises(
        ConfigError, match=r"eval.suites \['aime'\] read a local copy: give it as --eval.data"
    ):
        check_names(TrainConfig(eval=EvalConfig(every=1, suites=("aime",))))
    with pytest.raises(ConfigError, match=r"eval.data names \['envs'\], which read no local copy"):
        check_names(TrainConfig(eval=EvalConfig(every=1, data=("envs=x",))))
    with pytest.raises(ConfigError, match=r"eval.data paths do not exist: \['aime=nowhere'\]"):
        check_names(TrainConfig(eval=EvalConfig(every=1, suites=("aime",), data=("aime=nowhere",))))
    with pytest.raises(ConfigError, match=r"eval.data entries are 'suite=PATH'"):
        EvalConfig(data=("aime",)).validate()


def test_a_runs_trained_policy_is_evaluated(tmp_path: Path) -> None:
    run = train(scripted_run_config(tmp_path, name="r", steps=2))
    out = spade("eval", f"envs:{DATA}", "--run", str(run.root), "--json", "--out", str(tmp_path / "e"))
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["policy"]["kind"] == "run"
    _one_line_error(
        spade("eval", "envs", "--run", str(run.root), "--checkpoint", "0", "--out", str(tmp_path / "x")),
        "no policy weights for checkpoint 0",
    )
    archive = evaluate(
        ["envs"], PolicySource(kind="solver"), opts=EvalOptions(params={"archive": str(run.root)})
    )
    origins = {r.detail["origin"] for r in archive[0].items}
    assert origins == {f"archive:{run.root}"}
    assert archive[0].summary.total.items > len(envs.names("games"))  # the warm start plus accepted designs
    assert archive[0].summary.total.score == 1.0
    empty = tmp_path / "empty"
    RunDir(empty).create(scripted_run_config(tmp_path, name="empty"))
    _one_line_error(spade("eval", "envs", "--run", str(empty)), "has no trained policy yet")


def test_eval_with_several_runs_prints_the_same_comparison_as_compare(tmp_path: Path) -> None:
    ev = EvalConfig(every=1, suites=(f"envs:{DATA}",), episodes=4, limit=None)
    a, b = (
        train(scripted_run_config(tmp_path, name=n, steps=s, eval=ev)).root for n, s in (("a", 2), ("b", 3))
    )
    # without suites: the runs' latest in-training evaluations, exactly as `spade compare`
    stored = spade("eval", "--run", str(a), "--run", str(b), "--json")
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout == spade("compare", str(a), str(b), "--json").stdout
    # with suites: each run's policy evaluated on the same items, then compared
    out = tmp_path / "cmp"
    fresh = spade("eval", f"envs:{DATA}", "--episodes", "4", "--run", str(a), "--run", str(b), "--out", str(out),
                  "--json")  # fmt: skip
    assert fresh.returncode == 0, fresh.stderr
    assert sorted(p.name for p in out.iterdir()) == ["1-a", "2-b"]
    (cmp,) = [json.loads(x) for x in fresh.stdout.splitlines()]
    assert (cmp["suite"], cmp["a_results"], cmp["b_results"], cmp["paired"]) == (
        "envs",
        str(out / "1-a"),
        str(out / "2-b"),
        2,
    )
    assert fresh.stdout == spade("compare", str(out / "1-a"), str(out / "2-b"), "--json").stdout
    table = spade("eval", "--run", str(a), "--run", str(b))
    assert table.returncode == 0
    assert "B − A" in table.stdout
    # a run without a policy: one line, exit 2, nothing written
    empty = tmp_path / "empty"
    RunDir(empty).create(scripted_run_config(tmp_path, name="empty"))
    _one_line_error(
        spade("eval", f"envs:{DATA}", "--run", str(a), "--run", str(empty), "--out", str(tmp_path / "x")),
        "has no trained policy yet",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "cmp", "empty"]
