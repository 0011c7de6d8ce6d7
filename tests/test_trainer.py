"""The torch Trainer: what changes, what stays frozen, accumulation, checkpoints, export to the Policy."""

from __future__ import annotations

import asyncio
import re
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from spade import stopping
from spade.backends.embedded import resolve_model
from spade.backends.hf import HFPolicy
from spade.backends.template import TokenStream
from spade.config import ModelConfig, TrainerConfig
from spade.training import micro_batches
from spade.training.grpo import token_logprobs
from spade.training.micro_batches import pack_micro_batches
from spade.training.model import autocast_dtype
from spade.training.trainer import TorchTrainer
from spade.types import SamplingParams, TrainSample

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trainer(tiny_dir: Path, **kw: object) -> TorchTrainer:
    cfg = TrainerConfig(**{"lr": 1e-2, "lora_rank": 4, "lora_alpha": 8, **kw})  # type: ignore[arg-type]
    return TorchTrainer(cfg, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0)


def _samples() -> list[TrainSample]:
    def one(n: int, adv: float, staleness: int = 0) -> TrainSample:
        tokens = tuple(100 + (7 * i) % 50 for i in range(n))
        mask = (0,) * 4 + (1,) * (n - 4)
        return TrainSample(tokens, mask, tuple(-3.0 * m for m in mask), adv, "agent", staleness)

    return [one(12, 1.0), one(20, -1.0, staleness=2), one(9, 0.5), one(16, -0.5)]


def _params(trainer: TorchTrainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def test_pack_micro_batches_respects_the_token_budget() -> None:
    groups = pack_micro_batches([10, 30, 5, 12, 50], budget=40)
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    assert groups[0] == [4]  # longer than the budget: alone
    lengths = [10, 30, 5, 12, 50]
    for group in groups[1:]:
        assert len(group) * max(lengths[i] for i in group) <= 40


def test_log_probs_at_the_loss_positions_only_equal_the_full_heads(tiny_dir: Path) -> None:
    """The head is applied only where some row has a loss token; there the values are the full pass's."""
    trainer = _trainer(tiny_dir)
    ids = torch.tensor([[100 + (7 * i) % 50 for i in range(12)], [120 + (5 * i) % 40 for i in range(12)]])
    attention = torch.ones_like(ids)
    mask = torch.zeros(2, 12)
    mask[0, 5:7] = 1.0
    mask[1, 9:11] = 1.0
    keep = micro_batches.loss_positions(mask)
    assert keep.tolist() == [4, 5, 8, 9]
    with torch.no_grad():
        full = token_logprobs(trainer.model(input_ids=ids).logits[:, :-1], ids[:, 1:])
        kept = micro_batches.logprobs_at(trainer.model, ids, attention, keep)
    assert torch.allclose(kept[:, keep], full[:, keep], atol=1e-5)
    assert kept[:, [0, 1, 2, 3, 6, 7, 10]].abs().max() == 0.0
    assert micro_batches.loss_positions(torch.zeros(2, 12)).tolist() == [0]  # no loss: one position


def test_lora_step_changes_adapters_and_leaves_the_base_frozen(tiny_dir: Path) -> None:
    trainer = _trainer(tiny_dir)
    before = _params(trainer)
    metrics = trainer.train_step(_samples())
    after = _params(trainer)
    lora = [n for n in before if "lora_" in n]
    base = [n for n in before if "lora_" not in n]
    assert lora
    assert base
    assert all(not torch.equal(before[n], after[n]) for n in lora if "lora_B" in n)
    assert all(torch.equal(before[n], after[n]) for n in base)
    assert metrics["train/tokens"] == sum(sum(s.mask_T[1:]) for s in _samples())
    assert metrics["train/grad_norm"] > 0
    assert {"train/loss", "train/clip_frac", "train/kl", "time/train_step_s", "train/peak_mem_mb"} <= set(
        metrics
    )


def test_full_step_changes_every_layer(tiny_dir: Path) -> None:
    trainer = _trainer(tiny_dir, lora_rank=0, lr=1e-3)
    before = _params(trainer)
    trainer.train_step(_samples())
    after = _params(trainer)
    assert all(p.requires_grad for p in trainer.model.parameters())
    changed = [n for n in before if not torch.equal(before[n], after[n])]
    assert {n.split(".")[2] for n in changed if ".layers." in n} == {"0", "1"}
    assert "model.norm.weight" in changed


FP32_EPS = torch.finfo(torch.float32).eps
ROUND_OFF = 1e3 * FP32_EPS
"""Round-off allowance relative to a tensor's largest entry: a gradient entry is a sum over a few hundred
fp32 products along each path through the model, and a different summation order (micro-batch split, CPU
kernel, thread count) moves it by up to ~sqrt(terms) * eps of that scale; 1e3 * eps (~1.2e-4) leaves room."""


def _step_recording_grads(trainer: TorchTrainer, samples: list[TrainSample]) -> dict[str, torch.Tensor]:
    """Run one train step and return the accumulated (clipped) gradients the optimiser stepped on."""
    seen: dict[str, torch.Tensor] = {}
    step = trainer.optimizer.step

    def recording_step(*args: object, **kwargs: object) -> object:
        for name, p in trainer.model.named_parameters():
            if p.grad is not None:
                seen[name] = p.grad.detach().clone()
        return step(*args, **kwargs)

    trainer.optimizer.step = recording_step  # type: ignore[method-assign]
    try:
        trainer.train_step(samples)
    finally:
        trainer.optimizer.step = step  # type: ignore[method-assign]
    return seen


def _assert_same_gradients(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    assert a
    for name, ga in a.items():
        gb = b[name]
        scale = max(ga.abs().max().item(), gb.abs().max().item())
        tol = ROUND_OFF * scale
        diff = (ga - gb).abs().max().item()
        assert diff <= tol, f"{name}: gradients differ by {diff:.3g} > {tol:.3g} (fp32 round-off allowance)"


def _assert_same_update_where_the_gradient_is_clear(
    before: dict[str, torch.Tensor],
    after: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]],
    grads: dict[str, torch.Tensor],
) -> None:
    """Adam's first step is ~lr*sign(grad): compare it only where round-off cannot flip the sign."""
    compared = 0
    for name, g in grads.items():
        clear = g.abs() > 100 * ROUND_OFF * g.abs().max()
        da, db = after[0][name] - before[name], after[1][name] - before[name]
        assert torch.allclose(da[clear], db[clear], rtol=1e-3, atol=0.0), name
        compared += int(clear.sum())
    assert compared > 0


