"""The experiment's durable records: one small JSON file per finished run, committed as it is written.

A record (``<records>/<arm>-s<seed>.json``) holds what the analysis needs and nothing else (no weights):
per mark the mark, the sampled tokens and updates then, and each item's episode returns and wins (mark 0,
the seed's warm start, evaluated by the seed's first run and reused: ``warm_start_from``); the run's
wall time, steps, sampled tokens, regenerations and designer credit; the commit of the code that ran it;
the hash of its config and of the experiment's plan.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from curriculum_auc import Plan

FORMAT = 1


def mark_scores(folder: Path) -> dict[str, Any]:
    """One ``eval/mark_M`` folder as a record entry: the mark, sampled tokens, updates and item episodes."""
    from spade.evals.results import read_results  # noqa: PLC0415 - spade is imported only when used

    stored = read_results(folder)
    items: dict[str, dict[str, list[float]]] = {}
    for per in stored.items.values():
        for item_id, r in per.items():
            episodes = r.detail.get("episodes", [])
            items[item_id] = {
                "return": [float(e.get("return", 0.0)) for e in episodes],
                "win": [1.0 if e.get("won") else 0.0 for e in episodes],
            }
    s = stored.summary
    return {"mark": s["mark"], "sampled_tokens": s["sampled_tokens"], "updates": s["updates"], "items": items}


def config_hash(run_root: Path) -> str:
    """The run's config, runtime options, name and runs folder left out, hashed."""
    from spade.config.options import RUNTIME_OPTIONS, option_values  # noqa: PLC0415
    from spade.rundir import RunDir  # noqa: PLC0415

    cfg = RunDir(run_root).load_config()
    values = {k: v for k, v in option_values(cfg).items() if k not in RUNTIME_OPTIONS}
    values = {k: v for k, v in values.items() if k not in ("name", "runs_dir")}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]


def write_record(plan: Plan, arm: str, seed: int, run_root: Path, wall_s: float) -> Path:
    """Write the record of the finished run in ``run_root``; returns its path.

    Raises:
        RuntimeError: the run did not reach every mark (its step cap ended it before the budget).
    """
    import curriculum_auc as exp  # noqa: PLC0415

    from spade.rundir import RunDir  # noqa: PLC0415

    marks, warm_from = [], exp.run_name(arm, seed)
    for mark in plan.marks:
        folder = run_root / "eval" / f"mark_{mark}"
        if mark == 0 and not (folder / "summary.json").is_file() and 0 not in _run_marks(run_root):
            shared = warm_start_scores(plan, seed)
            if shared is None:
                raise RuntimeError(f"{run_root}: no record of seed {seed} holds the warm start's evaluation; "
                                   "rerun once one does")  # fmt: skip
            warm_from, entry = shared
            marks.append(entry)
            continue
        if not (folder / "summary.json").is_file():
            raise RuntimeError(f"{run_root}: no evaluation at mark {mark} (the run ended before its budget; "
                               "raise --max-steps and resume it)")  # fmt: skip
        marks.append(mark_scores(folder))
    rows = [r for r in RunDir(run_root).read_metrics() if "agent/plays" in r]
    cfg = RunDir(run_root).load_config()
    record = {
        "format": FORMAT,
        "experiment": plan.name,
        "arm": arm,
        "seed": seed,
        "marks": marks,
        "wall_s": round(wall_s, 1),
        "eval_s": round(sum(float(r.get("time/eval_s", 0.0)) for r in RunDir(run_root).read_metrics()), 1),
        "steps": len(rows),
        "sampled_tokens": int(rows[-1]["budget/sampled_tokens"]) if rows else 0,
        "regenerations": exp.ceil_div(len(rows), cfg.designer.regen_interval),
        "designer_credited": int(sum(r.get("designer/credited", 0.0) for r in rows)),
        "designer_samples_kept": int(sum(r.get("designer/samples_kept", 0.0) for r in rows)),
        "agent_plays_per_step": round(sum(r["agent/plays"] for r in rows) / max(len(rows), 1), 2),
        **exp.code_commit(),
        "config_hash": config_hash(run_root),
        "plan_hash": plan.key(),
        "warm_start_from": warm_from,
        "command": ["spade", *exp.train_command(plan, arm, seed, _run_marks(run_root))],
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    plan.records.mkdir(parents=True, exist_ok=True)
    path = plan.records / f"{exp.run_name(arm, seed)}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=None, separators=(",", ":")) + "\n")
    tmp.replace(path)  # a record is whole or absent
    return path


def _run_marks(run_root: Path) -> tuple[int, ...]:
    """The marks the run in ``run_root`` was started with (``eval.at_tokens``)."""
    from spade.rundir import RunDir  # noqa: PLC0415

    return tuple(RunDir(run_root).load_config().eval.at_tokens)


def warm_start_scores(plan: Plan, seed: int) -> tuple[str, dict[str, Any]] | None:
    """(run name, mark-0 entry) of a record of ``seed`` that evaluated the warm start itself, or None.

    Every arm of a seed starts from the same warm start (one cache entry per seed) and is evaluated on the
    same items and evaluation seeds, so the warm start is evaluated once per seed and its scores reused.
    """
    for r in load_records(plan.records):
        own = f"{r['arm']}-s{r['seed']}"
        if r["seed"] == seed and r.get("plan_hash") == plan.key() and r.get("warm_start_from", own) == own:
            return own, r["marks"][0]
    return None


def load_records(folder: Path) -> list[dict[str, Any]]:
    """Every record in ``folder`` (sorted by arm, then seed)."""
    found = []
    for path in sorted(folder.glob("*-s*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("format") == FORMAT:
            found.append(data)
    return sorted(found, key=lambda r: (r["arm"], r["seed"]))


def check_plan_records(plan: Plan) -> None:
    """Refuse (SystemExit) to add runs to records made with another plan."""
    other = [r for r in load_records(plan.records) if r.get("plan_hash") != plan.key()]
    if other:
        names = ", ".join(f"{r['arm']}-s{r['seed']}" for r in other[:4])
        raise SystemExit(f"{plan.records} holds records of another plan ({names}...): run this plan with a new "
                         "--name, or give the options those records were made with (see their 'command')")  # fmt: skip


def commit_record(path: Path, tries: int = 30) -> str:
    """Commit ``path`` alone to the git repository that holds it; retries while another git holds the
    index. Returns a line saying what happened (a failure to commit never stops the experiment)."""
    folder = str(path.parent)
    message = f"experiment record {path.parent.name}/{path.name}: one finished run's held-out scores"
    last = ""
    for _ in range(tries):
        add = subprocess.run(
            ["git", "-C", folder, "add", "--", path.name], capture_output=True, text=True, check=False
        )
        done = add
        if add.returncode == 0:
            done = subprocess.run(["git", "-C", folder, "commit", "-q", "-m", message, "--only", "--", path.name],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            if done.returncode == 0:
                return f"committed {path}"
        last = (done.stderr or done.stdout).strip()
        if "index.lock" not in last:
            break
        time.sleep(2.0)
    return f"could not commit {path}: {last.splitlines()[-1] if last else 'git failed'}"
