"""Small but visible parts of the command line and the docs: version, envs, turn budgets, help, glossary."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import spade
from spade import envs
from spade.config import TrainConfig
from spade.config.options import option_values

ROOT = Path(__file__).parents[1]
GAMES_WITH_LEVEL_BUDGETS = ["countdown", "knapsack", "seating", "sequences", "sokoban", "switchboard"]


def spade_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "spade.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def test_version() -> None:
    out = spade_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"spade {spade.__version__}"


SCRIPTED_TRAIN = [
    "train", "--model.backend", "scripted", "--steps", "2", "--play.action-mode", "boxed",
    "--play.max-turns", "6", "--play.turn-tokens", "256", "--play.context-tokens", "16384",
    "--designer.envs-per-regen", "2", "--designer.max-tokens", "4096", "--corpus.no-enabled",
]  # fmt: skip


@pytest.mark.parametrize("command", ["--help", "--version", "envs", "runs", "runs --json", "train"])
def test_a_closed_stdout_ends_every_command_quietly(tmp_path: Path, command: str) -> None:
    """`spade runs | head -3`: the reader is gone before the command prints; no traceback, status 141."""
    runs = tmp_path / "runs"
    (runs / "r" / "checkpoints").mkdir(parents=True)
    (runs / "r" / "config.json").write_text("{}")  # a run for `spade runs` to list
    args = (
        [*SCRIPTED_TRAIN, "--runs-dir", str(runs), "--name", "t"] if command == "train" else command.split()
    )
    if command.startswith("runs"):
        args.insert(1, str(runs))
    read, write = os.pipe()
    os.close(read)  # every write to the pipe now fails with EPIPE: no race with a reader
    try:
        out = subprocess.run([sys.executable, "-m", "spade.cli", *args], stdout=write, stderr=subprocess.PIPE,
                             text=True, timeout=300, check=False)  # fmt: skip
    finally:
        os.close(write)
    assert out.returncode == 141, out.stderr
    assert "Traceback" not in out.stderr
    assert "Broken pipe" not in out.stderr
    if command == "train":  # the run stopped where it printed; it continues with --resume
        from spade.cli.runs import run_info  # noqa: PLC0415

        assert run_info(runs / "t").status == "stopped"


def test_envs_has_a_header_and_refuses_an_unknown_setting() -> None:
    out = spade_cli("envs")
    assert out.stdout.splitlines()[0].split() == ["NAME", "SETTING", "SKILL", "DESCRIPTION"]
    games = spade_cli("envs", "--setting", "games")
    assert games.returncode == 0
    assert len(games.stdout.splitlines()) == 1 + sum(envs.spec(n).setting == "games" for n in envs.names())
    bad = spade_cli("envs", "--setting", "bogus")
    assert bad.returncode == 2
    assert "unknown setting 'bogus'" in bad.stderr
    assert "games, tool_use" in bad.stderr


@pytest.mark.parametrize("name", GAMES_WITH_LEVEL_BUDGETS)
def test_max_turns_override_is_honoured_by_environments_with_level_budgets(name: str) -> None:
    env = envs.make(name, max_turns=2)
    for seed in range(3):
        env.reset(seed=seed)
        assert env.max_turns == 2
        ended = False
        for _ in range(2):
            _, _, terminated, truncated, _ = env.step("\\boxed{nonsense}")
            ended = terminated or truncated
            if ended:
                break
        assert ended, f"{name} seed {seed}: still going after 2 turns"
    assert envs.make(name).max_turns == type(env).max_turns  # without an override: the class bound


def test_play_max_turns_from_the_command_line() -> None:
    out = spade_cli("play", "sokoban", "--max-turns", "2", "--seed", "1", stdin="up\nup\nup\nup\n")
    assert out.returncode == 0, out.stderr
    assert "Turns left: 2" in out.stdout
    assert "Out of turns (2)." in out.stdout
    assert "--- turn 3 ---" not in out.stdout


def test_every_train_option_is_described_and_preset_resume_are_listed() -> None:
    out = subprocess.run([sys.executable, "-m", "spade.cli", "train", "--help-all"], capture_output=True,
                         text=True, timeout=120, check=False, env={**os.environ, "COLUMNS": "100"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    raw = out.stdout.splitlines()
    lines = [ln.strip("│ ").rstrip() for ln in raw]
    options = [i for i, ln in enumerate(raw) if ln.startswith("│ --")]  # descriptions are indented further
    assert len(options) > 100
    undescribed = [lines[i].split()[0] for i in options if lines[i + 1].startswith(("(default", "--"))]
    assert not undescribed, undescribed
    names = {lines[i].split()[0].rstrip(",") for i in options}
    assert {
        "--preset",
        "--resume",
        "--overwrite",
        "--steps",
        "--trainer.lr",
        "--rollout.plays-per-env",
    } <= names


def test_train_help_shows_the_common_options_and_help_all_every_option() -> None:
    """`spade train --help` was 920 lines (every option); --preset's text left out paper-tool."""
    env = {**os.environ, "COLUMNS": "100"}
    run = [sys.executable, "-m", "spade.cli", "train"]
    short = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=120, check=True, env=env)
    full = subprocess.run(
        [*run, "--help-all"], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    lines = short.stdout.splitlines()
    assert len(lines) <= 100, len(lines)
    assert lines[-1] == "`spade train --help-all` lists every option with its description and default."
    flags = [ln.split()[0].rstrip(",") for ln in lines if ln.startswith("  --")]
    assert flags[:9] == [
        "--preset",
        "--config",
        "--recipe",
        "--steps",
        "--seed",
        "--name",
        "--runs-dir",
        "--resume",
        "--overwrite",
    ]
    assert {"--mode", "--model.backend", "--model.model", "--model.threads", "--eval.every"} <= set(flags)
    assert "paper-tool (the released tool-use recipe" in " ".join(short.stdout.split())
    names = [
        *(f"--{n}" for n in option_values(TrainConfig())),
        "--preset",
        "--config",
        "--recipe",
        "--resume",
        "--format",
    ]
    listed = {word.rstrip(",") for ln in full.stdout.splitlines() for word in ln.strip("│ ").split()[:2]}
    missing = [n for n in names if n.replace("_", "-") not in listed]
    assert not missing, missing
    assert len(names) > 200


def test_readme_stands_on_its_own() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "../shared" not in readme
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    pages = ["architecture", "running", "metrics", "report", "paper-recipe", "scaling", "ecosystem", "eval"]
    assert {f"docs/{page}.md" for page in pages} <= set(local)
    for link in local:
        assert (ROOT / link).exists(), link
    assert "tensorboard" in readme.lower()
    for doc in (ROOT / "docs").glob("*.md"):
        assert "../shared" not in doc.read_text(), doc


def test_check_help_lists_every_finding_code_with_its_docstring() -> None:
    from spade.checker.findings import DEFAULT_SEVERITY, FindingCode, code_docs  # noqa: PLC0415

    docs = code_docs()
    assert all(docs.values()), [c for c, d in docs.items() if not d]
    assert docs[FindingCode.TIMEOUT].startswith("A call used up its CPU-time limit")
    out = spade_cli("check", "--help")
    assert out.returncode == 0, out.stderr
    rows = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln.startswith("  ") and ln.split()}
    for code in FindingCode:
        assert code.value in rows, f"{code.value} missing from `spade check --help`"
        assert DEFAULT_SEVERITY[code] in rows[code.value]
        assert docs[code].replace("``", "`")[:40] in rows[code.value]
    named = set(re.findall(r"`([A-Z][A-Z_]+)`", (ROOT / "docs" / "metrics.md").read_text()))
    assert named <= {c.value for c in FindingCode}, "docs/metrics.md names codes that do not exist"


