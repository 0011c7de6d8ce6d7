"""experiments/selfplay_vs_baselines.py: the whole pipeline on the scripted backend, and its statistics."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))  # not a package

import experiment_power as power
import experiment_report as report
import experiment_stats as stats
import selfplay_vs_baselines as exp

from spade import envs
from spade.cli.eval import EvalArgs, options
from spade.cli.train import parse_config
from spade.config import ModelConfig, OpenAIConfig, preset

SCRIPTED = ["--model.backend", "scripted", "--play.turn-tokens", "256", "--play.action-mode", "boxed",
            "--play.demos", "0", "--designer.max-tokens", "4096", "--designer.edit-format", "file",
            "--sft.designs", "0"]  # fmt: skip


def test_experiment_end_to_end_on_the_scripted_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "doc" / "results.md"
    notes = tmp_path / "notes.md"
    notes.write_text("Read by hand: the scripted backend measures nothing.")
    argv = ["--quick", "--modes", "selfplay", "fixed_pool", "--seeds", "0", "1",
            "--out", str(tmp_path / "runs"), "--results", str(results), "--rg-tasks", "basic_arithmetic",
            "--eval-every", "1", "--notes", str(notes), "--", *SCRIPTED]  # fmt: skip
    assert exp.main(argv) == 0
    text = results.read_text()
    plan = exp.parse_plan(argv)
    labels = [s.label for s in plan.suites]
    # the trained level (0) for the untrained skills only, one level up for both
    assert labels == ["lock-variants", "envs-heldout-skills-d0", "envs-heldout-skills-d1",
                      "envs-trained-skills-d1", "rg"]  # fmt: skip
    trained = plan.suites[3].args
    assert trained[trained.index("--tasks") + 1] == "combination_lock"  # the preset's designer.seeds
    for suite in labels:
        for group in ("start", "selfplay", "fixed_pool"):
            assert f"| {suite} | {group} | " in text
        for pair in ("selfplay − start", "fixed_pool − start", "selfplay − fixed_pool"):
            assert f"| {suite} | {pair} | " in text
    for run in (
        "selfplay-s0",
        "selfplay-s1",
        "fixed_pool-s0",
        "fixed_pool-s1",
    ):
        assert f"| {run} | " in text
        rows = report.read_rows(tmp_path / "runs" / run)
        steps = [r for r in rows if "agent/plays" in r]
        assert steps[-1]["budget/sampled_tokens"] >= plan.budget  # the budget ended every run
        assert len(steps) < plan.max_steps
        assert rows[-1]["step"] == len(steps)  # the final in-training evaluation, after the last step
        assert "eval/envs/score" in rows[-1]  # the held-out curve's last point: the primary suite
    for name in ("designer_validity", "win_rate", "regret", "heldout"):
        png = tmp_path / "doc" / "results" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(results/{name}.png)" in text
    assert "## How to reproduce" in text
    assert "## Against the warm start" in text  # in-training evaluation at step 0 of every run
    for mode in ("selfplay", "fixed_pool"):
        assert f"| {mode} | 2 | " in text
        assert f"lock-variants: {mode} " in text
        assert "its own warm start" in text
    assert "## Interpretation" in text
    assert text.index("## Pre-declared analysis") < text.index("## Summary") < text.index("## Scores")
    assert "**Primary result** (lock-variants, selfplay − fixed_pool)" in text
    assert "Read by hand: the scripted backend measures nothing." in text

    # rerun: every run and evaluation is found finished and skipped
    capsys.readouterr()
    assert exp.main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("finished, skipped") == 4
    assert "evaluating" not in out


def test_suites_hold_out_the_skills_and_levels_the_preset_does_not_train() -> None:
    plan = exp.parse_plan(["--preset", "cpu-tiny", "--difficulties", "1", "2"])
    cfg = preset("cpu-tiny")
    primary, held, trained = (plan.suites[i].args[2].split(",") for i in range(3))
    assert primary == ["variants:combination_lock"]
    assert {envs.spec(n).skill for n in held}.isdisjoint(cfg.designer.skills)
    assert {envs.spec(n).skill for n in trained} <= set(cfg.designer.skills)
    assert trained == list(cfg.designer.seeds) == ["combination_lock"]  # what training plays
    assert sorted(held + trained + ["seating"]) == sorted(envs.names("games"))  # seating: nobody plays it
    assert "skills no mode trains" in plan.suites[1].note
    assert "fixed_pool trains on these environments at level 0" in plan.suites[2].note
    played = tyro.cli(EvalArgs, args=list(plan.suites[1].args))  # envs are played as training plays them
    params = options(played).params
    assert (params["demos"], params["action_mode"]) == (cfg.play.demos, cfg.play.action_mode)
    assert params["difficulty"] == 1
    assert played.max_tokens == cfg.play.turn_tokens
    assert "in distribution for procedural" in plan.suites[-1].note  # RG tasks shared with procedural.tasks
    assert [s.label for s in plan.suites] == [
        "lock-variants", "envs-heldout-skills-d1", "envs-trained-skills-d1",
        "envs-heldout-skills-d2", "envs-trained-skills-d2", "rg",
    ]  # fmt: skip
    command = exp.train_command(plan, "fixed_pool", 2)
    assert command[command.index("--sampled-token-budget") + 1] == str(plan.budget)
    assert command[command.index("--name") + 1] == "fixed_pool-s2"
    assert "--eval.every" in command
    for mode in exp.MODES:  # every mode's command parses as spade train options (procedural included)
        cfg_m, _ = parse_config(exp.train_command(plan, mode, 0)[1:])
        want = "selfplay" if mode == "selfplay_untrained" else mode
        assert (cfg_m.mode, cfg_m.seed, cfg_m.sampled_token_budget) == (want, 0, plan.budget)
        assert cfg_m.designer.train == (mode != "selfplay_untrained")  # the control: same designs, no update
    at_trained = exp.parse_plan(["--preset", "cpu-tiny", "--difficulties", "0"])  # the level training plays
    # its own games at the trained level: no suite
    assert [s.label for s in at_trained.suites] == ["lock-variants", "envs-heldout-skills-d0", "rg"]
    # the curve: the primary suite, every variant once (in-training evaluation plays envs as training plays)
    assert plan.intrain_suites == ("envs:variants:combination_lock",)
    assert command[command.index("--eval.limit") + 1] == "None"
    variants = tyro.cli(EvalArgs, args=list(plan.suites[0].args))
    assert options(variants).params["max_turns"] == exp.VARIANT_TURNS  # above every variant's own turn budget


@pytest.mark.parametrize(
    "model",
    [
        preset("cpu-tiny").model,
        ModelConfig(
            backend="openai",
            max_context=8192,
            openai=OpenAIConfig(base_urls=("http://a:8000/v1", "http://b:8000/v1"), token_ids=False),
        ),
    ],
)
def test_model_args_rebuild_the_runs_model_for_spade_eval(model: ModelConfig) -> None:
    parsed = tyro.cli(EvalArgs, args=exp.model_args(model))
    assert parsed.model == model


def test_paired_difference_is_significant_only_when_the_interval_excludes_zero() -> None:
    a = [{f"i{k}": [0.0, 0.0] for k in range(20)}]
    better = [{f"i{k}": [1.0, 1.0 if k % 2 else 0.0] for k in range(20)} for _ in range(3)]
    same = [{f"i{k}": [0.0, 0.0] for k in range(20)}]
    up = stats.paired_difference(a, better)
    assert up.verdict == "better"
    assert up.lo > 0
    assert up.mean == pytest.approx(0.75)
    assert stats.paired_difference(better, a).verdict == "worse"
    assert stats.paired_difference(a, same).verdict == "no significant difference"
    score = stats.mode_score(better)
    assert score.seeds == 3
    assert score.items == 20
    assert score.lo <= score.mean <= score.hi


def test_summary_states_the_measured_sign() -> None:
    base = [{f"i{k}": [0.0 if k else 1.0] for k in range(20)}]  # the starting model wins one item
    strong = [{f"i{k}": [1.0] for k in range(20)}]
    items = {"s": {"start": base, "selfplay": base, "fixed_pool": strong}}
    text = report.summary(items, ["selfplay", "fixed_pool"])
    assert "selfplay is worse than fixed_pool" in text
    assert "selfplay does not differ significantly from start" in text
    cold = [{f"i{k}": [0.0] for k in range(20)}]
    zero = report.summary({"s": {"start": cold, "selfplay": strong}}, ["selfplay"])
    assert zero == "- s: the starting model scores 0 on every item; dropped from the verdicts."
    primary = report.primary_result(
        {"s": {"fixed_pool": base, "selfplay": strong}}, "s", ("fixed_pool", "selfplay")
    )
    assert primary.startswith("**Primary result** (s, selfplay − fixed_pool): +0.950")
    assert primary.endswith("selfplay beats fixed_pool.")
    assert "not available" in report.primary_result(
        {"s": {"selfplay": base}}, "s", ("fixed_pool", "selfplay")
    )
    three = report.summary({"s": {"start": base, "selfplay": strong * 3}}, ["selfplay"])
    assert "selfplay beats start" in three
    assert "3 seeds against 1)" in three


def test_warm_start_comparison_uses_the_items_both_evaluations_share() -> None:
    warm = {"selfplay": [{"i0": [0.0], "i1": [0.0]}] * 3}
    finals = {"selfplay": [{"i0": [1.0], "i1": [1.0], "i2": [0.0], "i3": [0.0]}] * 3}
    rows = report.warm_start_table(finals, warm)
    assert rows[2] == "| selfplay | 3 | 2 | 0.000 | 1.000 | +1.000 [+1.000, +1.000] | better |"
    said = report.warm_start_summary(finals, warm, "lock-variants")
    assert "lock-variants: selfplay beats its own warm start (+1.000" in said


def test_run_state_tells_finished_partial_and_missing_runs(tmp_path: Path) -> None:
    from scripted_run import tiny_config  # noqa: PLC0415 - the tests' scripted run helper
    from spade.run.loop import train  # noqa: PLC0415
    from spade.rundir import RunDir  # noqa: PLC0415

    assert exp.run_state(tmp_path / "none") == "missing"
    cfg = tiny_config(tmp_path, name="r", steps=1)
    run = train(cfg)
    assert exp.run_state(run.root) == "finished"
    RunDir(run.root).save_config(dataclasses.replace(cfg, steps=3))  # as if killed after step 1 of 3
    assert exp.run_state(run.root) == "partial"
    RunDir(run.root).save_config(dataclasses.replace(cfg, steps=3, sampled_token_budget=1))
    assert exp.run_state(run.root) == "finished"  # the budget was spent at step 1


def test_a_pilot_evaluates_the_chosen_suites_and_resumes_keep_runtime_options(tmp_path: Path) -> None:
    argv = ["--suites", "lock-variants", "--out", str(tmp_path), "--", "--model.threads", "1",
            "--trainer.no-compact-heap", "--rollout.plays-per-env", "8"]  # fmt: skip
    plan = exp.parse_plan(argv)
    assert [s.label for s in plan.suites] == ["lock-variants"]
    resume = exp.resume_command(plan, tmp_path / "selfplay-s0")
    assert resume == ["train", "--resume", str(tmp_path / "selfplay-s0"), "--model.threads", "1",
                      "--trainer.no-compact-heap"]  # fmt: skip
    with pytest.raises(SystemExit):
        exp.parse_plan(["--suites", "nonsense"])


def test_a_missing_notes_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        exp.parse_plan(["--notes", str(tmp_path / "missing.md")])
    assert exc.value.code == 2


def test_envs_suite_shows_demonstrations_as_training_does() -> None:
    from spade.config import EvalOptions  # noqa: PLC0415
    from spade.evals.envs import play_config  # noqa: PLC0415

    assert play_config(EvalOptions(params={"demos": 1})).demos == 1
    assert play_config(EvalOptions()).demos == 0


def test_power_projection_narrows_with_seeds_and_episodes_and_is_quoted(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pilot = {m: [{f"i{k}": list(rng.random(2) < p) for k in range(26)} for p in ps]
             for m, ps in (("fixed_pool", (0.1, 0.2)), ("selfplay", (0.15, 0.3)))}  # fmt: skip
    a, b = (pilot[m] for m in ("fixed_pool", "selfplay"))
    few, more_seeds, more_episodes = (power.project(a, b, s, e) for s, e in ((2, 2), (6, 2), (2, 8)))
    assert more_seeds < few
    assert more_episodes < few
    assert power.policy_half_width(a, 8) < power.policy_half_width(a, 1)
    assert power.choose([(3, 2, 0.08), (3, 8, 0.04), (6, 2, 0.045), (6, 8, 0.03)], 0.05) == (6, 2, 0.045)
    assert power.choose([(3, 2, 0.08), (6, 8, 0.07)], 0.05) == (6, 8, 0.07)  # none within: the narrowest
    (tmp_path / "power.json").write_text(json.dumps(
        {"pilot": "runs/pilot", "pilot_seeds": 2, "pilot_episodes": 2, "seeds": 6, "episodes": 2,
         "half_width": 0.045, "target": 0.05, "method": "m"}))  # fmt: skip
    text = "\n".join(report.declared("lock-variants", ("fixed_pool", "selfplay"), tmp_path / "power.json"))
    assert "primary suite is `lock-variants`" in text
    assert "primary comparison is `selfplay − fixed_pool`" in text
    assert "with 6 seeds per mode and 2 episodes per item" in text
    assert "half-width of 0.045 (target ≤ 0.05)" in text
