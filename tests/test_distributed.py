"""Two-process training (accelerate launch, DDP on CPU/gloo) against one process; checkpoints across world sizes."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from distributed_worker import CFG, record_gradients, samples
from spade import training
from spade.config import CPU_TINY, ModelConfig, TrainConfig
from spade.rundir import RunDir
from spade.scripted.trainer import ScriptedTrainer
from spade.training import distributed, follow_run, make_trainer
from spade.training.checkpoint import STATE_FILE, rng_state
from spade.training.distributed import DistributedError
from spade.training.trainer import TorchTrainer

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]
EPS = torch.finfo(torch.float32).eps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_ranks(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One update and one checkpoint by two processes under the shipped DDP config; rank 0's record."""
    out = tmp_path_factory.mktemp("ddp")
    command = [sys.executable, "-m", "accelerate.commands.launch",
               "--config_file", str(ROOT / "configs/accelerate/ddp.yaml"), "--num_processes", "2",
               "--main_process_port", str(_free_port()), str(ROOT / "tests/distributed_worker.py"),
               str(tiny_dir), str(out)]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return out, torch.load(out / "rank0.pt", weights_only=False)


def _one_process(tiny_dir: Path) -> tuple[TorchTrainer, dict[str, torch.Tensor], dict[str, float]]:
    trainer = TorchTrainer(CFG, ModelConfig(model=str(tiny_dir), device="cpu"), seed=0)
    grads = record_gradients(trainer)
    metrics = trainer.train_step(samples())
    return trainer, grads, metrics


def _tolerance(reference: dict[str, torch.Tensor]) -> float:
    # Each gradient entry is a sum over the step's loss tokens of per-token terms, each computed through the
    # network with fp32 matmuls whose shapes (and so summation order) differ between 1 and 2 processes:
    # a relative error of a few eps per accumulated term, bounded here by tokens × 8 eps of the largest.
    tokens = sum(sum(s.mask_T[1:]) for s in samples())
    return 8 * tokens * EPS * max(g.abs().max().item() for g in reference.values())


@pytest.mark.slow
def test_two_processes_give_the_one_process_gradient(
    tiny_dir: Path, two_ranks: tuple[Path, dict[str, Any]]
) -> None:
    _, record = two_ranks
    _, grads, metrics = _one_process(tiny_dir)
    assert record["world"] == 2
    assert set(record["grads"]) == set(grads)
    tol = _tolerance(grads)
    worst = max((record["grads"][n] - g).abs().max().item() for n, g in grads.items())
    print(f"max |grad(2 procs) - grad(1 proc)| = {worst:.3e} (tolerance {tol:.3e})")
    assert worst <= tol
    assert any(g.abs().max().item() > 1e3 * tol for g in grads.values())  # the comparison is not vacuous
    assert record["metrics"]["train/tokens"] == metrics["train/tokens"]  # token mean over both ranks


@pytest.mark.slow
def test_checkpoint_of_two_processes_loads_in_one(
    tiny_dir: Path, two_ranks: tuple[Path, dict[str, Any]]
) -> None:
    out, record = two_ranks
    reference, grads, _ = _one_process(tiny_dir)
    loaded = TorchTrainer(CFG, ModelConfig(model=str(tiny_dir), device="cpu"), seed=1)
    loaded.load(out / "ckpt")
    assert loaded.step == 1
    for name, param in loaded._trainable():
        assert torch.equal(param, record["params"][name]), name
    # The Adam moments came back keyed by name: after one step exp_avg = (1 - beta1) × gradient.
    by_param = {id(p): n for n, p in loaded._trainable()}
    tol = _tolerance(grads)
    for p, state in loaded.optimizer.state.items():
        want = reference.optimizer.state[dict(reference._trainable())[by_param[id(p)]]]["exp_avg"]
        assert (state["exp_avg"] - want).abs().max().item() <= tol
    assert (out / "ckpt" / "weights" / "adapter_config.json").is_file()
    assert loaded.train_step(samples())["train/tokens"] > 0  # and it trains on


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu-check)")
def test_cuda_step_matches_cpu_and_its_checkpoint_loads_on_cpu(tiny_dir: Path, tmp_path: Path) -> None:
    cpu, cpu_grads, _ = _one_process(tiny_dir)
    cuda = TorchTrainer(CFG, ModelConfig(model=str(tiny_dir), device="cuda"), seed=0)
    grads = record_gradients(cuda)
    cuda.train_step(samples())
    # CUDA kernels (TF32 off by default for fp32 matmuls in torch) sum in another order than CPU ones.
    tol = _tolerance(cpu_grads)
    assert max((grads[n].cpu() - g).abs().max().item() for n, g in cpu_grads.items()) <= tol
    cuda.save(tmp_path / "ckpt")
    cpu.load(tmp_path / "ckpt")
    for name, param in cpu._trainable():
        assert torch.equal(param, dict(cuda._trainable())[name].cpu()), name


def test_scripted_backend_refuses_a_multi_process_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DistributedError, match="scripted backend has no multi-process trainer"):
        make_trainer(TrainConfig(model=ModelConfig(backend="scripted")))


