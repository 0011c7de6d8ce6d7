"""SPADE against its baselines at an equal sampled-token budget, evaluated on held-out suites.

One command trains, from the same starting model, every mode in ``--modes`` (``selfplay`` = SPADE,
``selfplay_untrained`` = SPADE whose designer is never updated (the control that isolates the designer's
learning from the variety of designs), ``fixed_pool`` = the agent alone on the seed environments training
starts from, ``procedural`` = the agent alone on Reasoning-Gym tasks with an adaptive difficulty
controller) with every seed in ``--seeds``;
evaluates the starting model and every final policy with ``spade eval`` on held-out suites; compares them
with paired bootstrap intervals; and writes ``runs/experiment/results.md`` (``--results``) with curve images
(``--images``).

**Budget.** Each run ends after the step at which the tokens the model has sampled in it reach
``--budget`` (``spade train --sampled-token-budget``): agent replies of both arms, designs and hints, i.e.
every completion token. The baselines have no designer, so this is the fair currency: SPADE pays for its
designs and hints out of the same budget the baselines spend on agent plays (counting agent tokens only
would hand SPADE its designer for free). ``--max-steps`` is only a cap; the budget should end every run.

**Held-out suites** (explicit and configurable; the table names each): the primary suite
``lock-variants`` (``PRIMARY_SUITE``, with the primary comparison ``PRIMARY``, declared here before any run):
the trained game, combination_lock, at 26 sizes no mode trains on (:mod:`spade.envs.variants`);
``envs-heldout-skills``: the seed environments whose skill the preset's ``designer.skills`` does not train,
at the difficulty levels ``--difficulties`` (default: the level trained, ``play.difficulty``, and one above
it; at 135M every policy scores 0 on level 1 of every game, so level 0 of the untrained skills is where
transfer can show); ``envs-trained-skills``: the seed environments training plays (``designer.seeds``, else
every seed of the trained skills), at those levels but the trained one; ``rg``: Reasoning-Gym tasks
``--rg-tasks`` (arithmetic and ordering, related to mathematical_reasoning/optimization/pattern_recognition;
``--rg-preset easy`` with ``--fewshot 1``: where the embedded model was measured at 0.09-0.19 on the
arithmetic ones). Environments are played as training plays them (action format, demonstrations, turn and
token budgets of ``play.*``). The default fixed pool is those seed environments, so for ``fixed_pool`` the
trained-skill suite is held out in level only; ``procedural`` trains on ``procedural.tasks``, which share the arithmetic
tasks with ``rg`` (other seeds). The report's suite table says this for each suite.

**Curves**: designer validity, win rate with and without the hint, regret, and the primary suite's score
against sampled tokens (in-training evaluation every ``--eval-every`` steps, every variant once).

**Statistics** (``experiment_stats``): a mode's score is the mean over seeds of its mean item score; 95%
intervals bootstrap items (paired across modes), seeds and episodes. Verdicts come from the intervals, on
suites the starting model scores on. ``experiment_power`` projects the primary interval from a pilot.

**Resumable.** Runs go to ``<out>/<mode>-s<seed>``; a finished run is skipped, a killed one resumed
(``spade train --resume``); an evaluation whose results folder exists is skipped.

Reproduce (embedded model, CPU)::

    nice -n 19 python experiments/selfplay_vs_baselines.py --preset cpu-tiny

Paper scale on GPUs: change only the preset, the backend and the budget, e.g.::

    python experiments/selfplay_vs_baselines.py --preset paper --budget N -- \\
        --model.backend vllm --model.model /models/Qwen3-8B
    python experiments/selfplay_vs_baselines.py --preset paper --budget N -- \\
        --model.backend openai --model.openai.base-urls http://127.0.0.1:8000/v1 --model.model /models/Qwen3-8B

For N, take ``budget/sampled_tokens`` from a SPADE run's ``metrics.jsonl`` at the step count the comparison
should match (a run's saved config keeps its budget: a new budget needs a new ``--out``). Options after
``--`` go to every ``spade train`` (and the ``--model.*`` ones, through the runs' saved config, to the
evaluation of the starting model).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODES = ("selfplay", "selfplay_untrained", "fixed_pool", "procedural")
MODE_ARGS = {"selfplay_untrained": ("--mode", "selfplay", "--designer.no-train")}
"""``spade train`` options of the modes that are not ``--mode`` values: ``selfplay_untrained`` is SPADE with the
designer never updated (same edit space and number of designs): what the designer's learning adds."""
START = "start"
PRIMARY_SUITE = "lock-variants"
PRIMARY = ("fixed_pool", "selfplay")
"""The pre-declared analysis: ``selfplay − fixed_pool`` on the trained game's held-out variants."""
PRIMARY_TASKS = "variants:combination_lock"
VARIANT_TURNS = 25
"""Agent turns on the variants: above every variant's own budget (at most 20), which ends the game first."""
SPADE = (sys.executable, "-c", "import sys\nfrom spade.cli.app import main\nsys.exit(main())")
"""``spade`` as this interpreter imports it (no console script needed)."""