def test_micro_batching_does_not_change_the_update(tiny_dir: Path) -> None:
    one_batch = _trainer(tiny_dir, micro_batch_tokens=10_000)
    many = _trainer(tiny_dir, micro_batch_tokens=20)
    before = _params(one_batch)
    g1 = _step_recording_grads(one_batch, _samples())
    g2 = _step_recording_grads(many, _samples())
    _assert_same_gradients(g1, g2)
    _assert_same_update_where_the_gradient_is_clear(before, (_params(one_batch), _params(many)), g1)
    m1 = _trainer(tiny_dir, micro_batch_tokens=10_000).train_step(_samples())
    m2 = _trainer(tiny_dir, micro_batch_tokens=20).train_step(_samples())
    assert (m1["train/micro_batches"], m2["train/micro_batches"]) == (1, 4)
    assert m1["train/loss"] == pytest.approx(m2["train/loss"], rel=ROUND_OFF)


def test_gradient_comparison_catches_a_wrong_accumulation(tiny_dir: Path) -> None:
    """The tolerance is tight enough to see a micro-batch scaled wrongly (the bug the test above guards)."""
    right = _step_recording_grads(_trainer(tiny_dir, micro_batch_tokens=20), _samples())
    wrong = {n: g * (1 + 1e-2) for n, g in right.items()}
    with pytest.raises(AssertionError, match="round-off allowance"):
        _assert_same_gradients(right, wrong)


def _layer_passes(trainer: TorchTrainer) -> list[int]:
    """Counts the forward passes of every decoder layer (hooks stay on the trainer's model)."""
    calls = [0]

    def count(*_: object) -> None:
        calls[0] += 1

    for layer in trainer.model.get_base_model().model.layers:
        layer.register_forward_pre_hook(count)  # the recompute stops before the layer returns
    return calls


