"""Supervised warm start: before RL, the agent imitates the scripted solutions of seed games, and the
designer valid line edits of them.

A 135M model rarely wins a multi-turn game by RL alone: without wins every GRPO group is constant and
there is nothing to learn from. Imitating a few dozen solved episodes first gives it the action format and
a strategy to start from, for every mode alike (self-play, the fixed pool and the procedural baseline
start from the same warmed-up policy, so comparisons stay fair).

Episodes are the seed games' own ``solution()`` scripts played in the sandbox at ``play.difficulty``, on
demonstration seeds (:data:`spade.play.demos.DEMO_SEED_BASE` and up), which no played episode uses. Each is
rendered exactly as the agent sees a game (the ``play.agent_prompt`` opening, observations as user turns,
``\\boxed{action}`` replies closed by the end-of-turn token) and trained with the policy-gradient loss at
advantage 1 on the reply tokens only: on the trainer's single on-policy pass that is the gradient of the
replies' log-likelihood, i.e. supervised fine-tuning. Scripts that do not win within ``play.max_turns`` are skipped
and counted.

Designer examples (``sft.designs``) are the designer's own ``lines`` prompt for a seed game of
``designer.skills`` (built as :func:`spade.design.designer.design` builds it, worked exchange included), answered
with another mechanical one-number edit of the shown lines (:func:`spade.design.edits.mechanical_edit`) that changes
the game played at ``play.difficulty`` and that the checker accepts; other edits are skipped and counted. A
135M designer otherwise names lines at random: outside the constant table, in a row of a level nobody
plays, or with text that does not parse.

Hint examples (``sft.hints``) are the hint prompt for a seed game of ``designer.skills``, from its code alone
and cut to fit as :func:`spade.design.hints.write_hints` cuts it, answered after ``designer.hint_prefix`` with the
game's strategy note (:attr:`spade.envs.EnvSpec.strategy`). Asked for a hint, a 135M model otherwise writes
code, which the hint filter refuses: no hinted play is made and no regret measured.

A warm start depends only on the model (backend, model, dtype, device, context: :data:`_MODEL_KEYED`), the
``sft``, ``play``, ``trainer``, ``designer`` and ``checker`` settings (runtime options aside), the seed and
the sources of the games it imitates, so its result is kept under ``<runs_dir>/.sft-cache/<key>`` and reused
by any run that would repeat it (the modes of an experiment that share a seed, a run started over). An entry
that cannot be used is done again, not fatal (:func:`cached_warm_start`).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spade import envs, stopping
from spade.backends.template import TokenStream, TurnTemplate
from spade.checker import CheckReport, FindingCode, acheck_env
from spade.config import TrainConfig
from spade.config.options import result_settings
from spade.config.types import AgentPrompt
from spade.design.designer import sample_tokens
from spade.design.edits import apply_line_edits, build_line_edit_messages, excerpt_window, mechanical_edit
from spade.design.hints import HintRequest, hint_prompt
from spade.design.prompts import DesignRequest, Exemplar
from spade.errors import SpadeError
from spade.evals.progress import duration
from spade.play.demos import Demo, demo_seed, record_demo, same_instance_demos
from spade.play.prompts import HINT_TEMPLATE, opening_messages
from spade.play.rollout import reset_options
from spade.sandbox import EnvRunner
from spade.types import Completion, Message, Trainer, TrainSample

Progress = Callable[[str], None]
_EDIT_TRIES = 16
"""Candidate edits drawn per designer example wanted, at most (most change a level that is not played)."""


def env_names(cfg: TrainConfig) -> list[str]:
    """The seed games the warm start imitates: ``sft.envs``, else the seeds of ``designer.skills``."""
    return list(cfg.sft.envs) if cfg.sft.envs else designer_games(cfg)


async def scripted_episodes(cfg: TrainConfig, runner: EnvRunner) -> tuple[list[tuple[str, Demo]], int]:
    """``sft.episodes`` solved episodes spread over :func:`env_names`, and how many scripts did not win."""
    names = env_names(cfg)
    options = reset_options(cfg.play, None)
    episodes: list[tuple[str, Demo]] = []
    failed = 0
    for k in range(cfg.sft.episodes):
        name = names[k % len(names)]
        seed = demo_seed(f"sft/{name}", [cfg.seed], k)
        demo = await record_demo(
            runner, envs.spec(name).source(), seed=seed, options=options, max_actions=cfg.play.max_turns
        )
        if demo is None:
            failed += 1
        else:
            episodes.append((name, demo))
    return episodes, failed


def designer_games(cfg: TrainConfig) -> list[str]:
    """The seed games whose line edits the designer imitates: those of ``designer.skills``, all of them even
    where ``designer.seeds`` starts the archive from fewer (edits of one game only teach a 135M designer to
    repeat one edit)."""
    skills = set(cfg.designer.skills)
    return [n for n in envs.names("games") if not skills or envs.spec(n).skill in skills]


async def design_edits(cfg: TrainConfig, runner: EnvRunner) -> tuple[list[tuple[list[Message], str]], int]:
    """``sft.designs`` (designer prompt, valid line edit) pairs, and how many candidate edits were refused."""
    d = cfg.designer
    names = designer_games(cfg)
    rng = random.Random(demo_seed("sft/designs", [cfg.seed], 0))
    pairs: list[tuple[list[Message], str]] = []
    refused = 0
    for k in range(cfg.sft.designs * _EDIT_TRIES):
        if len(pairs) == cfg.sft.designs:
            break
        spec = envs.spec(names[len(pairs) % len(names)])
        source = spec.source()
        parent = Exemplar(spec.name, source, spec.skill, None, None)
        request = DesignRequest(
            spec.skill, "edit", "", difficulty=d.difficulty, parent=parent, edit_format="lines"
        )
        # the loop numbers a regeneration's requests 0, 1, ...: its worked edits are these variants
        messages = build_line_edit_messages(request, example_chars=d.example_code_chars, variant=len(pairs))
        edit = mechanical_edit(source, excerpt_window(source, d.example_code_chars), rng.randrange(1 << 16))
        reply = "" if edit is None else f"{edit[0]}: {edit[1]}"
        worked_reply = messages[2]["content"]
        code = None if reply == worked_reply else apply_line_edits(source, reply, d.example_code_chars)[0]
        seed = demo_seed("sft/check", [cfg.seed], k)
        if (
            code is None
            or not await _changes_the_played_game(cfg, runner, source, code, seed)
            or not _exemplary(await acheck_env(code, runner, cfg.checker, seed=seed, win=cfg.play))
        ):
            refused += 1
            continue
        pairs.append((messages, reply))
    return pairs, refused


def _exemplary(report: CheckReport) -> bool:
    """Accepted, and its scripted solution won on every seed tried: an edit whose level the best play only
    sometimes wins (``SOLUTION_PARTIAL``) passes the checker but is no example to learn from."""
    return report.ok and FindingCode.SOLUTION_PARTIAL not in report.codes


async def _changes_the_played_game(
    cfg: TrainConfig, runner: EnvRunner, parent: str, child: str, seed: int
) -> bool:
    """Whether the scripted solution of one instance at ``play.difficulty`` plays out differently (and still
    wins): an edit of a level the agent does not play leaves the game it plays as it was."""
    options, turns = reset_options(cfg.play, None), cfg.play.max_turns
    before, after = await same_instance_demos(
        runner, parent, child, seed=seed, options=options, max_actions=turns
    )
    return after is not None and after != before


def hint_games(cfg: TrainConfig) -> list[str]:
    """The seed games whose hint requests the warm start answers: :func:`designer_games` with a strategy
    note."""
    return [n for n in designer_games(cfg) if envs.spec(n).strategy]


def hint_samples(cfg: TrainConfig, template: TurnTemplate) -> list[TrainSample]:
    """``sft.hints`` hint requests answered with the strategy notes of :func:`hint_games`, in turn."""
    d = cfg.designer
    names = hint_games(cfg)
    samples = []
    for k in range(cfg.sft.hints if names else 0):
        spec = envs.spec(names[k % len(names)])
        request = HintRequest(spec.name, spec.source(), None, d.setting)
        _, prompt = hint_prompt(
            template,
            request,
            max_words=d.hint_max_words,
            prefix=d.hint_prefix,
            max_prompt_tokens=cfg.model.max_context - d.hint_max_tokens,
        )
        reply = f" {spec.strategy}" if d.hint_prefix else spec.strategy
        samples.append(design_sample(template, prompt, reply))
    return samples


def design_sample(template: TurnTemplate, prompt: list[int], reply: str) -> TrainSample:
    """A designer prompt's ids and its reply as the designer would have sampled it: the reply carries the
    loss."""
    end = [] if template.end_of_turn_id is None else [template.end_of_turn_id]
    ids = (*template.encode(reply), *end)
    tokens, mask, _ = sample_tokens(prompt, Completion(reply, ids, (0.0,) * len(ids), "stop"))
    return TrainSample(tokens, mask, (0.0,) * len(tokens), advantage=1.0, role="designer")


def episode_sample(
    template: TurnTemplate, demo: Demo, hint: str = "", prompt: AgentPrompt = "compact"
) -> TrainSample:
    """One solved episode as the agent would have played it under ``prompt`` (``play.agent_prompt``; with
    ``hint``: as a hinted play shows it): replies carry the loss (advantage 1)."""
    first = HINT_TEMPLATE.format(observation=demo.turns[0][0], hint=hint) if hint else demo.turns[0][0]
    messages = opening_messages(prompt, first, is_tool_env=False)
    stream = TokenStream.from_messages(template, messages)
    end = [] if template.end_of_turn_id is None else [template.end_of_turn_id]
    for i, (_, action) in enumerate(demo.turns):
        if i > 0:
            stream.add_messages([{"role": "user", "content": demo.turns[i][0]}])
        reply = f"\\boxed{{{action}}}"
        ids = tuple(template.encode(reply)) + tuple(end)
        stream.add_completion(Completion(reply, ids, (0.0,) * len(ids), "stop"))
    stream.close()
    return stream.train_sample(advantage=1.0, role="agent")


async def warm_start(
    cfg: TrainConfig, runner: EnvRunner, template: Any, trainer: Trainer, progress: Progress
) -> dict[str, Any]:
    """Train ``trainer`` on the scripted episodes, line edits and hints (``sft.epochs`` passes); returns
    ``sft/*`` metrics.

    Raises:
        spade.stopping.Interrupted: a stop was requested (checked before every step; the trainer may stop
            within one too); nothing is stored.
        SpadeError: no script won an episode (nothing to imitate), no edit or strategy note was found where
            some were asked for, or ``sft.lr`` is set for a trainer that cannot change its learning rate (the
            multi-process leader).
    """
    if not isinstance(template, TurnTemplate):
        raise TypeError("the policy's template cannot do multi-turn token accounting (needs render_suffix)")
    t0 = time.perf_counter()
    samples, counts = await _examples(cfg, runner, template)
    losses = _imitate(cfg, trainer, samples, progress)
    return {
        **counts,
        "sft/steps": float(len(losses)),
        "sft/tokens": float(sum(sum(s.mask_T) for s in samples)),
        "sft/loss_first": losses[0],
        "sft/loss_last": losses[-1],
        "time/sft_s": time.perf_counter() - t0,
    }


async def _examples(
    cfg: TrainConfig, runner: EnvRunner, template: TurnTemplate
) -> tuple[list[TrainSample], dict[str, float]]:
    """The warm start's samples (episodes, line edits, hints) and their ``sft/*`` counts.

    Raises:
        SpadeError: no script won an episode, or no edit or strategy note was found where some were asked for.
    """
    episodes, failed = await scripted_episodes(cfg, runner)
    if cfg.sft.episodes and not episodes:
        raise SpadeError(
            f"sft: none of {cfg.sft.episodes} scripted episodes of {', '.join(env_names(cfg))} won within "
            f"play.max_turns={cfg.play.max_turns}; pick other sft.envs or set sft.episodes 0"
        )
    edits, refused = await design_edits(cfg, runner)
    if cfg.sft.designs and not edits:
        raise SpadeError(
            f"sft: no one-number edit of {', '.join(designer_games(cfg))} changed the game at "
            f"play.difficulty={cfg.play.difficulty} and passed the checker ({refused} tried); set sft.designs 0"
        )
    if cfg.sft.hints and not hint_games(cfg):
        raise SpadeError(
            f"sft: no seed game of {', '.join(designer_games(cfg))} has a strategy note (a docstring on its "
            "solution()) to answer hint requests with; set sft.hints 0"
        )
    hinted = cfg.sft.hinted_episodes
    notes = [envs.spec(name).strategy if i < hinted else "" for i, (name, _) in enumerate(episodes)]
    samples = [
        episode_sample(template, demo, note, cfg.play.agent_prompt)
        for (_, demo), note in zip(episodes, notes, strict=True)
    ]
    samples += [
        design_sample(template, template.render(messages, add_generation_prompt=True), reply)
        for messages, reply in edits
    ]
    hint_replies = hint_samples(cfg, template)
    samples += hint_replies
    return samples, {
        "sft/episodes": float(len(episodes)),
        "sft/failed_scripts": float(failed),
        "sft/designs": float(len(edits)),
        "sft/refused_edits": float(refused),
        "sft/hints": float(len(hint_replies)),
        "sft/hinted_episodes": float(sum(bool(note) for note in notes)),
    }


def _imitate(
    cfg: TrainConfig, trainer: Trainer, samples: list[TrainSample], progress: Progress
) -> list[float]:
    """``sft.epochs`` shuffled passes over ``samples`` in steps of ``sft.batch``, at ``sft.lr`` where set;
    returns each step's reply loss.

    Raises:
        SpadeError: ``sft.lr`` is set for a trainer that cannot change its learning rate.
    """
    set_lr = getattr(trainer, "set_lr", None)
    if cfg.sft.lr > 0.0 and set_lr is None:
        raise SpadeError("sft.lr needs a single-process trainer; leave it 0 to warm up at trainer.lr")
    previous = set_lr(cfg.sft.lr) if set_lr is not None and cfg.sft.lr > 0.0 else None
    steps = -(-len(samples) // cfg.sft.batch)
    progress(f"sft: training on {len(samples)} examples, {cfg.sft.epochs} epoch(s) of {steps} steps")
    rng = random.Random(cfg.seed)
    losses: list[float] = []
    total, t0 = steps * cfg.sft.epochs, time.perf_counter()
    try:
        for epoch in range(cfg.sft.epochs):
            order = rng.sample(range(len(samples)), len(samples))
            for start in range(0, len(order), cfg.sft.batch):
                stopping.check()  # the steps hold the event loop: no cancellation reaches them
                batch = [samples[i] for i in order[start : start + cfg.sft.batch]]
                losses.append(trainer.train_step(batch).get("train/nll", float("nan")))
                left = (time.perf_counter() - t0) / len(losses) * (total - len(losses))
                eta = f", ~{duration(left)} left" if len(losses) < total else ""
                progress(f"warm start: step {len(losses)}/{total}{eta}")
            progress(f"sft: epoch {epoch + 1}/{cfg.sft.epochs}, reply loss {losses[-1]:.3f}")
    finally:
        if previous is not None and set_lr is not None:
            set_lr(previous)
    return losses


_MODEL_KEYED = ("backend", "model", "dtype", "device", "max_context")
"""The ``model`` options a warm start's entry depends on: the backend picks the trainer that writes it (the
scripted double or the torch trainer, whose files differ), model, dtype and device its weights and
arithmetic, and ``max_context`` where hint prompts are cut. The other ``model`` options
(:data:`_MODEL_UNKEYED`) only sample, and a warm start samples nothing."""
_MODEL_UNKEYED = ("max_concurrency", "threads", "openai", "vllm", "scripted", "thinking")
"""The ``model`` options a warm start does not depend on: sampling engines' settings, runtime options, and
``thinking`` (how play prompts later turns; the imitated episodes hold no reasoning)."""
_UNUSABLE = (OSError, EOFError, ValueError, KeyError, RuntimeError, pickle.UnpicklingError)
"""What reading a damaged or foreign entry raises: files missing (another trainer's entry) or cut, JSON or
torch files that do not parse (torch: RuntimeError for a cut archive, UnpicklingError or EOFError for other
bytes), and a trainer's own refusal (TorchTrainer: ValueError for another format or other tensors)."""


_UNKEYED = frozenset({"designer.train", "designer.reward"})
"""Settings the warm start does not read: whether the designer is trained afterwards and on what reward (so
the control arms ``selfplay_untrained`` and the shuffled-reward designer share their seed's warm start)."""


def cache_key(cfg: TrainConfig) -> str:
    """What a warm start's result depends on, hashed: the settings (runtime options aside: see
    :data:`spade.config.options.RUNTIME_OPTIONS`), the model options of :data:`_MODEL_KEYED`, the seed and the
    source of every game it imitates."""
    games = sorted(
        {*env_names(cfg), *designer_games(cfg)} if cfg.sft.designs or cfg.sft.hints else env_names(cfg)
    )
    inputs = {
        "games": {name: hashlib.sha256(envs.spec(name).source().encode()).hexdigest() for name in games},
        "model": {name: getattr(cfg.model, name) for name in _MODEL_KEYED},
        **{
            section: {
                k: v for k, v in result_settings(cfg, section).items() if f"{section}.{k}" not in _UNKEYED
            }
            for section in ("sft", "play", "trainer", "designer", "checker")
        },
        "seed": cfg.seed,
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


async def cached_warm_start(
    cfg: TrainConfig, runner: EnvRunner, template: Any, trainer: Trainer, progress: Progress
) -> dict[str, Any]:
    """:func:`warm_start`, or the trainer state and metrics of the same warm start done before.

    An entry that cannot be used (files missing or cut, or not the trainer's own) is removed and the warm
    start done again and stored; ``sft/cache_rebuilt`` is 1 then. The trainers refuse such an entry before
    changing their state (TorchTrainer checks the file, its format and its tensors first), so the warm start
    starts from the model as built. Under ``accelerate launch`` the other ranks load the entry too and stop
    on one that cannot be used; the key keeps other trainers' entries apart, so that takes damaged files.
    """
    stopping.check()  # start-up stages hold the event loop: a stop asked for meanwhile is acted on here
    folder = cfg.runs_dir / ".sft-cache" / cache_key(cfg)
    rebuilt = 0.0
    if (folder / "metrics.json").is_file():
        try:
            stored = _load_entry(folder, trainer)
        except _UNUSABLE as exc:
            progress(
                f"sft: the warm start stored in {folder} cannot be used ({type(exc).__name__}: {exc}); "
                "doing it again"
            )
            _discard(folder)
            rebuilt = 1.0
        else:
            progress(f"sft: reusing the warm start in {folder} (same model, settings and seed)")
            return {**stored, "sft/cached": 1.0, "sft/cache_rebuilt": 0.0}
    metrics = await warm_start(cfg, runner, template, trainer, progress)
    _store(folder, trainer, metrics)
    return {**metrics, "sft/cached": 0.0, "sft/cache_rebuilt": rebuilt}


def _load_entry(folder: Path, trainer: Trainer) -> dict[str, Any]:
    """The metrics of the entry in ``folder``, its trainer state loaded into ``trainer``.

    Raises:
        One of :data:`_UNUSABLE`: the entry cannot be used.
    """
    stored = json.loads((folder / "metrics.json").read_text())
    if not isinstance(stored, dict):
        raise ValueError(f"{folder / 'metrics.json'} holds no metrics object")
    trainer.load(folder / "trainer")
    return stored


def _discard(folder: Path) -> None:
    """Remove an unusable entry: renamed aside first, so no other run reads it half deleted."""
    aside = folder.with_name(f"{folder.name}.unusable-{os.getpid()}")
    shutil.rmtree(aside, ignore_errors=True)  # left by a killed process that had this pid
    try:
        folder.rename(aside)
    except FileNotFoundError:  # a run side by side removed it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def _store(folder: Path, trainer: Trainer, metrics: dict[str, Any]) -> None:
    """Write the cache entry whole or not at all: a temporary folder of this process, renamed into place.

    Runs side by side may compute the same warm start; the first to finish stores it, the others' copies
    are dropped (the entries are the same).
    """
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a killed process that had this pid
    try:
        trainer.save(tmp / "trainer")
        (tmp / "metrics.json").write_text(json.dumps(metrics))
        if folder.exists() and not (folder / "metrics.json").is_file():
            shutil.rmtree(folder, ignore_errors=True)  # an entry some older version left incomplete
        tmp.rename(folder)
    except OSError:
        if not (folder / "metrics.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def describe(metrics: dict[str, Any], games: Sequence[str]) -> str:
    """The progress line after the warm start."""
    designs, hints = metrics.get("sft/designs", 0.0), metrics.get("sft/hints", 0.0)
    edits = f" and {designs:.0f} line edits" if designs else ""
    edits += f" and {hints:.0f} hints" if hints else ""
    return (
        f"sft: imitated {metrics['sft/episodes']:.0f} scripted episodes of {', '.join(games)}{edits} in "
        f"{metrics['sft/steps']:.0f} steps: reply loss {metrics['sft/loss_first']:.3f} -> "
        f"{metrics['sft/loss_last']:.3f} ({metrics['time/sft_s']:.0f} s)"
    )