def test_a_follower_rank_builds_the_run_trainer_and_follows_rank_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[TrainConfig, bool]] = []

    def torch_trainer(cfg: TrainConfig, *, use_accelerate: bool) -> ScriptedTrainer:
        built.append((cfg, use_accelerate))
        return ScriptedTrainer()

    monkeypatch.setattr(training, "_trainer", torch_trainer)
    monkeypatch.setattr(
        distributed, "_broadcast", lambda op, arg=None: ("stop", None)
    )  # rank 0 stops at once
    cfg = TrainConfig(runs_dir=tmp_path, name="run", model=ModelConfig(backend="hf"))
    assert follow_run(cfg, resume=False).root == cfg.run_dir
    assert built == [(cfg, True)]


def test_format_1_checkpoints_still_load(tiny_dir: Path, tmp_path: Path) -> None:
    old, _, _ = _one_process(tiny_dir)  # a checkpoint as format 1 wrote it: optimiser keyed by index
    torch.save({"format": 1, "step": 1, "trainable": {n: p.detach().clone() for n, p in old._trainable()},
                "optimizer": old.optimizer.state_dict(), "rng": rng_state()}, tmp_path / STATE_FILE)  # fmt: skip
    new = TorchTrainer(CFG, ModelConfig(model=str(tiny_dir), device="cpu"), seed=1)
    new.load(tmp_path)
    for (name, a), (_, b) in zip(old._trainable(), new._trainable(), strict=True):
        assert torch.equal(a, b), name
    old.train_step(samples())
    new.train_step(samples())
    for (name, a), (_, b) in zip(old._trainable(), new._trainable(), strict=True):
        assert torch.equal(a, b), name  # same Adam moments: same next update


# -- launches of `spade train`: every one ends ---------------------------------------------------------------


def _launch(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    """`accelerate launch --config_file configs/accelerate/ddp.yaml --num_processes 2 -m spade.cli train ARGS`
    as docs/scaling.md gives it; the finished launcher and its seconds (no speed is asserted)."""
    command = [sys.executable, "-m", "accelerate.commands.launch",
               "--config_file", str(ROOT / "configs/accelerate/ddp.yaml"), "--num_processes", "2",
               "--main_process_port", str(_free_port()), "-m", "spade.cli", "train", *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return done, time.monotonic() - started


@pytest.mark.parametrize(
    ("flags", "refusal"),
    [
        (
            [],
            "an in-process vllm engine",
        ),  # the documented CPU launch with cpu-tiny's engine: rank 1 waited for ever
        (["--model.backend", "scripted"], "the scripted backend has no multi-process trainer"),
    ],
)
def test_a_launch_that_cannot_train_ends_on_every_rank_with_the_fix(
    tmp_path: Path, flags: list[str], refusal: str
) -> None:
    """Every rank refuses before it starts anything (no model loads, no rank waits for another) with exit 2,
    so the launcher ends, and the message says what to use instead of "run the same command again"."""
    done, seconds = _launch("--model.device", "cpu", "--preset", "cpu-tiny", "--steps", "1", "--model.threads",
                            "1", "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0", *flags,
                            "--runs-dir", str(tmp_path), timeout=300)  # fmt: skip
    print(f"launch exit {done.returncode} after {seconds:.1f} s")
    assert done.returncode != 0
    refusals = [ln for ln in done.stderr.splitlines() if ln.startswith("spade train: ")]
    assert refusals, done.stderr[-3000:]  # the first rank to refuse; the launcher may end the other first
    assert all(refusal in ln and "--model.backend" in ln for ln in refusals), refusals
    assert re.search(r"exitcode\s*:\s*2\b", done.stderr), done.stderr[
        -3000:
    ]  # a setup error, not a failed run
    assert "run the same command again" not in done.stderr
    assert not any(tmp_path.iterdir())  # nothing was written


def test_a_launch_checks_the_engine_and_the_trainers_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    in_process = CPU_TINY
    assert (in_process.model.backend, in_process.model.vllm.in_process) == ("vllm", True)
    with pytest.raises(DistributedError, match=r"in-process vllm engine .* add --model.backend hf"):
        distributed.check_launch(in_process)
    distributed.check_launch(TrainConfig(model=ModelConfig(backend="hf")))

    class Alone:  # a trainer whose accelerator found a process group of one (an engine made it first)
        accelerator = type("Accelerator", (), {"num_processes": 1})()

    with pytest.raises(DistributedError, match="joined a process group of 1 process"):
        distributed.check_world(Alone())


@pytest.mark.slow
def test_a_two_rank_launch_of_spade_train_runs_to_its_end(tiny_dir: Path, tmp_path: Path) -> None:
    """The smallest real run under the documented CPU launch (hf engine, tiny model, one step of the seed
    games: the tiny model's 2048 positions hold no design prompt): both ranks end, rank 0 with the run's
    summary and rank 1 once rank 0 released it."""
    done, seconds = _launch("--model.device", "cpu", "--preset", "cpu-tiny", "--steps", "1", "--model.threads",
                            "1", "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0",
                            "--model.backend", "hf", "--model.model", str(tiny_dir), "--mode", "fixed_pool",
                            "--runs-dir", str(tmp_path), "--name", "ddp", timeout=900)  # fmt: skip
    print(f"launch exit {done.returncode} after {seconds:.1f} s")
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"Run finished: {tmp_path / 'ddp'}" in done.stdout
    assert "rank 1 of 2: rank 0 ended the run after" in done.stdout
    assert len(RunDir(tmp_path / "ddp").read_metrics()) == 1