def test_metrics_glossary_covers_every_logged_metric(tmp_path: Path) -> None:
    from spade.config import (  # noqa: PLC0415
        CheckerConfig,
        DesignerConfig,
        ModelConfig,
        PlayConfig,
        RewardConfig,
        RolloutConfig,
        ScriptedConfig,
        TrainConfig,
    )  # fmt: skip
    from spade.run.loop import train  # noqa: PLC0415

    cfg = TrainConfig(
        name="g", runs_dir=tmp_path, steps=2,
        model=ModelConfig(backend="scripted", scripted=ScriptedConfig(behaviour="mixed")),
        play=PlayConfig(action_mode="boxed", max_turns=6, turn_tokens=256, context_tokens=16384),
        designer=DesignerConfig(envs_per_regen=4, regen_interval=2, skills_per_regen=2, max_tokens=4096),
        rollout=RolloutConfig(plays_per_env=2, hint_plays_per_env=2), reward=RewardConfig(variant="regret"),
        checker=CheckerConfig(probe_episodes=2, exploit_episodes=2),
    )  # fmt: skip
    rows = train(cfg).read_metrics()
    glossary = (ROOT / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`([a-z_]+(?:/[A-Za-z_<>]+)*)`", glossary))
    families = {d.split("<")[0] for d in documented if "<" in d}
    missing = sorted(
        {key for row in rows for key in row if key not in documented and not key.startswith(tuple(families))}
    )
    assert not missing, f"add these to docs/metrics.md: {missing}"


# -- the README's quick tour, run as written ------------------------------------------------------------------

SHORT_STEPS = 3
"""The tour's runs train at most this many steps here (the scripted backend plays the model)."""


def readme_tour() -> list[list[str]]:
    """The commands of README's "Quick tour" block, in order, as argument lists (comments dropped)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick tour", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def tour_argv(words: list[str], k: int) -> list[str]:
    """One tour command as this test runs it: the scripted backend where a model would be used, short runs,
    repository paths made absolute (the test runs in a temporary folder, so ``runs/`` lands there)."""
    args = [str(ROOT / w) if "/" in w and (ROOT / w).exists() else w for w in words[1:]]
    command = args[0]
    if command == "train" and "--help" not in args:
        steps = int(args[args.index("--steps") + 1]) if "--steps" in args else SHORT_STEPS
        args = [a for i, a in enumerate(args) if a != "--steps" and (i == 0 or args[i - 1] != "--steps")]
        args += ["--steps", str(min(steps, SHORT_STEPS))]
        if "--resume" not in args:
            args += ["--model.backend", "scripted"]
    if command == "eval":
        if "--run" not in args and "--solver" not in args:
            args += ["--model.backend", "scripted"]
        args += ["--limit", "1", "--out", f"eval-results/{k}"]
    return [sys.executable, "-m", "spade.cli", *args]


def test_readme_tour_commands_run_in_the_order_shown(tmp_path: Path) -> None:
    tour = readme_tour()
    assert [w[0] for w in tour].count(".venv/bin/spade") == len(tour) - 1
    assert tour[-1][0] == ".venv/bin/tensorboard"  # a server that runs until stopped: not run here
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    for k, words in enumerate(tour[:-1]):
        argv = tour_argv(words, k)
        out = subprocess.run(argv, cwd=tmp_path, input="/quit\n", capture_output=True, text=True, timeout=600,
                             check=False, env=env)  # fmt: skip
        assert out.returncode == 0, (
            f"{shlex.join(words)} (run as {shlex.join(argv[3:])}):\n{out.stderr[-3000:]}"
        )
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")) == [
        "cpu-tiny",
        "cpu-tiny-fixed_pool",
        "cpu-tiny-procedural",
    ]