@dataclass(frozen=True, slots=True)
class Suite:
    """One held-out evaluation: a label (results-table row) and the ``spade eval`` arguments."""

    label: str
    args: tuple[str, ...]
    note: str = ""
    """What the suite holds out, and from which mode it does not (shown in the report)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything the experiment does, resolved from the command line."""

    preset: str
    modes: tuple[str, ...]
    seeds: tuple[int, ...]
    budget: int
    max_steps: int
    out: Path
    results: Path
    images: Path
    train_args: tuple[str, ...]
    suites: tuple[Suite, ...]
    eval_every: int
    intrain_suites: tuple[str, ...]
    eval_args: tuple[str, ...]
    command: str
    notes: Path | None = None
    """A hand-written interpretation (markdown) included verbatim, so regenerating keeps it."""


def run_dir(plan: Plan, mode: str, seed: int) -> Path:
    """Where one training run lives."""
    return plan.out / f"{mode}-s{seed}"


# -- plan ----------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="see docs/eval.md")
    p.add_argument("--preset", default="cpu-tiny", help="spade train preset (cpu-tiny, paper, ...)")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--budget", type=int, default=12_000, help="sampled tokens per run (all completions)")
    p.add_argument("--max-steps", type=int, default=0, help="step cap per run (0: 10x the preset's steps)")
    p.add_argument("--out", type=Path, default=Path("runs/experiment"))
    p.add_argument("--results", type=Path, default=Path("runs/experiment/results.md"))
    p.add_argument("--images", type=Path, default=None, help="chart folder (default: <results dir>/results)")
    p.add_argument("--difficulties", nargs="+", type=int, default=None, help="held-out env levels")
    p.add_argument("--heldout-envs", nargs="*", default=None, help="env names (default: untrained skills)")
    p.add_argument("--rg-tasks", default="basic_arithmetic,chain_sum,simple_equations,number_sorting")
    p.add_argument("--rg-preset", default="easy")
    p.add_argument("--fewshot", type=int, default=1)
    p.add_argument("--eval-episodes", type=int, default=4)
    p.add_argument("--eval-limit", type=int, default=8, help="items per Reasoning-Gym task")
    p.add_argument("--eval-temperature", type=float, default=0.6)
    p.add_argument("--eval-every", type=int, default=None, help="in-training RG evaluation every N steps (0: off; "
                   "default 4, with --quick 0)")  # fmt: skip
    p.add_argument(
        "--notes", type=Path, default=None, help="markdown file kept as the report's Interpretation"
    )
    p.add_argument("--suites", nargs="+", default=None, help="evaluate only these suite labels (a pilot: "
                   f"{PRIMARY_SUITE}); default every suite")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="small budget, one episode, few items: a smoke run")
    p.add_argument("train_args", nargs="*", help="after --: options for every spade train")
    return p


def parse_plan(argv: Sequence[str]) -> Plan:
    """The plan a command line asks for (raises SystemExit on bad options, as argparse does)."""
    parser = _parser()
    a = parser.parse_args(list(argv))
    if a.notes is not None and not a.notes.is_file():  # checked before hours of training, not after
        parser.error(f"--notes {a.notes} is not a file; write the interpretation there or drop --notes")
    from spade.cli.train import parse_config  # noqa: PLC0415 - spade is imported only when used

    cfg, _ = parse_config(["--preset", a.preset, *a.train_args])
    if a.quick:
        a.budget, a.eval_episodes, a.eval_limit = min(a.budget, 4000), 1, 2
    if a.eval_every is None:
        a.eval_every = 0 if a.quick else 4
    levels = a.difficulties or default_levels(cfg.play.difficulty)
    suites = heldout_suites(cfg, levels, a.heldout_envs, a)
    if a.suites:
        unknown = sorted(set(a.suites) - {s.label for s in suites})
        if unknown:
            parser.error(
                f"--suites {' '.join(unknown)}: not a suite of this plan ({', '.join(s.label for s in suites)})"
            )
        suites = [s for s in suites if s.label in a.suites]
    common = ("--episodes", str(a.eval_episodes), "--temperature", str(a.eval_temperature), "--seed", "0")
    # in-training evaluation (the curve) runs the primary suite, played as training plays (spade.evals.intrain)
    intrain = (f"envs:{PRIMARY_TASKS}",)
    return Plan(
        preset=a.preset,
        modes=tuple(a.modes),
        seeds=tuple(a.seeds),
        budget=a.budget,
        max_steps=a.max_steps or 10 * cfg.steps,
        out=a.out,
        results=a.results,
        images=a.images or a.results.parent / "results",
        train_args=tuple(a.train_args),
        suites=tuple(suites),
        eval_every=a.eval_every,
        intrain_suites=intrain,
        eval_args=common,
        command=" ".join(["python", "experiments/selfplay_vs_baselines.py", *argv]),
        notes=a.notes,
    )


