"""experiments/curriculum_auc.py: the learning-curve experiment end to end on the scripted backend (records,
skipping, commits, summary, docs), its plan checks, and its statistics (AUC, IQM, stratified bootstrap)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))  # not a package
sys.path.insert(0, str(Path(__file__).resolve().parent))

import auc_report as report
import auc_stats as stats
import curriculum_auc as exp

from spade.cli.report import write_report
from spade.cli.train import parse_config
from spade.run import warm_start

SCRIPTED = ["--model.backend", "scripted", "--model.scripted.behaviour", "valid", "--play.turn-tokens", "256",
            "--play.action-mode", "boxed", "--play.demos", "0", "--designer.max-tokens", "4096",
            "--designer.edit-format", "file", "--sft.designs", "0"]  # fmt: skip
TINY = ["--arms", "selfplay", "fixed_pool", "--seeds", "0", "1", "--marks", "0", "5000", "10000", "15000",
        "20000", "--regen-interval", "1", "--step-tokens", "13000", "4000", "--min-regens", "2",
        "--tasks", "variants:combination_lock", "--limit", "3", "--max-steps", "12"]  # fmt: skip


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout


def test_the_harness_records_skips_commits_and_reports_from_records_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    records = repo / "experiments" / "results" / "tiny"
    records.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "config", "user.name", "t")
    results = tmp_path / "docs" / "results.md"
    results.parent.mkdir()
    argv = [*TINY, "--name", "tiny", "--records", str(records), "--runs", str(tmp_path / "runs"),
            "--results", str(results), "--commit", "--", *SCRIPTED]  # fmt: skip
    assert exp.main(argv) == 0
    names = sorted(p.name for p in records.glob("*-s*.json"))
    assert names == ["fixed_pool-s0.json", "fixed_pool-s1.json", "selfplay-s0.json", "selfplay-s1.json"]
    # each record committed alone, as it was written
    assert sorted(_git(repo, "log", "--format=%s").splitlines()) == sorted(
        f"experiment record tiny/{n}: one finished run's held-out scores" for n in names
    )
    assert _git(repo, "show", "--stat", "--format=", "HEAD").count("|") == 1
    by_name = {n: json.loads((records / n).read_text()) for n in names}
    for r in by_name.values():
        assert [m["mark"] for m in r["marks"]] == [0, 5000, 10000, 15000, 20000]
        assert r["marks"][0]["sampled_tokens"] == 0
        assert r["marks"][0]["updates"] == 0
        assert all(m["sampled_tokens"] >= m["mark"] for m in r["marks"])
        assert all(len(m["items"]) == 3 for m in r["marks"])
        item = next(iter(r["marks"][1]["items"].values()))
        assert set(item) == {"return", "win"}
        assert len(item["return"]) == 1
        assert r["sampled_tokens"] >= 20000
        assert r["steps"] >= 2
        assert r["regenerations"] == r["steps"]
        assert len(r["commit"]) == 40
        assert len(r["config_hash"]) == 16
        assert r["wall_s"] > 0
        assert "policy" not in json.dumps(r)  # no weights, no paths to them
    # the warm start is the seed's: evaluated by its first run, reused by the others
    assert by_name["selfplay-s0.json"]["warm_start_from"] == "selfplay-s0"
    assert by_name["fixed_pool-s0.json"]["warm_start_from"] == "selfplay-s0"
    assert by_name["fixed_pool-s1.json"]["marks"][0] == by_name["selfplay-s1.json"]["marks"][0]
    assert not (tmp_path / "runs" / "fixed_pool-s0" / "eval" / "mark_0").exists()
    assert (tmp_path / "runs" / "selfplay-s0" / "eval" / "mark_0").is_dir()
    # every arm plays the same number of agent episodes per step
    plays = {n.split("-")[0]: r["agent_plays_per_step"] for n, r in by_name.items()}
    assert plays["selfplay"] == plays["fixed_pool"]
    assert by_name["selfplay-s0.json"]["designer_credited"] > 0  # the designer is credited
    assert by_name["fixed_pool-s0.json"]["designer_credited"] == 0

    s = json.loads((records / "summary.json").read_text())
    assert {"arms", "primary", "budget_hours", "commit"} <= set(s)
    assert s["arms"] == ["selfplay", "fixed_pool"]
    p = s["primary"]
    assert {"suite", "comparison", "endpoint", "estimate", "ci95", "items", "seeds_per_arm"} <= set(p)
    assert p["comparison"] == "selfplay - fixed_pool"
    assert p["seeds_per_arm"] == {"selfplay": 2, "fixed_pool": 2}
    assert p["items"] == 3
    assert p["ci95"][0] <= p["estimate"] <= p["ci95"][1]
    assert ("detectable_effect" in p) == ((p["ci95"][1] - p["ci95"][0]) / 2 > 0.05)
    text = results.read_text()
    assert text.index("## Pre-declared analysis") < text.index("## Verdict") < text.index("## Arms")
    assert "| selfplay - fixed_pool | 2 | " in text
    assert "![held-out learning curves](results/curves.png)" in text
    assert (results.parent / "results" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (records / "curves.svg").read_text().lstrip().startswith("<?xml")
    page = write_report(records)  # spade report RECORDS_DIR: the curves and the summary
    assert "<svg" in page.path.read_text()
    assert "selfplay - fixed_pool" in page.path.read_text()

    # a run killed in its last evaluation (no record, a mark missing) is resumed, not started over
    (records / "selfplay-s0.json").unlink()
    shutil.rmtree(tmp_path / "runs" / "selfplay-s0" / "eval" / "mark_20000")
    capsys.readouterr()
    assert exp.main(argv) == 0
    out = capsys.readouterr().out
    assert "selfplay-s0: resuming: spade train --resume" in out
    assert out.count("recorded, skipped") == 3
    again = json.loads((records / "selfplay-s0.json").read_text())
    assert again["marks"][:4] == by_name["selfplay-s0.json"]["marks"][:4]  # the marks done before: kept
    assert again["marks"][4]["mark"] == 20000

    # the same command on a machine without the runs: every recorded run is skipped, none trained
    capsys.readouterr()
    argv[argv.index("--runs") + 1] = str(tmp_path / "elsewhere")
    assert exp.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("recorded, skipped") == 4
    assert "training" not in out
    assert not (tmp_path / "elsewhere").exists()
    # records of another plan are refused, not mixed
    other = [*argv[: argv.index("--marks")], "--marks", "0", "5000", "10000", "15000", "30000",
             *argv[argv.index("--marks") + 6 :]]  # fmt: skip
    with pytest.raises(SystemExit, match="another plan"):
        exp.main(other)


def test_a_signal_to_the_harness_stops_its_run_resumably_and_starts_no_other(tmp_path: Path) -> None:
    """SIGTERM to the harness is passed on to the live ``spade train`` (which stops resumably, as a Ctrl-C
    to it would); no further run starts, no process is left, and the harness exits 130."""
    runs = tmp_path / "runs"
    argv = [*TINY, "--name", "tiny", "--parallel", "1", "--records", str(tmp_path / "records"),
            "--runs", str(runs), "--results", str(tmp_path / "results.md"), "--", *SCRIPTED]  # fmt: skip
    script = Path(__file__).resolve().parents[1] / "experiments" / "curriculum_auc.py"
    proc = subprocess.Popen([sys.executable, str(script), *argv], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the first run has started: stop the experiment
        seen.append(line)
        if ": training: " in line:
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(seen) + proc.stdout.read()
    assert proc.wait(timeout=300) == 130, out
    assert "stopped: the same command skips what is recorded" in out
    started = [ln for ln in out.splitlines() if ": training: " in ln]
    assert len(started) == 1 or "wrote" in out, out  # a second run starts only after the first one's record
    assert len(list((tmp_path / "records").glob("*-s*.json"))) < 4
    left = subprocess.run(["pgrep", "-f", str(runs)], capture_output=True, text=True, check=False)
    assert left.stdout == "", left.stdout


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (["--marks", "0", "5000", "10000", "20000"], "K >= 4"),
        (["--marks", "10", "5000", "10000", "15000", "20000"], "start at 0"),
        (["--min-regens", "8"], "regenerations"),
        (["--max-steps", "1"], "max-steps"),
        (["--arms", "selfplay", "selfplay_untrained"], "primary comparison"),
        (["--", *SCRIPTED, "--designer.no-such-option", "1"], "spade train refuses"),
    ],
)
def test_a_plan_that_breaks_the_design_is_refused(
    change: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        exp.parse_plan([*TINY, *change])
    assert needle in capsys.readouterr().err


def test_the_default_cpu_tiny_plan_makes_at_least_8_regenerations_and_the_delay_credits_them() -> None:
    plan, _ = exp.parse_plan(["--report-only"])  # the default plan, its arms' options not parsed
    steps, regens = exp.projected_run(plan)
    assert regens >= 8
    assert steps <= plan.max_steps
    assert plan.delay <= plan.regen_interval  # a design is credited once its interval's plays measured it
    assert len(plan.marks) - 1 >= 4


def test_a_delay_equal_to_the_interval_credits_every_regenerations_designs(tmp_path: Path) -> None:
    """The harness's reward.delay (= the regeneration interval): each regeneration's designs are credited
    when the next regeneration replaces them, and the last ones at the run's final step."""
    from scripted_run import tiny_config  # noqa: PLC0415 - the tests' scripted run helper
    from spade.config import RewardConfig  # noqa: PLC0415
    from spade.run.loop import train  # noqa: PLC0415

    run = train(tiny_config(tmp_path, steps=6, reward=RewardConfig(variant="regret", delay=2)))
    rows = run.read_metrics()
    designed = {r["step"]: r["designer/envs"] for r in rows if "designer/envs" in r}
    credited = {r["step"]: r["designer/credited"] for r in rows if "designer/credited" in r}
    assert sorted(designed) == [0, 2, 4]
    assert credited == {2: designed[0], 4: designed[2], 5: designed[4]}