def test_gradient_checkpointing_recomputes_layers_and_keeps_the_update(tiny_dir: Path) -> None:
    plain = _trainer(tiny_dir)
    checkpointed = _trainer(tiny_dir, gradient_checkpointing=True, compact_heap=True)
    plain_calls, checkpointed_calls = _layer_passes(plain), _layer_passes(checkpointed)
    before = _params(plain)
    g1 = _step_recording_grads(plain, _samples())
    g2 = _step_recording_grads(checkpointed, _samples())
    assert checkpointed_calls[0] == 2 * plain_calls[0] > 0  # each layer ran again in the backward pass
    _assert_same_gradients(g1, g2)
    _assert_same_update_where_the_gradient_is_clear(before, (_params(plain), _params(checkpointed)), g1)
    assert not any(m.training for m in checkpointed.model.modules() if isinstance(m, torch.nn.Dropout))


@pytest.fixture
def no_stop_request() -> Iterator[None]:
    """Forget any stop request a test makes (the flag is process-wide)."""
    stopping.clear()
    yield
    stopping.clear()


@pytest.mark.usefixtures("no_stop_request")
@pytest.mark.parametrize("layer", [0, 1])
def test_a_stop_request_ends_a_step_at_the_next_layer_and_changes_nothing(tiny_dir: Path, layer: int) -> None:
    """Asked to stop in layer 0's forward, the step ends before layer 1's; in layer 1's (the last), before
    the backward pass recomputes it. Either way no weight, gradient or step count changes."""
    trainer = _trainer(tiny_dir, gradient_checkpointing=True, micro_batch_tokens=10_000)
    calls = [0]

    def ask_to_stop(*_: object) -> None:  # runs after the trainer's own check on this layer
        calls[0] += 1
        stopping.request("SIGINT")

    hook = trainer.model.get_base_model().model.layers[layer].register_forward_pre_hook(ask_to_stop)
    later = _layer_passes(trainer)  # counts the passes that get past every check
    before = _params(trainer)
    with pytest.raises(stopping.Interrupted, match="stopped by SIGINT"):
        trainer.train_step(_samples())
    assert calls[0] == 1
    # layer 0's stop: layer 1 never ran; layer 1's: both ran forward, and the recompute of neither got past it
    assert later[0] == 1 + layer
    assert all(torch.equal(before[n], p) for n, p in _params(trainer).items())
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.step == 0
    hook.remove()
    stopping.clear()
    assert trainer.train_step(_samples())["train/tokens"] > 0  # the next step, without a stop, trains


def test_autocast_is_bfloat16_only_where_asked_and_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, f32 = torch.device("cpu"), ModelConfig()
    for bf16_cpu in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda bf16_cpu=bf16_cpu: bf16_cpu)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        auto = autocast_dtype(TrainerConfig(autocast="auto"), f32, cpu)
        assert auto == (torch.bfloat16 if bf16_cpu else None)
    assert autocast_dtype(TrainerConfig(autocast="bfloat16"), f32, cpu) == torch.bfloat16
    assert autocast_dtype(TrainerConfig(), f32, cpu) is None
    bf16_weights = ModelConfig(dtype="bfloat16")  # nothing to cast down to
    assert autocast_dtype(TrainerConfig(autocast="bfloat16"), bf16_weights, cpu) is None


def test_an_autocast_step_computes_in_bfloat16_and_keeps_the_float32_update(tiny_dir: Path) -> None:
    """The products run in bfloat16, the weights and gradients stay float32, and the gradient is the float32
    step's up to bfloat16 round-off (8 mantissa bits: ~0.4% per product, a few % after the model's layers)."""
    plain, mixed = _trainer(tiny_dir), _trainer(tiny_dir, autocast="bfloat16", gradient_checkpointing=True)
    seen: list[torch.dtype] = []
    layer = mixed.model.get_base_model().model.layers[0].mlp.down_proj
    layer.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    g1 = _step_recording_grads(plain, _samples())
    g2 = _step_recording_grads(mixed, _samples())
    assert seen
    assert set(seen) == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in mixed.model.parameters())
    assert g1.keys() == g2.keys()
    for name, ga in g1.items():
        gb = g2[name]
        assert gb.dtype == torch.float32
        assert (ga - gb).norm() <= 0.05 * ga.norm(), name