def default_levels(trained: int | None) -> list[int]:
    """The trained level (for the untrained skills: held out in skill) and a level training does not play."""
    return [heldout_level(trained)] if trained is None else [trained, heldout_level(trained)]


def heldout_level(trained: int | None) -> int:
    """A difficulty level training does not play: one above the trained level (None: each environment's
    default, level 1 throughout the seed library), or one below the top level (2 of 0..2)."""
    level = 1 if trained is None else trained
    return level + 1 if level < 2 else level - 1


def heldout_suites(cfg: Any, levels: Sequence[int], names: Sequence[str] | None, a: Any) -> list[Suite]:
    """The environment suites (held-out skills / trained skills, at untrained levels) and the RG suite."""
    from spade import envs  # noqa: PLC0415

    trained = set(cfg.designer.skills)
    library = envs.names(cfg.designer.setting)
    held = list(names) if names is not None else [n for n in library if envs.spec(n).skill not in trained]
    # the games training plays: designer.seeds, else every seed of the trained skills
    rest = [n for n in library if n not in held and envs.spec(n).skill in trained]
    rest = [n for n in rest if n in cfg.designer.seeds] if cfg.designer.seeds else rest
    played = (
        "each environment's default level" if cfg.play.difficulty is None else f"level {cfg.play.difficulty}"
    )
    # the default fixed pool is those games (spade.modes.base.pool_sources)
    pool = f"fixed_pool trains on these environments at {played}: held out in level only"
    out = [_primary_suite(cfg)]
    for level in levels:
        # at the trained level the trained skills' games are what training plays: not held out, no suite
        groups = [("envs-heldout-skills", held, "skills no mode trains (nor the default pool)")]
        if level != cfg.play.difficulty:
            groups.append(("envs-trained-skills", rest, f"skills selfplay trains; {pool}"))
        for label, group, what in groups:
            if group:
                envs_args = (
                    "envs",
                    "--tasks",
                    ",".join(group),
                    "--param",
                    f"difficulty={level}",
                    *_as_trained(cfg),
                )
                out.append(Suite(f"{label}-d{level}", envs_args, f"level {level}; {what}"))
    if a.rg_tasks:
        args = ("reasoning_gym", "--tasks", a.rg_tasks, "--preset", a.rg_preset, "--fewshot", str(a.fewshot),
                "--limit", str(a.eval_limit), "--max-tokens", str(cfg.eval.max_tokens))  # fmt: skip
        shared = [t for t in a.rg_tasks.split(",") if t in cfg.procedural.tasks]
        note = "no mode trains on these tasks"
        if shared:
            note = f"procedural trains on {', '.join(shared)} (other seeds): in distribution for procedural"
        out.append(Suite("rg", args, note))
    return out


def _primary_suite(cfg: Any) -> Suite:
    """The trained game's held-out variants (:mod:`spade.envs.variants`), played as training plays."""
    args = ("envs", "--tasks", PRIMARY_TASKS, "--param", *_as_trained(cfg, max_turns=VARIANT_TURNS))
    note = ("primary: combination_lock at 26 sizes (1-4 dials, numbers up to 6-24) no mode trains on; every "
            "mode trains on the lock's level 0 (3 dials of 12), selfplay also on edits of it")  # fmt: skip
    return Suite(PRIMARY_SUITE, args, note)


