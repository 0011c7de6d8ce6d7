"""The openai backend: fault handling against a misbehaving stand-in process, the real path against vLLM.

Stand-in tests (fast) start ``tests/openai_standin.py`` as a process in a given failure mode. Slow tests use
the session's real vLLM OpenAI server (``vllm_server`` fixture in conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from spade.backends import make_policy
from spade.backends.embedded import resolve_model
from spade.backends.openai_parse import completion_from_choice
from spade.backends.openai_server import ChatReply, OpenAIPolicy, RequestFailedError
from spade.backends.vllm_server import ServerProcess, free_port
from spade.config import ModelConfig, OpenAIConfig
from spade.types import Completion, SamplingParams

STANDIN = Path(__file__).with_name("openai_standin.py")
PING = {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@contextmanager
def standin(
    mode: str, arg: float | None = None, *, port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A stand-in server process (on ``port``, default a free one); yields (base URL, process), kills it after."""
    port = port or free_port()
    cmd = [sys.executable, str(STANDIN), str(port), mode, *([] if arg is None else [str(arg)])]
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"stand-in server ({mode}) did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1", process
    finally:
        process.kill()
        process.wait(10)


def stats(base_url: str) -> dict[str, int]:
    return dict(httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=5).json())


def policy(base_url: str, **kw: object) -> OpenAIPolicy:
    """A client of the stand-in; its timeout is generous (a busy machine answers slowly) unless the test is
    about timing out."""
    options: dict[str, object] = {"timeout_s": 20.0, "retries": 1, "backoff_s": 0.05, "model": "m"} | kw
    return OpenAIPolicy(base_url, **options)  # type: ignore[arg-type]


PARAMS = SamplingParams(max_tokens=4, seed=0)

# -- failures are data, never a hang ---------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_unreachable_server_gives_error_completions() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    out = asyncio.run(policy(url).sample([[1, 2], [3]], PARAMS))
    assert [c.finish_reason for c in out] == ["error", "error"]
    assert all(
        "failed after 2 attempts" in (c.error or "") and "ConnectError" in (c.error or "") for c in out
    )
    assert [c.prompt_tokens for c in out] == [2, 1]


@pytest.mark.timeout(60)
def test_hanging_server_times_out_on_every_attempt() -> None:
    with standin("hang") as (url, _):
        # 2 s per attempt: on a busy machine the stand-in may take more than a fraction of a second to accept
        out = asyncio.run(policy(url, timeout_s=2.0).sample([[1]], PARAMS))
        assert stats(url)["posts"] == 2
    assert out[0].finish_reason == "error"
    assert "no answer within 2 s" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_server_closing_connections_is_retried_then_reported() -> None:
    with standin("close") as (url, _):
        out = asyncio.run(policy(url, retries=2).sample([[1]], PARAMS))
        assert stats(url)["posts"] == 3
    assert out[0].finish_reason == "error"
    assert "failed after 3 attempts" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_server_killed_mid_request() -> None:
    with standin("ok", 30) as (url, process):

        async def run() -> list[Completion]:
            task = asyncio.ensure_future(policy(url, timeout_s=20.0).sample([[1], [2]], PARAMS))
            await asyncio.sleep(0.5)
            process.kill()  # both requests are in flight, waiting on the answer
            return await task

        out = asyncio.run(run())
    assert [c.finish_reason for c in out] == ["error", "error"]
    assert all("attempts" in (c.error or "") for c in out)


@pytest.mark.timeout(60)
def test_transient_5xx_is_retried_with_backoff() -> None:
    with standin("flaky", 2) as (url, _):
        out = asyncio.run(policy(url, retries=3).sample([[1, 2, 3]], PARAMS))
        assert stats(url)["posts"] == 3
    assert out[0] == Completion("hi", (5, 6), (-0.5, -0.25), "stop", prompt_tokens=3)
    with standin("flaky", 5) as (url, _):
        out = asyncio.run(policy(url, retries=1).sample([[1]], PARAMS))
    assert "HTTP 503: warming up" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_client_errors_are_not_retried_and_carry_the_server_message() -> None:
    with standin("bad_request") as (url, _):
        out = asyncio.run(policy(url, retries=3).sample([[1]], PARAMS))
        assert stats(url)["posts"] == 1
    assert out[0].finish_reason == "error"
    assert "HTTP 400" in (out[0].error or "")
    assert "maximum context length" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_non_json_answer_is_an_error() -> None:
    with standin("garbage") as (url, _):
        out = asyncio.run(policy(url).sample([[1]], PARAMS))
    assert "non-JSON" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_concurrency_limit_holds() -> None:
    with standin("ok", 0.3) as (url, _):
        out = asyncio.run(policy(url, max_concurrency=2).sample([[i] for i in range(6)], PARAMS))
        seen = stats(url)
    assert all(c.finish_reason == "stop" for c in out)
    assert seen["posts"] == 6
    assert seen["max_in_flight"] == 2


