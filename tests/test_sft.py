"""Supervised warm start: scripted episodes rendered as the agent plays them, trained before step 0."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from spade import envs, stopping
from spade.backends.embedded import write_tiny_model
from spade.backends.template import HFChatTemplate
from spade.checker import check_env
from spade.config import (
    CPU_TINY,
    ConfigError,
    DesignerConfig,
    ModelConfig,
    SFTConfig,
    TrainConfig,
    TrainerConfig,
    validate,
)
from spade.config.options import with_options
from spade.config.types import AgentPrompt
from spade.design import designer, hints
from spade.design.edits import apply_line_edits
from spade.design.prompts import DesignRequest, Exemplar
from spade.errors import SpadeError
from spade.play.agent import Episode, play_episode
from spade.play.demos import Demo, demo_seed, record_demo
from spade.play.prompts import GAME_SYSTEM, RELEASED_GAME_ASK
from spade.run import warm_start
from spade.run.loop import train
from spade.run.preflight import check_names
from spade.sandbox import Sandbox
from spade.scripted.trainer import ScriptedTrainer
from spade.training.trainer import TorchTrainer
from spade.types import SamplingParams, Trajectory
from test_agent import CannedPolicy

LOCK = dataclasses.replace(
    CPU_TINY.play, demos=0, difficulty=0, max_turns=12, context_tokens=100_000, turn_tokens=32
)


def _cfg(**sft_fields: Any) -> TrainConfig:
    return dataclasses.replace(
        TrainConfig(),
        play=LOCK,
        sft=SFTConfig(**sft_fields),
        designer=CPU_TINY.designer,
    )


def test_episodes_come_from_the_trained_skills_seeds_on_unplayed_seeds() -> None:
    cfg = _cfg(episodes=6)
    # the logical_deduction seeds, seating too where designer.seeds starts the archive from the lock only
    assert warm_start.env_names(cfg) == warm_start.designer_games(cfg) == ["combination_lock", "seating"]
    assert warm_start.env_names(dataclasses.replace(cfg, sft=SFTConfig(envs=("countdown",)))) == ["countdown"]

    async def run() -> tuple[list[tuple[str, Demo]], int]:
        with Sandbox() as sb:
            return await warm_start.scripted_episodes(cfg, sb)

    episodes, failed = asyncio.run(run())
    assert failed == 0
    assert len(episodes) == 6
    assert [name for name, _ in episodes] == ["combination_lock", "seating"] * 3
    assert len({demo.turns for _, demo in episodes}) == 6  # six instances
    for _, demo in episodes:
        assert 3 <= len(demo.turns) <= LOCK.max_turns


@pytest.mark.parametrize("prompt", ["compact", "released"])
@pytest.mark.parametrize("hinted", [False, True])
def test_an_episode_sample_is_token_for_token_the_play_of_the_same_replies(
    hinted: bool, prompt: AgentPrompt
) -> None:
    """The warm start trains on exactly the sequence the agent produces when it plays those moves under the
    run's ``play.agent_prompt`` (with the strategy note as the hint: exactly what a hinted play of those moves
    produces)."""
    name = "combination_lock"
    policy = CannedPolicy([])
    hint = envs.spec(name).strategy if hinted else None

    async def run() -> tuple[Demo, Trajectory]:
        with Sandbox() as sb:
            cfg = dataclasses.replace(_cfg(episodes=1), sft=SFTConfig(episodes=1, envs=(name,)))
            demo = (await warm_start.scripted_episodes(cfg, sb))[0][0][1]
            policy.replies = [f"\\boxed{{{a}}}" for _, a in demo.turns]
            env = await sb.aopen(envs.spec(name).source())
            try:
                seed_used = demo_seed(f"sft/{name}", [cfg.seed], 0)
                episode = Episode(name, seed_used, hint, options={"difficulty": 0})
                play = dataclasses.replace(LOCK, agent_prompt=prompt)
                traj = await play_episode(policy, env, episode, play, is_tool_env=False)
            finally:
                await env.aclose()
            return demo, traj

    demo, traj = asyncio.run(run())
    sample = warm_start.episode_sample(policy.template, demo, hint or "", prompt)
    seen = policy.template.decode(sample.tokens_T)
    assert (RELEASED_GAME_ASK in seen) == (prompt == "released")
    assert (GAME_SYSTEM in seen) == (prompt == "compact")
    assert traj.success
    assert traj.hinted == hinted
    assert sample.tokens_T == traj.tokens_T
    assert sample.mask_T == traj.mask_T
    assert sample.advantage == 1.0
    assert sample.role == "agent"


def test_designer_examples_are_valid_edits_of_the_played_level_that_differ_from_the_worked_one() -> None:
    cfg = _cfg(designs=6)

    async def run() -> tuple[list[tuple[list[Any], str]], int, list[tuple[Demo | None, Demo | None]]]:
        with Sandbox() as sb:
            pairs, refused = await warm_start.design_edits(cfg, sb)
            demos = []
            for i, (_, reply) in enumerate(pairs):
                parent = envs.spec(["combination_lock", "seating"][i % 2]).source()
                child = apply_line_edits(parent, reply, cfg.designer.example_code_chars)[0]
                assert child is not None
                played = [
                    await record_demo(sb, code, seed=7, options={"difficulty": 0}, max_actions=12)
                    for code in (parent, child)
                ]
                demos.append((played[0], played[1]))
            return pairs, refused, demos

    pairs, refused, demos = asyncio.run(run())
    assert len(pairs) == 6
    assert refused > 0  # most one-number edits of the level tables change a level that is not played
    chars = cfg.designer.example_code_chars
    with Sandbox() as sb:
        for i, (messages, reply) in enumerate(pairs):
            name = ["combination_lock", "seating"][i % 2]
            assert f"of the game `{name}`" in messages[-1]["content"]
            assert reply != messages[2]["content"]  # not a copy of the worked exchange's reply
            code, why = apply_line_edits(envs.spec(name).source(), reply, chars)
            assert code is not None, why
            assert check_env(code, sb, cfg.checker, seed=i, win=cfg.play).ok
    for parent_demo, child_demo in demos:  # the game played at difficulty 0 changed, and is still won
        assert child_demo is not None
        assert child_demo != parent_demo
    assert len({reply for _, reply in pairs}) >= 3  # different numbers, not one edit repeated


def test_a_designer_example_is_token_for_token_the_design_of_the_same_reply() -> None:
    """The warm start trains the designer on exactly the sequence it samples when it writes that edit."""
    cfg = _cfg(designs=1)

    async def examples() -> list[tuple[list[Any], str]]:
        with Sandbox() as sb:
            return (await warm_start.design_edits(cfg, sb))[0]

    [(messages, reply)] = asyncio.run(examples())
    policy = CannedPolicy([reply])
    spec = envs.spec("combination_lock")
    request = DesignRequest(
        spec.skill, "edit", "", difficulty=cfg.designer.difficulty,
        parent=Exemplar(spec.name, spec.source(), spec.skill, None, None), edit_format="lines",
    )  # fmt: skip
    chars = cfg.designer.example_code_chars
    [design] = asyncio.run(designer.design(policy, [request], SamplingParams(), example_chars=chars))
    sample = warm_start.design_sample(
        policy.template, policy.template.render(messages, add_generation_prompt=True), reply
    )
    assert design.code is not None
    assert sample.tokens_T == design.tokens_T
    assert sample.mask_T == design.mask_T
    assert (sample.advantage, sample.role) == (1.0, "designer")


def test_a_hint_example_is_token_for_token_the_hint_request_answered_with_the_strategy_note() -> None:
    """The warm start trains on exactly the sequence the loop samples when it asks for a hint (prefix and
    code cut to fit included), and the answer is a hint the filter accepts."""
    cfg = dataclasses.replace(_cfg(hints=3), model=ModelConfig(max_context=700))  # the seeds' code is cut
    template = CannedPolicy([]).template
    samples = warm_start.hint_samples(cfg, template)
    assert warm_start.hint_games(cfg) == ["combination_lock", "seating"]
    assert len(samples) == 3
    d = cfg.designer
    params = SamplingParams(max_tokens=d.hint_max_tokens)
    for sample, name in zip(samples, ["combination_lock", "seating", "combination_lock"], strict=True):
        spec = envs.spec(name)
        reply = f" {spec.strategy}"
        policy = CannedPolicy([reply])
        request = hints.HintRequest(spec.name, spec.source(), None, d.setting)
        [hint] = asyncio.run(
            hints.write_hints(
                policy, [request], params, max_words=d.hint_max_words, max_chars=d.hint_max_chars,
                prefix=d.hint_prefix, max_prompt_tokens=cfg.model.max_context - d.hint_max_tokens,
            )
        )  # fmt: skip
        assert (hint.hint, hint.reason) == (spec.strategy, "ok")
        assert "# ... [truncated" in hint.messages[-1]["content"]  # the code was cut to fit, as in the loop
        assert sample.tokens_T == hint.tokens_T
        assert sample.mask_T == hint.mask_T
        assert (sample.advantage, sample.role) == (1.0, "designer")
    assert samples[0].tokens_T == samples[2].tokens_T


def test_hint_examples_need_a_seed_game_with_a_strategy_note(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _cfg(hints=2)
    for name in ("combination_lock", "seating"):
        monkeypatch.setitem(envs._REGISTRY, name, dataclasses.replace(envs.spec(name), strategy=""))
    assert warm_start.hint_samples(cfg, CannedPolicy([]).template) == []

    async def run() -> None:
        with Sandbox() as sb:
            await warm_start.warm_start(cfg, sb, CannedPolicy([]).template, ScriptedTrainer(), lambda _: None)

    with pytest.raises(SpadeError, match="no seed game of combination_lock, seating has a strategy note"):
        asyncio.run(run())


def test_warm_start_trains_every_epoch_at_its_own_lr_then_restores_the_trainers() -> None:
    cfg = _cfg(episodes=5, epochs=2, batch=2, lr=0.5)
    trainer = ScriptedTrainer()
    trainer.lr = 0.01
    seen: list[str] = []

    async def run() -> dict[str, float]:
        with Sandbox() as sb:
            return await warm_start.warm_start(cfg, sb, CannedPolicy([]).template, trainer, seen.append)

    metrics = asyncio.run(run())
    assert trainer.updates == 2 * 3  # 5 episodes in batches of 2, twice
    assert trainer.lr == 0.01
    assert metrics["sft/episodes"] == 5
    assert metrics["sft/hinted_episodes"] == 0
    assert metrics["sft/steps"] == 6
    assert metrics["sft/failed_scripts"] == 0
    assert metrics["sft/loss_last"] < metrics["sft/loss_first"]
    assert metrics["sft/tokens"] > 0
    assert [line.split(",")[0] for line in seen] == [
        "sft: training on 5 examples",
        *(f"warm start: step {i}/6" for i in (1, 2, 3)),
        "sft: epoch 1/2",
        *(f"warm start: step {i}/6" for i in (4, 5, 6)),
        "sft: epoch 2/2",
    ]
    # Each step says how many are left and about how long they take, the last one that it is done.
    assert all(re.fullmatch(r"warm start: step [1-5]/6, ~\S+ (s|min \d+ s|h \d+ min) left", ln) for ln in seen
               if ln.startswith("warm start") and "6/6" not in ln)  # fmt: skip
    assert "warm start: step 6/6" in seen


class _StoppedAtFirstStep(ScriptedTrainer):
    """A trainer whose first step is interrupted by a stop request (Ctrl-C during the warm start)."""

    def train_step(self, samples: Any) -> dict[str, float]:
        stopping.request("SIGINT")
        return super().train_step(samples)


def test_a_stop_request_ends_the_warm_start_before_its_next_step() -> None:
    """The steps hold the event loop, so no cancellation reaches them: the loop itself checks the flag."""
    cfg = _cfg(episodes=4, epochs=2, batch=1)
    trainer = _StoppedAtFirstStep()

    async def run() -> dict[str, float]:
        with Sandbox() as sb:
            return await warm_start.warm_start(cfg, sb, CannedPolicy([]).template, trainer, lambda _: None)

    try:
        with pytest.raises(stopping.Interrupted, match="stopped by SIGINT"):
            asyncio.run(run())
    finally:
        stopping.clear()
    assert trainer.updates == 1  # not the 8 steps of 2 epochs


def test_the_first_hinted_episodes_carry_their_games_strategy_note() -> None:
    cfg = _cfg(episodes=4, hinted_episodes=3, epochs=1, batch=4)
    notes = []

    async def run() -> dict[str, float]:
        with Sandbox() as sb:
            return await warm_start.warm_start(
                cfg, sb, CannedPolicy([]).template, ScriptedTrainer(), notes.append
            )

    assert asyncio.run(run())["sft/hinted_episodes"] == 3


def test_a_designer_only_warm_start_trains_the_designer_role() -> None:
    cfg = _cfg(episodes=0, designs=3, hints=2, epochs=1, batch=2)
    trainer = ScriptedTrainer()

    async def run() -> dict[str, float]:
        with Sandbox() as sb:
            return await warm_start.warm_start(cfg, sb, CannedPolicy([]).template, trainer, lambda _: None)

    metrics = asyncio.run(run())
    assert (metrics["sft/episodes"], metrics["sft/designs"], metrics["sft/hints"]) == (0, 3, 2)
    assert metrics["sft/refused_edits"] > 0  # edits of levels that are not played
    assert trainer.updates == 3
    assert warm_start.describe(metrics, ["combination_lock"]).startswith(
        "sft: imitated 0 scripted episodes of combination_lock and 3 line edits and 2 hints in 3 steps"
    )


def test_scripts_that_do_not_win_in_the_turn_budget_are_counted_and_none_is_an_error() -> None:
    cfg = dataclasses.replace(_cfg(episodes=3), play=dataclasses.replace(LOCK, max_turns=2))

    async def run() -> None:
        with Sandbox() as sb:
            await warm_start.warm_start(cfg, sb, CannedPolicy([]).template, ScriptedTrainer(), lambda _: None)

    with pytest.raises(SpadeError, match="none of 3 scripted episodes of combination_lock, seating won"):
        asyncio.run(run())


def test_bad_sft_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"sft\.episodes"):
        validate(_cfg(episodes=-1))
    with pytest.raises(ConfigError, match=r"sft\.envs"):
        check_names(_cfg(episodes=2, envs=("no_such_game",)))
    with pytest.raises(ConfigError, match=r"sft\.envs"):
        check_names(_cfg(episodes=2, envs=("company_directory",)))  # a tool environment: no boxed script
    other_skill = dataclasses.replace(CPU_TINY.designer, seeds=("seating", "countdown"))  # another skill
    with pytest.raises(ConfigError, match=r"designer\.seeds \['countdown'\].*from combination_lock, seating"):
        check_names(dataclasses.replace(_cfg(), designer=other_skill))
    with pytest.raises(ConfigError, match=r"sft\.hinted_episodes must be >= 0"):
        validate(_cfg(episodes=2, hinted_episodes=-1))
    with pytest.raises(ConfigError, match=r"sft\.hints must be >= 0"):
        validate(_cfg(hints=-1))
    tools = dataclasses.replace(CPU_TINY.designer, setting="tool_use", skills=(), seeds=())
    with pytest.raises(ConfigError, match=r"sft\.hints .* needs designer\.setting=games"):
        validate(dataclasses.replace(_cfg(hints=2), designer=tools))
    with pytest.raises(ConfigError, match=r"designer\.edit_format=lines"):
        validate(dataclasses.replace(_cfg(designs=2), designer=DesignerConfig(edit_format="patch")))


def test_a_run_warms_up_once_and_reports_it_in_step_zero(tmp_path: Path) -> None:
    cfg = dataclasses.replace(
        _cfg(episodes=4, epochs=1, batch=4),
        name="sft",
        runs_dir=tmp_path,
        steps=2,
        mode="fixed_pool",
        model=ModelConfig(backend="scripted"),
    )
    lines: list[str] = []
    run = train(cfg, progress=lines.append)
    rows = [json.loads(line) for line in (run.root / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["sft/episodes"] == 4
    assert rows[0]["sft/steps"] == 1
    assert "sft/episodes" not in rows[1]
    assert any(
        line.startswith("sft: imitated 4 scripted episodes of combination_lock, seating") for line in lines
    )
    assert rows[0]["sft/cached"] == 0.0
    lines.clear()
    train(cfg, resume=True, steps=3, progress=lines.append)  # a resumed run does not warm up again
    assert not any(line.startswith("sft:") for line in lines)
    other = train(dataclasses.replace(cfg, name="sft-b"), progress=lines.append)  # same warm start: reused
    assert any(line.startswith("sft: reusing the warm start") for line in lines)
    row = json.loads((other.root / "metrics.jsonl").read_text().splitlines()[0])
    assert row["sft/cached"] == 1.0
    assert row["sft/loss_last"] == rows[0]["sft/loss_last"]
    train(dataclasses.replace(cfg, name="sft-c", seed=1), progress=lines.append)  # another seed: its own
    assert len(list((tmp_path / ".sft-cache").iterdir())) == 2


def test_the_cache_key_covers_the_source_of_every_game_the_warm_start_imitates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _cfg(episodes=4)
    key = warm_start.cache_key(cfg)
    for name in ("countdown", "seating"):  # countdown is no logical_deduction seed: not imitated
        spec = envs.spec(name)
        edited = tmp_path / f"{name}.py"
        edited.write_text(spec.source() + "\n# edited\n")
        monkeypatch.setitem(envs._REGISTRY, name, dataclasses.replace(spec, source_path=edited))
        assert (warm_start.cache_key(cfg) == key) == (name == "countdown")


@pytest.mark.slow
def test_the_real_trainer_fits_the_scripted_replies(tmp_path: Path) -> None:
    """On a real (tiny, random) model the replies' loss falls over the warm start's epochs."""
    model = write_tiny_model(tmp_path / "tiny")
    cfg = _cfg(episodes=4, epochs=8, batch=4, lr=1e-2)
    trainer = TorchTrainer(TrainerConfig(lr=1e-5, micro_batch_tokens=4096), ModelConfig(model=str(model)))
    template = HFChatTemplate(trainer.tokenizer)

    async def run() -> dict[str, float]:
        with Sandbox() as sb:
            return await warm_start.warm_start(cfg, sb, template, trainer, lambda _: None)

    metrics = asyncio.run(run())
    assert math.isfinite(metrics["sft/loss_first"])
    assert metrics["sft/loss_last"] < 0.7 * metrics["sft/loss_first"]
    assert trainer.optimizer.param_groups[0]["lr"] == 1e-5


def test_warm_starts_stored_side_by_side_keep_the_first_whole_and_leave_nothing_else(tmp_path: Path) -> None:
    """Two runs of an experiment may warm up the same seed at once: each writes its own temporary folder."""
    folder = tmp_path / ".sft-cache" / "key"
    first, second = ScriptedTrainer(), ScriptedTrainer()
    first.updates, second.updates = 3, 5
    warm_start._store(folder, first, {"sft/steps": 3.0})
    warm_start._store(folder, second, {"sft/steps": 5.0})  # finished later: the stored entry stays
    assert json.loads((folder / "metrics.json").read_text()) == {"sft/steps": 3.0}
    restored = ScriptedTrainer()
    restored.load(folder / "trainer")
    assert restored.updates == 3
    assert [p.name for p in folder.parent.iterdir()] == ["key"]
    (folder / "metrics.json").unlink()  # an incomplete entry is replaced
    warm_start._store(folder, second, {"sft/steps": 5.0})
    assert json.loads((folder / "metrics.json").read_text()) == {"sft/steps": 5.0}
    assert [p.name for p in folder.parent.iterdir()] == ["key"]


def test_the_cache_key_covers_every_model_option_that_shapes_the_entry_and_no_runtime_option() -> None:
    """A scripted run's entry is no torch trainer's (and the other way round): the backend, and whatever else
    changes what is stored, is part of the key; thread counts and engine settings are not."""
    cfg = _cfg(episodes=4)
    key = warm_start.cache_key(cfg)
    shaping = {
        "model.backend": "scripted",
        "model.model": "/models/other",
        "model.dtype": "bfloat16",
        "model.device": "cuda",
        "model.max_context": 1024,
        "trainer.lora_rank": 8,
        "trainer.lora_alpha": 16,
        "trainer.lora_targets": ("q_proj",),
        "trainer.lr": 1e-4,
    }
    for name, value in shaping.items():
        assert warm_start.cache_key(with_options(cfg, {name: value})) != key, name
    runtime_or_sampling = {
        "model.threads": 1,
        "model.max_concurrency": 3,
        "model.vllm.kv_cache_gib": 0.25,
        "model.vllm.cpu_bind": "all",
        "trainer.compact_heap": True,
        "transcripts.enabled": False,
    }
    for name, value in runtime_or_sampling.items():
        assert warm_start.cache_key(with_options(cfg, {name: value})) == key, name


def test_every_model_option_is_either_keyed_or_named_as_not_shaping_a_warm_start() -> None:
    """A new model option makes its author decide whether warm starts depend on it."""
    named = set(warm_start._MODEL_KEYED) | set(warm_start._MODEL_UNKEYED)
    assert named == {f.name for f in dataclasses.fields(ModelConfig)}
    assert not set(warm_start._MODEL_KEYED) & set(warm_start._MODEL_UNKEYED)


class _OtherTrainer(ScriptedTrainer):
    """A trainer whose checkpoints are other files than the scripted double's (as TorchTrainer's are)."""

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "other_state.json").write_text(json.dumps({"updates": self.updates}))

    def load(self, path: Path) -> None:
        file = path / "other_state.json"
        if not file.is_file():
            raise FileNotFoundError(f"{file} not found: pass a folder written by _OtherTrainer.save")
        self.updates = int(json.loads(file.read_text())["updates"])


def _warm(cfg: TrainConfig, trainer: ScriptedTrainer, lines: list[str]) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        with Sandbox() as sb:
            return await warm_start.cached_warm_start(
                cfg, sb, CannedPolicy([]).template, trainer, lines.append
            )

    return asyncio.run(run())


@pytest.mark.parametrize("damage", ["another_trainer", "trainer_files_gone", "metrics_cut", "state_cut"])
def test_an_unusable_cache_entry_is_done_again_and_replaced_not_fatal(tmp_path: Path, damage: str) -> None:
    cfg = dataclasses.replace(_cfg(episodes=2, epochs=1, batch=2), runs_dir=tmp_path)
    folder = tmp_path / ".sft-cache" / warm_start.cache_key(cfg)
    first = _warm(cfg, _OtherTrainer() if damage == "another_trainer" else ScriptedTrainer(), [])
    assert (first["sft/cached"], first["sft/cache_rebuilt"]) == (0.0, 0.0)
    if damage == "trainer_files_gone":
        shutil.rmtree(folder / "trainer")
    elif damage == "metrics_cut":
        (folder / "metrics.json").write_text('{"sft/steps": ')
    elif damage == "state_cut":
        (folder / "trainer" / "scripted_trainer.json").write_text("")
    lines: list[str] = []
    trainer = ScriptedTrainer()
    metrics = _warm(cfg, trainer, lines)
    assert (metrics["sft/cached"], metrics["sft/cache_rebuilt"]) == (0.0, 1.0)
    assert trainer.updates == 1  # warmed up from the model as built, not from the refused entry
    assert any(line.startswith(f"sft: the warm start stored in {folder} cannot be used (") for line in lines)
    again = _warm(cfg, ScriptedTrainer(), lines)  # the entry stored anew is used
    assert (again["sft/cached"], again["sft/cache_rebuilt"]) == (1.0, 0.0)
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


@pytest.mark.slow
def test_a_torch_trainer_refuses_a_scripted_entry_and_warms_up_again(tmp_path: Path) -> None:
    """The issue's case with the real trainer: an entry the scripted double wrote under this key."""
    model = write_tiny_model(tmp_path / "tiny")
    cfg = dataclasses.replace(_cfg(episodes=2, epochs=1, batch=2), runs_dir=tmp_path)
    cfg = with_options(cfg, {"model.model": str(model)})
    folder = tmp_path / ".sft-cache" / warm_start.cache_key(cfg)
    warm_start._store(folder, ScriptedTrainer(), {"sft/steps": 1.0})
    trainer = TorchTrainer(TrainerConfig(micro_batch_tokens=4096), cfg.model)
    lines: list[str] = []

    async def run() -> dict[str, Any]:
        with Sandbox() as sb:
            template = HFChatTemplate(trainer.tokenizer)
            return await warm_start.cached_warm_start(cfg, sb, template, trainer, lines.append)

    metrics = asyncio.run(run())
    assert metrics["sft/cache_rebuilt"] == 1.0
    assert any("trainer_state.pt not found" in line for line in lines)
    assert (folder / "trainer" / "trainer_state.pt").is_file()


def test_every_arm_of_a_seed_shares_its_warm_start_and_seeds_do_not() -> None:
    """An experiment's arms (self-play, the fixed pool, procedural, the designer never trained) start from one
    warm start per seed: the mode and whether the designer is trained afterwards are not in the key."""
    cfg = _cfg(episodes=4)
    key = warm_start.cache_key(cfg)
    for name, value in {"mode": "fixed_pool", "designer.train": False}.items():
        assert warm_start.cache_key(with_options(cfg, {name: value})) == key, name
    assert warm_start.cache_key(with_options(cfg, {"mode": "procedural", "designer.train": False})) == key
    assert warm_start.cache_key(with_options(cfg, {"seed": cfg.seed + 1})) != key
