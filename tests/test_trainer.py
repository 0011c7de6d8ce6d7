"""The torch Trainer: what changes, what stays frozen, accumulation, checkpoints, export to the Policy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import torch

from spade.backends.embedded import write_tiny_model
from spade.backends.hf import HFPolicy
from spade.backends.trainer import TorchTrainer, pack_micro_batches
from spade.config import ModelConfig, TrainerConfig
from spade.types import TrainSample


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    # Tiny matmuls on a shared 2-core machine: one thread avoids OpenMP spin contention (4x faster here).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny"))


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


def test_micro_batching_does_not_change_the_update(tiny_dir: Path) -> None:
    one_batch = _trainer(tiny_dir, micro_batch_tokens=10_000)
    many = _trainer(tiny_dir, micro_batch_tokens=20)
    m1 = one_batch.train_step(_samples())
    m2 = many.train_step(_samples())
    assert m1["train/micro_batches"] == 1
    assert m2["train/micro_batches"] == 4
    assert m1["train/loss"] == pytest.approx(m2["train/loss"], abs=1e-6)
    for (name, a), b in zip(_params(one_batch).items(), _params(many).values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6), name


def test_accelerate_path_matches_the_plain_path(tiny_dir: Path) -> None:
    cfg = TrainerConfig(lr=1e-2, lora_rank=4, lora_alpha=8, micro_batch_tokens=20)
    plain = TorchTrainer(cfg, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0)
    accel = TorchTrainer(cfg, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0, use_accelerate=True)
    assert plain.train_step(_samples())["train/loss"] == pytest.approx(
        accel.train_step(_samples())["train/loss"]
    )
    for a, b in zip(_params(plain).values(), _params(accel).values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)


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


def _flat(xs: Sequence[Sequence[float]]) -> list[float]:
    return [x for row in xs for x in row]