def test_every_arm_of_a_seed_shares_the_warm_start() -> None:
    keys = {arm: warm_start.cache_key(parse_config(["--preset", "cpu-tiny", *args, "--seed", "3"])[0])
            for arm, args in exp.ARMS.items() if arm != "selfplay_shuffled"}  # fmt: skip
    assert len(set(keys.values())) == 1, keys


# -- statistics ----------------------------------------------------------------------------------------


def test_iqm_cuts_a_quarter_from_each_end() -> None:
    assert stats.iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)  # cuts 1
    assert 100
    assert stats.iqm([4, 1, 3, 2]) == pytest.approx(2.5)
    assert stats.iqm([1, 2, 9]) == pytest.approx(4.0)  # fewer than 4: the mean
    assert stats.iqm(np.array([[1, 2, 3, 40], [0, 0, 0, 8]]), axis=1) == pytest.approx([2.5, 0.0])


def _record(arm: str, seed: int, curve: list[list[float]]) -> dict[str, object]:
    """A record whose item ``i`` returns ``curve[k][i]`` at mark ``k`` (marks 0, 10, 20, ...)."""
    marks = [{"mark": 10 * k, "sampled_tokens": 10 * k, "items": {f"i{i}": {"return": [v], "win": [float(v > 0.5)]}
              for i, v in enumerate(row)}} for k, row in enumerate(curve)]  # fmt: skip
    return {"arm": arm, "seed": seed, "marks": marks}