@pytest.mark.timeout(60)
def test_model_name_is_looked_up_when_not_given() -> None:
    with standin("ok") as (url, _):
        pol = policy(url, model="")
        asyncio.run(pol.sample([[1]], PARAMS))
    assert pol.model == "standin"


def test_prompt_over_the_local_context_window_never_leaves_the_process() -> None:
    pol = policy(f"http://127.0.0.1:{free_port()}/v1", max_context=8)
    out = asyncio.run(pol.sample([list(range(8))], PARAMS))
    assert out[0].finish_reason == "error"
    assert "context window is 8" in (out[0].error or "")


@pytest.mark.timeout(60)
def test_chat_reports_malformed_server_tool_calls() -> None:
    with standin("ok") as (url, _):
        [reply] = asyncio.run(policy(url).chat([[{"role": "user", "content": "hi"}]], PARAMS, [PING]))
    assert reply.completion.finish_reason == "stop"
    assert [(c.name, c.arguments, c.id) for c in reply.tool_calls] == [("ping", {}, "c1")]
    assert len(reply.tool_call_errors) == 1
    assert "arguments are not JSON" in reply.tool_call_errors[0]


@pytest.mark.timeout(60)
def test_load_weights_errors_say_how_to_fix(tmp_path: Path) -> None:
    with standin("no_lora") as (url, _):
        pol = policy(url)
        with pytest.raises(FileNotFoundError, match=r"neither adapter_config\.json"):
            pol.load_weights(tmp_path)
        (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8}))
        with pytest.raises(RequestFailedError, match="VLLM_ALLOW_RUNTIME_LORA_UPDATING"):
            pol.load_weights(tmp_path)
    assert pol.model == "m"  # a failed load leaves the served model as it was


def test_bad_base_url_is_rejected() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAIPolicy("127.0.0.1:8000")


# -- response parsing ------------------------------------------------------------------------------------


def test_completion_parsing_variants() -> None:
    lp = {"tokens": ["token_id:7", "token_id:8"], "token_logprobs": [-1.0, None]}
    assert completion_from_choice({"text": "a", "finish_reason": "length", "logprobs": lp}, 2) == Completion(
        "a", (7, 8), (-1.0, 0.0), "length", 2
    )
    plain = completion_from_choice({"text": "a", "finish_reason": "stop", "logprobs": {"tokens": ["a"]}}, 1)
    assert (plain.token_ids_T, plain.logprobs_T) == ((), ())
    odd = completion_from_choice({"text": "a", "finish_reason": "abort"}, 1)
    assert odd.finish_reason == "error"
    assert "abort" in (odd.error or "")


def test_make_policy_builds_the_openai_backend() -> None:
    cfg = ModelConfig(
        backend="openai",
        openai=OpenAIConfig(base_urls=("http://127.0.0.1:9/v1",), served_model="x"),
        max_context=512,
    )
    pol = make_policy(cfg)
    assert isinstance(pol, OpenAIPolicy)
    assert pol.model == "x"
    assert pol.max_context == 512
    assert pol.template.render([{"role": "user", "content": "hi"}], add_generation_prompt=True)


# -- the real server (slow) ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(vllm_server: ServerProcess) -> OpenAIPolicy:
    openai = OpenAIConfig(base_urls=(vllm_server.base_url,), request_timeout_s=120)
    cfg = ModelConfig(backend="openai", openai=openai, max_context=0)
    pol = make_policy(cfg)
    assert isinstance(pol, OpenAIPolicy)
    return pol


def prompt(pol: OpenAIPolicy, text: str) -> list[int]:
    return pol.template.render([{"role": "user", "content": text}], add_generation_prompt=True)


GREEDY = SamplingParams(max_tokens=10, temperature=0.0)