def _as_trained(cfg: Any, max_turns: int | None = None) -> tuple[str, ...]:
    """``spade eval envs`` values (after ``--param difficulty=K``) that play as training plays: action format,
    demonstrations, turn and token budgets. ``--param`` takes all its values at once (a repeat replaces)."""
    p = cfg.play
    params = {"action_mode": p.action_mode, "on_length": p.on_length, "max_turns": max_turns or p.max_turns,
              "demos": p.demos, "context_tokens": p.context_tokens}  # fmt: skip
    return (*(f"{k}={v}" for k, v in params.items()), "--max-tokens", str(p.turn_tokens))


# -- training ------------------------------------------------------------------------------------------

Log = Callable[[str], None]


def train_command(plan: Plan, mode: str, seed: int) -> list[str]:
    """The ``spade train`` arguments of one run (a fresh start)."""
    where = run_dir(plan, mode, seed)
    mode_args = list(MODE_ARGS.get(mode, ("--mode", mode)))
    args = ["train", "--preset", plan.preset, *mode_args, "--seed", str(seed), "--name", where.name,
            "--runs-dir", str(where.parent), "--steps", str(plan.max_steps),
            "--sampled-token-budget", str(plan.budget)]  # fmt: skip
    if plan.eval_every > 0 and plan.intrain_suites:
        args += ["--eval.every", str(plan.eval_every), "--eval.suites", *plan.intrain_suites]
        args += _intrain_options(plan)
    else:  # the preset's own in-training evaluation is off too
        args += ["--eval.every", "0"]
    return [*args, *plan.train_args]


def _intrain_options(plan: Plan) -> list[str]:
    """In-training evaluation options: every variant of the primary suite, one episode each, at the final
    evaluation's temperature: a curve at a fraction of the final cost."""
    temperature = plan.eval_args[plan.eval_args.index("--temperature") + 1]
    return ["--eval.temperature", temperature, "--eval.limit", "None", "--eval.episodes", "1"]


def resume_command(plan: Plan, where: Path) -> list[str]:
    """``spade train --resume``, with the runtime options among the options after ``--`` (``--model.threads
    1``: a resumed run uses the machine as asked; options that change results are the run's own)."""
    from spade.config.options import RUNTIME_OPTIONS  # noqa: PLC0415

    names = [name.replace("_", "-").rpartition(".") for name in RUNTIME_OPTIONS]
    flags = {f"--{head}.{pre}{leaf}" for head, _, leaf in names for pre in ("", "no-")}
    kept, args = [], list(plan.train_args)
    for i, arg in enumerate(args):
        if arg in flags:
            value = args[i + 1 : i + 2] if i + 1 < len(args) and not args[i + 1].startswith("--") else []
            kept += [arg, *value]
    return ["train", "--resume", str(where), *kept]


def run_state(where: Path) -> str:
    """'missing' (no run), 'finished' (budget or steps spent, final evaluation written) or 'partial'."""
    from spade.rundir import RunDir, RunStateError  # noqa: PLC0415

    run = RunDir(where)
    if not run.config_path.is_file():
        return "missing"
    try:
        cfg = run.load_config()
        point = run.resume_point()
    except RunStateError:
        return "partial"
    if point.checkpoint is None:
        return "partial"
    tokens = int(run.read_state(point.checkpoint).get("sampled_tokens", 0))
    spent = point.step >= cfg.steps or 0 < cfg.sampled_token_budget <= tokens
    evaluated = cfg.eval.every <= 0 or (where / "eval" / f"step_{point.step}" / "summary.json").is_file()
    return "finished" if spent and evaluated else "partial"


def train_all(plan: Plan, log: Log) -> dict[str, float]:
    """Train (or resume, or skip) every run; returns the wall seconds each run took in this invocation."""
    times: dict[str, float] = {}
    for mode in plan.modes:
        for seed in plan.seeds:
            where = run_dir(plan, mode, seed)
            state = run_state(where)
            if state == "finished":
                log(f"{where}: finished, skipped")
                continue
            args = resume_command(plan, where) if state == "partial" else train_command(plan, mode, seed)
            log(f"{where}: {'resuming' if state == 'partial' else 'training'}: spade {' '.join(args)}")
            started = time.perf_counter()
            _spade(args, where.parent / f"{where.name}.log")
            times[where.name] = time.perf_counter() - started
    return times