def test_accelerate_path_matches_the_plain_path(tiny_dir: Path) -> None:
    cfg = TrainerConfig(lr=1e-2, lora_rank=4, lora_alpha=8, micro_batch_tokens=20)
    plain = TorchTrainer(cfg, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0)
    accel = TorchTrainer(cfg, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0, use_accelerate=True)
    before = _params(plain)
    g1 = _step_recording_grads(plain, _samples())
    g2 = _step_recording_grads(accel, _samples())
    _assert_same_gradients(g1, g2)
    _assert_same_update_where_the_gradient_is_clear(before, (_params(plain), _params(accel)), g1)


def test_kl_reference_is_the_base_model(tiny_dir: Path) -> None:
    lora = _trainer(tiny_dir, kl_coef=0.5)
    assert lora.reference is None  # adapters disabled, no copy
    first = lora.train_step(_samples())
    second = lora.train_step(_samples())
    assert first["train/kl"] == pytest.approx(0.0, abs=1e-7)  # LoRA B starts at zero: policy == base
    assert second["train/kl"] > 0
    full = _trainer(tiny_dir, lora_rank=0, lr=1e-3, kl_coef=0.5)
    ref_before = {n: p.clone() for n, p in full.reference.named_parameters()}
    full.train_step(_samples())
    assert full.train_step(_samples())["train/kl"] > 0
    assert all(torch.equal(p, ref_before[n]) for n, p in full.reference.named_parameters())
    assert not _trainer(tiny_dir, lora_rank=0).reference  # no KL, no copy


def test_save_load_gives_identical_outputs_and_updates(tiny_dir: Path, tmp_path: Path) -> None:
    for rank in (4, 0):
        a = _trainer(tiny_dir, lora_rank=rank, lr=1e-3)
        a.train_step(_samples())
        a.save(tmp_path / f"ck{rank}")
        b = _trainer(tiny_dir, lora_rank=rank, lr=1e-3)
        b.load(tmp_path / f"ck{rank}")
        assert b.step == 1
        assert a.logprobs(_samples()[:2]) == b.logprobs(_samples()[:2])
        a.train_step(_samples())  # the optimiser state came back too: the next update is the same
        b.train_step(_samples())
        for x, y in zip(_params(a).values(), _params(b).values(), strict=True):
            assert torch.equal(x, y)
    with pytest.raises(ValueError, match="does not match"):
        _trainer(tiny_dir, lora_rank=8).load(tmp_path / "ck4")
    with pytest.raises(FileNotFoundError, match=r"TorchTrainer\.save"):
        _trainer(tiny_dir).load(tmp_path)


def test_exported_weights_reproduce_the_trainer_in_the_policy(tiny_dir: Path, tmp_path: Path) -> None:
    policy = HFPolicy(tiny_dir, device="cpu")
    for rank in (4, 0):
        trainer = _trainer(tiny_dir, lora_rank=rank, lr=1e-2)
        trainer.train_step(_samples())
        policy.load_weights(trainer.export_weights(tmp_path / f"export{rank}"))
        sample = _samples()[0]
        ids = torch.tensor([sample.tokens_T])
        with torch.no_grad():
            logits = policy.model(input_ids=ids).logits[0, :-1]
        got = torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None]).squeeze(1)
        want = torch.tensor(trainer.logprobs([sample])[0])
        assert (got - want).abs().max().item() < 1e-4  # merged LoRA vs unmerged: float round-off


def test_degenerate_batches(tiny_dir: Path) -> None:
    trainer = _trainer(tiny_dir)
    empty = TrainSample((1, 2, 3), (0, 0, 0), (0.0, 0.0, 0.0), 1.0, "agent")
    assert trainer.train_step([empty])["train/skipped"] == 1.0
    ragged = TrainSample((1, 2, 3), (0, 1, 1), (0.0, 0.0), 1.0, "agent")
    with pytest.raises(ValueError, match="differ in length"):
        trainer.train_step([ragged])


# -- the real embedded model ---------------------------------------------------------------------------------


def _chat_prompt(policy: HFPolicy, text: str) -> list[int]:
    return policy.template.render([{"role": "user", "content": text}], add_generation_prompt=True)