@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_real_token_in_token_out(real: OpenAIPolicy) -> None:
    p = prompt(real, "Name a colour.")
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=7)
    first = asyncio.run(real.sample([p, p, p], params))
    again = asyncio.run(real.sample([p, p, p], params))
    # seeded sampling repeats the tokens; logprobs may differ by float round-off between CPU batches
    assert [c.token_ids_T for c in again] == [c.token_ids_T for c in first]
    for a, b in zip(again, first, strict=True):
        assert a.logprobs_T == pytest.approx(b.logprobs_T, abs=1e-3)
    assert len({c.token_ids_T for c in first}) > 1  # equal prompts of a group draw different samples
    for c in first:
        assert c.finish_reason in ("stop", "length")
        assert 0 < len(c.token_ids_T) <= 12
        assert len(c.logprobs_T) == len(c.token_ids_T)
        assert all(lp <= 0.0 for lp in c.logprobs_T)
        assert c.prompt_tokens == len(p)
        assert c.text == real.template.decode(c.token_ids_T).removesuffix("<|im_end|>")


@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_real_stop_string_and_over_long_prompt(real: OpenAIPolicy) -> None:
    p = prompt(real, "Tell me about the sea.")
    [free] = asyncio.run(real.sample([p], SamplingParams(max_tokens=20, temperature=0.0)))
    word = free.text.split()[3]
    stopped, too_long = asyncio.run(
        real.sample([p, [1] * 3000], SamplingParams(max_tokens=20, temperature=0.0, stop=(word,)))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(word)]
    decode = real.template.decode
    assert word in decode(stopped.token_ids_T)  # ids run up to the token completing the stop string
    assert word not in decode(stopped.token_ids_T[:-1])
    assert too_long.finish_reason == "error"
    assert "HTTP 400" in (too_long.error or "")
    assert "maximum context length" in (too_long.error or "")


@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_real_chat_with_server_and_text_tool_calls(real: OpenAIPolicy) -> None:
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    bad = '<tool_call>{"name": "get_weather", "arguments": {"city": </tool_call>'
    params = SamplingParams(max_tokens=100, temperature=0.0)

    def forced(text: str) -> dict[str, object]:  # the small model would rarely call a tool on its own
        return {"structured_outputs": {"choice": [text]}}

    async def run() -> list[list[ChatReply]]:
        return list(
            await asyncio.gather(
                real.chat([ask], params),
                real.chat([ask], params, [WEATHER], extra=forced(call)),  # the server's parser reads it
                real.chat([ask], params, [WEATHER], tool_choice="none", extra=forced(call)),  # spade's parser
                real.chat([ask], params, [WEATHER], tool_choice="none", extra=forced(bad)),
            )
        )

    [plain], [server], [text], [broken] = asyncio.run(run())
    assert plain.completion.finish_reason in ("stop", "length")
    assert plain.tool_calls == ()
    assert len(plain.completion.token_ids_T) == len(plain.completion.logprobs_T) > 0
    assert plain.completion.prompt_tokens > 0
    for reply in (server, text):
        assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_weather", {"city": "Oslo"})]
        assert reply.tool_call_errors == ()
    assert server.tool_calls[0].id  # the server names its calls
    assert broken.tool_calls == ()
    assert "not valid JSON" in broken.tool_call_errors[0]


@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_real_weight_sync_adapter_then_full_folder(
    real: OpenAIPolicy, adapters: tuple[Path, Path, Path]
) -> None:
    first, second, merged = adapters
    p = prompt(real, "Say something.")
    [base] = asyncio.run(real.sample([p], GREEDY))
    real.load_weights(first)
    [tuned] = asyncio.run(real.sample([p], GREEDY))
    assert real.model == "spade-adapter-1"
    assert tuned.token_ids_T != base.token_ids_T
    real.load_weights(second)
    listed = {m["id"] for m in httpx.get(real.base_url + "/models", timeout=10).json()["data"]}
    assert listed == {"base", "spade-adapter-2"}  # the first adapter was unloaded
    real.load_weights(merged)  # full weights = base + first adapter, merged
    [full] = asyncio.run(real.sample([p], GREEDY))
    assert real.model == "base"
    assert full.token_ids_T[:4] == tuned.token_ids_T[:4]
    real.load_weights(resolve_model("embedded"))  # back to the base weights, prefix cache reset
    [restored] = asyncio.run(real.sample([p], GREEDY))
    assert restored.token_ids_T == base.token_ids_T


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two random rank-8 LoRA adapters of the embedded model and the first one merged into a full folder."""
    import torch  # noqa: PLC0415 -- heavy, slow tests only
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    from spade.backends.merge import merge_adapter  # noqa: PLC0415

    root = tmp_path_factory.mktemp("adapters")
    base_dir = resolve_model("embedded")
    out = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir), config)
        model.save_pretrained(root / f"adapter{seed}")
        out.append(root / f"adapter{seed}")
    merged = merge_adapter(base_dir, out[0], root / "merged")
    return out[0], out[1], merged