def _spade(args: Sequence[str], log_file: Path) -> None:
    """Run one ``spade`` command, its output appended to ``log_file``; a failure stops the experiment."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("a") as sink:
        done = subprocess.run([*SPADE, *args], stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"spade {' '.join(args)} failed with status {done.returncode}; see {log_file}")


# -- evaluation ----------------------------------------------------------------------------------------


def model_args(model: Any) -> list[str]:
    """``--model.*`` options that rebuild ``model`` (a ModelConfig): every field that differs from the default."""
    from spade.config import ModelConfig, to_dict  # noqa: PLC0415

    return _flatten("--model", to_dict(model), to_dict(ModelConfig()))


def _flatten(prefix: str, value: dict[str, Any], default: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, v in value.items():
        flag = f"{prefix}.{key.replace('_', '-')}"
        if v == default.get(key):
            continue
        if isinstance(v, dict):
            out += _flatten(flag, v, default.get(key) or {})
        elif isinstance(v, bool):
            out.append(flag if v else f"{prefix}.no-{key.replace('_', '-')}")
        elif isinstance(v, list | tuple):
            out += [flag, *(str(x) for x in v)]
        else:
            out += [flag, str(v)]
    return out


def policies(plan: Plan) -> dict[str, list[str]]:
    """Label -> the ``spade eval`` policy options: the starting model, then ``<mode>-s<seed>`` runs (a run
    that never updated the model, e.g. every group constant, is its starting model)."""
    from spade.rundir import RunDir  # noqa: PLC0415

    runs = {run_dir(plan, m, s).name: run_dir(plan, m, s) for m in plan.modes for s in plan.seeds}
    start = model_args(RunDir(next(iter(runs.values()))).load_config().model)
    out = {START: start}
    # a run none of whose steps updated the model has no exported policy: its final policy is the start
    out.update({name: ["--run", str(p)] if (p / "policy").exists() else start for name, p in runs.items()})
    return out


def eval_all(plan: Plan, log: Log) -> float:
    """Evaluate every policy on every suite (existing results are kept); returns the wall seconds."""
    started = time.perf_counter()
    for label, policy in policies(plan).items():
        for suite in plan.suites:
            folder = plan.out / "eval" / label / suite.label
            if (folder / "summary.json").is_file():
                continue
            log(f"evaluating {label} on {suite.label}")
            args = ["eval", *suite.args, *plan.eval_args, *policy, "--out", str(folder), "--overwrite"]
            _spade(args, plan.out / "eval" / f"{label}.log")
    return time.perf_counter() - started


def load_items(plan: Plan) -> dict[str, dict[str, list[dict[str, list[float]]]]]:
    """suite label -> group (``start`` or a mode) -> one ``item id -> episode scores`` map per seed."""
    out: dict[str, dict[str, list[dict[str, list[float]]]]] = {}
    groups = {START: [START]} | {m: [run_dir(plan, m, s).name for s in plan.seeds] for m in plan.modes}
    for suite in plan.suites:
        for group, labels in groups.items():
            for label in labels:
                items = _item_scores(plan.out / "eval" / label / suite.label)
                out.setdefault(suite.label, {}).setdefault(group, []).append(items)
    return out


def load_warm_starts(plan: Plan) -> dict[str, list[dict[str, list[float]]]]:
    """mode -> per seed, the item scores of its run's in-training evaluation at step 0: the policy after the
    warm start and before any RL update, on the primary suite's items (no
    entry for a mode whose runs have no such evaluation, e.g. with ``--eval-every 0``)."""
    out: dict[str, list[dict[str, list[float]]]] = {}
    for mode in plan.modes:
        folders = [run_dir(plan, mode, s) / "eval" / "step_0" for s in plan.seeds]
        if not all((f / "summary.json").is_file() for f in folders):
            continue
        out[mode] = [_item_scores(f) for f in folders]
    return out


def _item_scores(folder: Path) -> dict[str, list[float]]:
    """``item id -> episode scores`` of one evaluation results folder."""
    from spade.evals.results import read_results  # noqa: PLC0415

    stored = read_results(folder)
    return {k: list(r.scores) for per in stored.items.values() for k, r in per.items()}


# -- main ----------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Train, evaluate, compare, write the report; returns the exit status."""
    import experiment_report  # noqa: PLC0415 - a sibling module of this script

    argv = list(sys.argv[1:] if argv is None else argv)
    plan = parse_plan(argv)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    started = time.perf_counter()
    train_times = train_all(plan, log)
    eval_s = eval_all(plan, log)
    report = experiment_report.build(
        plan,
        load_items(plan),
        train_times,
        eval_s,
        time.perf_counter() - started,
        warm=load_warm_starts(plan),
    )
    experiment_report.write(plan, report)
    log(f"wrote {plan.results} and {plan.images}/")
    print(report.summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