def _two_turn_samples(policy: HFPolicy, seed: int) -> list[TrainSample]:
    params = SamplingParams(temperature=0.7, top_p=0.95, max_tokens=12, seed=seed)
    streams = [
        TokenStream(policy.template, _chat_prompt(policy, q)) for q in ("What is 2 + 2?", "Name a colour.")
    ]
    for turn in range(2):  # two turns: the second prompt is the first stream plus a suffix render
        replies = asyncio.run(policy.sample([s.tokens_T for s in streams], params))
        for stream, reply in zip(streams, replies, strict=True):
            stream.add_completion(reply)
            if turn == 0:
                stream.add_messages([{"role": "user", "content": "Are you sure?"}])
    return [s.train_sample(advantage=1.0, role="agent") for s in streams]


def _max_diff(trainer: TorchTrainer, samples: list[TrainSample]) -> tuple[float, int]:
    diffs = [
        abs(recomputed - recorded)
        for sample, row in zip(samples, trainer.logprobs(samples), strict=True)
        for recomputed, recorded, m in zip(row, sample.sample_logprobs_T[1:], sample.mask_T[1:], strict=True)
        if m
    ]
    return max(diffs), len(diffs)


@pytest.mark.slow
def test_sampling_logprobs_match_the_trainer_recompute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = HFPolicy(resolve_model("embedded"), device="cpu")
    trainer = TorchTrainer(TrainerConfig(lr=1e-3, lora_rank=8), ModelConfig(device="cpu"))
    fresh, n = _max_diff(trainer, _two_turn_samples(policy, seed=0))
    trainer.train_step(_two_turn_samples(policy, seed=1))  # then after an update: merged LoRA in the policy
    policy.load_weights(trainer.export_weights(tmp_path / "adapter"))
    updated, _ = _max_diff(trainer, _two_turn_samples(policy, seed=2))
    with capsys.disabled():
        print(
            f"\nlogprob max abs diff sampler vs trainer ({n} tokens): {fresh:.2e}; after an update {updated:.2e}"
        )
    # Both are float32 raw-model log-softmaxes; KV-cached, left-padded decoding vs one full forward (and a
    # merged vs unmerged adapter) differ by round-off (~1e-5). A real mismatch (temperature-scaled values,
    # an off-by-one alignment, stale weights) is >= 0.01.
    assert fresh < 1e-3
    assert updated < 1e-3


@pytest.mark.slow
def test_grpo_steps_raise_a_toy_reward(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = HFPolicy(resolve_model("embedded"), device="cpu")
    trainer = TorchTrainer(TrainerConfig(lr=1e-3, lora_rank=8, lora_alpha=16), ModelConfig(device="cpu"))
    prompt = _chat_prompt(policy, "Answer yes or no: is the sky blue?")
    yes_ids = [policy.tokenizer.convert_tokens_to_ids(t) for t in ("Yes", "yes")]

    def reward(text: str) -> float:
        return float("yes" in re.findall(r"[a-z]+", text.lower()))

    def p_yes() -> float:  # exact probability that the reply starts with yes
        with torch.no_grad():
            logits = policy.model(input_ids=torch.tensor([prompt])).logits[0, -1]
        return float(torch.softmax(logits, -1)[yes_ids].sum())

    def sampled_reward(n: int, seed: int) -> float:
        replies = policy.generate([prompt] * n, SamplingParams(temperature=1.0, max_tokens=4, seed=seed))
        return statistics.mean(reward(c.text) for c in replies)

    before = (p_yes(), sampled_reward(16, seed=99))
    for step in range(2):
        replies = policy.generate([prompt] * 8, SamplingParams(temperature=1.0, max_tokens=4, seed=step))
        rewards = [reward(c.text) for c in replies]
        mean, std = statistics.mean(rewards), statistics.pstdev(rewards)
        samples = []
        for reply, r in zip(replies, rewards, strict=True):
            stream = TokenStream(policy.template, prompt)
            stream.add_completion(reply)
            stream.close()
            samples.append(stream.train_sample(advantage=(r - mean) / std if std else 0.0, role="agent"))
        trainer.train_step(samples)
        policy.load_weights(trainer.export_weights(tmp_path / "adapter"))
    after = (p_yes(), sampled_reward(16, seed=99))
    with capsys.disabled():
        print(
            f"\ntoy reward P(yes first) {before[0]:.3f} -> {after[0]:.3f}, sampled {before[1]} -> {after[1]}"
        )
    assert after[0] > before[0] + 0.2
    assert after[1] > before[1]