def test_the_area_is_the_mean_over_marks_after_the_warm_start_of_the_mean_item_score() -> None:
    r = _record("selfplay", 0, [[0.9, 0.9], [0.0, 0.2], [0.4, 0.6], [1.0, 0.0], [0.2, 0.2]])
    assert stats.area(r, ["i0", "i1"]) == pytest.approx(np.mean([0.9, 0.1, 0.5, 0.5, 0.2]))
    t = report.table([r], ["i0", "i1"], "return")  # the warm start is not in the area
    assert t.mean() == pytest.approx(np.mean([0.1, 0.5, 0.5, 0.2]))
    assert report.table([r], ["i0", "i1"], "return", final=True).tolist() == [[0.2, 0.2]]
    assert report.table([r], ["i0", "i1"], "win").mean() == pytest.approx(np.mean([0, 0.5, 0.5, 0]))


def test_the_stratified_bootstrap_resamples_seeds_within_an_arm_and_pairs_within_seed() -> None:
    two = np.array([[0.0], [1.0]])  # two seeds, one item: resampled means 0, 0.5 or 1
    e = stats.arm_estimate(two)
    assert (e.value, e.lo, e.hi) == (0.5, 0.0, 1.0)
    rng = np.random.default_rng(1)
    a = rng.random((6, 20))
    shifted = stats.paired_estimate(a, a + 0.1)  # every seed's difference is 0.1: a paired interval of 0
    assert shifted.value == pytest.approx(0.1)
    assert shifted.lo == pytest.approx(0.1)
    assert shifted.hi == pytest.approx(0.1)
    assert shifted.verdict == "better"
    noisy = stats.paired_estimate(a, rng.random((6, 20)))
    assert noisy.lo < noisy.value < noisy.hi
    assert noisy.seeds == 6
    assert noisy.items == 20
    with pytest.raises(ValueError, match="same seeds"):
        stats.paired_estimate(a, a[:5])


