"""The hf Policy and model resolution: token accounting, stops, limits, seeds, coalescing, weight loading."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from spade.backends.embedded import (
    MANIFEST,
    ModelNotFoundError,
    convert_gguf,
    embedded_gguf,
    resolve_model,
    write_tiny_model,
)
from spade.backends.hf import HFPolicy
from spade.types import Completion, Policy, SamplingParams

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> HFPolicy:
    return HFPolicy(tiny_dir, device="cpu", max_context=96, max_batch=4, seed=0)


def _prompt(policy: HFPolicy, text: str) -> list[int]:
    return policy.template.render([{"role": "user", "content": text}], add_generation_prompt=True)


def _raw_logprobs(policy: HFPolicy, prompt: list[int], completion: Completion) -> torch.Tensor:
    ids = torch.tensor([prompt + list(completion.token_ids_T)])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    picked = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion.token_ids_T)[:, None])
    return picked.squeeze(1)


# -- model resolution ----------------------------------------------------------------------------------------


def test_resolve_model_accepts_embedded_and_folders_and_rejects_the_rest(
    tiny_dir: Path, tmp_path: Path
) -> None:
    folder = resolve_model("embedded")
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["source_sha256"][:12] in folder.name
    assert (folder / "config.json").is_file()
    assert resolve_model(tiny_dir) == tiny_dir
    with pytest.raises(ModelNotFoundError, match="not downloaded"):
        resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        resolve_model(tmp_path / "empty")


def test_conversion_is_reused_and_respects_the_cache_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A cache root holding a folder with a matching manifest is used as is (no second conversion).
    digest_folder = resolve_model("embedded")
    root = tmp_path / "cache"
    target = root / "models" / digest_folder.name
    target.mkdir(parents=True)
    (target / MANIFEST).write_text((digest_folder / MANIFEST).read_text())
    monkeypatch.setenv("SPADE_CACHE_DIR", str(root))
    assert convert_gguf(embedded_gguf()) == target
    assert convert_gguf(embedded_gguf(), cache_dir=digest_folder.parent.parent) == digest_folder


def test_parallel_conversions_convert_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from spade.backends import embedded  # noqa: PLC0415 -- patch the module's converter

    calls: list[Path] = []

    def fake_write(gguf: Path, digest: str, out: Path) -> None:
        calls.append(out)
        time.sleep(0.2)  # a slow conversion that others must wait for, not repeat
        (out / "config.json").write_text("{}")
        (out / MANIFEST).write_text(json.dumps({"format": embedded.MANIFEST_FORMAT, "source_sha256": digest}))

    monkeypatch.setattr(embedded, "_write_converted", fake_write)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"not really a gguf")
    with ThreadPoolExecutor(4) as pool:
        folders = list(pool.map(lambda _: convert_gguf(gguf, cache_dir=tmp_path / "c"), range(4)))
    assert len(set(folders)) == 1
    assert len(calls) == 1
    assert calls[0] != folders[0]  # written under a temporary name, then renamed into place
    assert [p.name for p in (tmp_path / "c" / "models").iterdir() if not p.name.endswith(".lock")] == [
        folders[0].name
    ]


# -- sampling ------------------------------------------------------------------------------------------------


def test_sample_returns_exact_tokens_and_raw_logprobs(tiny: HFPolicy) -> None:
    assert isinstance(tiny, Policy)
    prompts = [_prompt(tiny, "hi"), _prompt(tiny, "a longer question about things")]
    out = asyncio.run(tiny.sample(prompts, SamplingParams(temperature=0.8, max_tokens=12, seed=3)))
    for prompt, completion in zip(prompts, out, strict=True):
        assert completion.finish_reason in ("stop", "length")
        assert len(completion.token_ids_T) == len(completion.logprobs_T) > 0
        assert completion.prompt_tokens == len(prompt)
        diff = (_raw_logprobs(tiny, prompt, completion) - torch.tensor(completion.logprobs_T)).abs().max()
        assert diff.item() < 1e-4  # left padding and KV cache vs one plain forward: float32 round-off only
        if completion.finish_reason == "length":
            assert len(completion.token_ids_T) == 12


def test_seeded_calls_are_reproducible_and_unseeded_calls_vary(tiny: HFPolicy) -> None:
    prompt = [_prompt(tiny, "tell me")]
    seeded = SamplingParams(temperature=1.0, max_tokens=10, seed=7)
    first = asyncio.run(tiny.sample(prompt, seeded))[0]
    assert asyncio.run(tiny.sample(prompt, seeded))[0].token_ids_T == first.token_ids_T
    free = SamplingParams(temperature=1.0, max_tokens=10)
    draws = {asyncio.run(tiny.sample(prompt, free))[0].token_ids_T for _ in range(4)}
    assert len(draws) > 1


def test_greedy_is_argmax(tiny: HFPolicy) -> None:
    prompt = _prompt(tiny, "x")
    completion = asyncio.run(tiny.sample([prompt], SamplingParams(temperature=0.0, max_tokens=1)))[0]
    with torch.no_grad():
        logits = tiny.model(input_ids=torch.tensor([prompt])).logits[0, -1]
    assert completion.token_ids_T[0] == int(logits.argmax())


def test_prompt_longer_than_context_is_an_error_not_a_hang(tiny: HFPolicy) -> None:
    too_long = _prompt(tiny, "word " * 200)
    ok = _prompt(tiny, "hi")
    out = asyncio.run(tiny.sample([too_long, ok, []], SamplingParams(max_tokens=4)))
    assert out[0].finish_reason == "error"
    assert out[0].error is not None
    assert "context window is 96" in out[0].error
    assert out[1].finish_reason in ("stop", "length")
    assert out[2].finish_reason == "error"


def test_reply_is_cut_at_the_context_window(tiny: HFPolicy) -> None:
    prompt = _prompt(tiny, "word " * 30)
    room = tiny.max_context - len(prompt)
    assert 0 < room < 40
    completion = tiny.generate([prompt], SamplingParams(max_tokens=500, seed=1))[0]
    assert len(completion.token_ids_T) <= room


def test_finish_cuts_at_stop_strings_and_stop_tokens(tiny: HFPolicy) -> None:
    ids = tiny.template.encode("Answer: 42\nMore text")
    logprobs = [-0.1] * len(ids)
    cut = tiny._finish(ids, logprobs, 100, SamplingParams(stop=("\n",)), prompt_len=5)
    assert cut.text == "Answer: 42"
    assert cut.finish_reason == "stop"
    assert (
        tiny.template.decode(cut.token_ids_T) == "Answer: 42\n"
    )  # ids keep the token that completed the stop
    assert len(cut.logprobs_T) == len(cut.token_ids_T)
    eos = tiny.template.end_of_turn_id
    assert eos is not None
    ended = tiny._finish([*ids[:3], eos, *ids[3:]], [*logprobs, 0.0], 100, SamplingParams(), prompt_len=5)
    assert ended.token_ids_T == (*ids[:3], eos)
    assert ended.text == tiny.template.decode(ids[:3])
    assert ended.finish_reason == "stop"
    length = tiny._finish(ids, logprobs, 4, SamplingParams(), prompt_len=5)
    assert (len(length.token_ids_T), length.finish_reason) == (4, "length")


def test_stop_strings_end_generation(tiny: HFPolicy) -> None:
    # A stop string that every reply contains (one character of the commonest tokens) ends it early.
    prompt = _prompt(tiny, "x")
    free = tiny.generate([prompt], SamplingParams(max_tokens=20, seed=5))[0]
    text = tiny.template.decode(free.token_ids_T)
    stop = text[len(text) // 2]
    cut = tiny.generate([prompt], SamplingParams(max_tokens=20, seed=5, stop=(stop,)))[0]
    assert cut.finish_reason == "stop"
    assert stop in tiny.template.decode(cut.token_ids_T)
    assert stop not in cut.text
    assert free.token_ids_T[: len(cut.token_ids_T)] == cut.token_ids_T


def test_concurrent_calls_are_coalesced(tiny: HFPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    batches: list[int] = []
    real = tiny.generate

    def counting(prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        batches.append(len(prompts))
        return real(prompts, params)

    monkeypatch.setattr(tiny, "generate", counting)
    params = SamplingParams(max_tokens=3)

    async def many() -> list[list[Completion]]:
        return await asyncio.gather(*(tiny.sample([_prompt(tiny, str(i))], params) for i in range(6)))

    out = asyncio.run(many())
    assert [len(o) for o in out] == [1] * 6
    assert sum(batches) == 6
    assert len(batches) < 6  # several plays shared a generate batch


def test_engine_failure_becomes_error_completions(tiny: HFPolicy, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(tiny, "generate", boom)
    out = asyncio.run(tiny.sample([[1, 2, 3]], SamplingParams()))
    assert out[0].finish_reason == "error"
    assert out[0].error is not None
    assert "out of memory" in out[0].error


# -- weights -------------------------------------------------------------------------------------------------


def test_load_weights_full_folder_and_lora_adapter(tiny_dir: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415 -- test-only import

    policy = HFPolicy(tiny_dir, device="cpu", max_context=96)
    prompt = _prompt(policy, "hi")
    probe = Completion("", tuple(policy.template.encode(" hello there")), (), "stop")
    before = _raw_logprobs(policy, prompt, probe)

    other = write_tiny_model(tmp_path / "other", seed=1)
    policy.load_weights(other)
    assert not torch.allclose(_raw_logprobs(policy, prompt, probe), before)
    policy.load_weights(tiny_dir)
    assert torch.allclose(_raw_logprobs(policy, prompt, probe), before)

    peft_model = get_peft_model(
        HFPolicy(tiny_dir, device="cpu").model,
        LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False),
    )
    peft_model.save_pretrained(tmp_path / "adapter")
    with torch.no_grad():
        ids = torch.tensor([prompt + list(probe.token_ids_T)])
        expected = torch.log_softmax(peft_model(input_ids=ids).logits[0, len(prompt) - 1 : -1], -1)
    expected = expected.gather(1, torch.tensor(probe.token_ids_T)[:, None]).squeeze(1)
    for _ in range(2):  # loading twice must not stack the adapter
        policy.load_weights(tmp_path / "adapter")
        assert torch.allclose(_raw_logprobs(policy, prompt, probe), expected, atol=1e-5)
    with pytest.raises(FileNotFoundError, match="neither"):
        policy.load_weights(tmp_path)


# -- the real embedded model ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_embedded_model_samples_chat_replies_with_matching_logprobs() -> None:
    policy = HFPolicy(resolve_model("embedded"), device="cpu", max_batch=2)
    prompts = [_prompt(policy, "What is 2 + 2?"), _prompt(policy, "Name a colour.")]
    out = asyncio.run(policy.sample(prompts, SamplingParams(temperature=0.7, max_tokens=16, seed=0)))
    for prompt, completion in zip(prompts, out, strict=True):
        assert completion.text.strip()
        diff = (_raw_logprobs(policy, prompt, completion) - torch.tensor(completion.logprobs_T)).abs().max()
        assert diff.item() < 1e-3