def test_a_wide_interval_states_the_smallest_detectable_effect() -> None:
    assert report.detectable_effect(0.05) == pytest.approx(0.05 * 2.8016 / 1.96, rel=1e-3)


# -- power ---------------------------------------------------------------------------------------------


def _pilot(folder: Path, spread: float, episodes: int = 2, seeds: int = 4, wall_s: float = 1800.0) -> None:
    """Pilot records: selfplay 0.1 above fixed_pool on 30 items at 4 marks, seeds spread by ``spread``."""
    import experiment_power  # noqa: F401, PLC0415 - importable beside the harness

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(seeds):
        shift = spread * rng.standard_normal()
        for arm, base in (("fixed_pool", 0.3), ("selfplay", 0.4 + shift)):
            curve = [[float(np.clip(base + 0.05 * k + 0.1 * rng.standard_normal(), -1, 1)) for _ in range(30)]
                     for k in range(5)]  # fmt: skip
            r = _record(arm, seed, curve)
            for m in r["marks"]:  # type: ignore[attr-defined]
                for v in m["items"].values():
                    v["return"] = [v["return"][0] + 0.2 * rng.standard_normal() for _ in range(episodes)]
                    v["win"] = [0.0] * episodes
            r |= {"format": 1, "wall_s": wall_s, "eval_s": wall_s / 4}
            (folder / f"{arm}-s{seed}.json").write_text(json.dumps(r))


def test_power_picks_the_smallest_design_within_the_target_and_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import experiment_power  # noqa: PLC0415

    _pilot(tmp_path / "calm", spread=0.02)
    _pilot(tmp_path / "wild", spread=0.15)
    assert experiment_power.main([str(tmp_path / "calm"), "--budget-hours", "15", "--write"]) == 0
    calm = json.loads((tmp_path / "calm" / "power.json").read_text())
    assert calm["reaches_target"] is True
    assert calm["chosen"]["half_width"] <= 0.05
    assert calm["chosen"]["hours"] <= 15
    assert "detectable_effect" not in calm
    cheaper = [d for d in calm["grid"] if d["half_width"] <= 0.05 and d["hours"] < calm["chosen"]["hours"]]
    assert cheaper == []
    assert experiment_power.main([str(tmp_path / "wild"), "--budget-hours", "15", "--write"]) == 0
    wild = json.loads((tmp_path / "wild" / "power.json").read_text())
    assert wild["pilot"]["observed_sd"] > calm["pilot"]["observed_sd"]
    assert wild["chosen"]["seeds"] > calm["chosen"]["seeds"]
    # a budget the pilot nearly spent: the best design that fits, and the smallest effect it detects
    assert experiment_power.main([str(tmp_path / "wild"), "--budget-hours", "5", "--write"]) == 0
    tight = json.loads((tmp_path / "wild" / "power.json").read_text())
    assert tight["reaches_target"] is False
    assert tight["chosen"]["hours"] <= 5
    assert tight["detectable_effect"] > tight["chosen"]["half_width"]
    assert "smallest" not in capsys.readouterr().err


def test_the_plan_key_lets_arms_and_seeds_be_added_but_not_other_marks() -> None:
    key = exp.parse_plan(TINY)[0].key()
    more = [*TINY, "--seeds", "0", "1", "2", "--parallel", "1", "--max-steps", "40"]
    assert exp.parse_plan(more)[0].key() == key
    assert exp.parse_plan([*TINY, "--episodes", "2"])[0].key() != key
    assert exp.parse_plan([*TINY, "--", "--trainer.lr", "0.001"])[0].key() != key
