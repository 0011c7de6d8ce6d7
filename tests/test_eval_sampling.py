"""``spade eval --top-k``: from the command line through EvalOptions and SamplingParams to each backend's call."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import tyro

from eval_policy_double import ReplyPolicy
from spade.backends.openai_server import OpenAIPolicy, top_k_refusal
from spade.cli.eval import EvalArgs, options
from spade.config import EvalOptions, ModelConfig, OpenAIConfig
from spade.evals.base import EvalError
from spade.evals.envs import play_config
from spade.evals.policies import PolicySource, load_policy
from spade.evals.runner import SuiteRequest, evaluate
from spade.types import Completion, SamplingParams

AIME = Path(__file__).parent / "fixtures" / "benchdata" / "aime.jsonl"


class ParamsPolicy(ReplyPolicy):
    """A reply double that keeps the sampling parameters of every call."""

    def __init__(self) -> None:
        super().__init__(lambda prompt: "\\boxed{0}")
        self.params: list[SamplingParams] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        self.params.append(params)
        return await super().sample(prompts, params)


def _opts(*argv: str) -> EvalOptions:
    return options(tyro.cli(EvalArgs, args=list(argv)))


def test_top_k_flag_reaches_the_options_and_the_sampling_params() -> None:
    opts = _opts("aime", "--top-k", "20", "--top-p", "0.95", "--temperature", "0.6")
    assert opts.top_k == 20
    assert opts.sampling() == SamplingParams(temperature=0.6, top_p=0.95, top_k=20, max_tokens=512)
    assert opts.sampling(stop=("x",)).stop == ("x",)
    assert _opts("aime").sampling().top_k == 0  # off unless asked for
    assert play_config(opts).top_k == 20  # the envs suite plays with it too


def test_top_k_reaches_the_policy_call_of_a_suite() -> None:
    policy = ParamsPolicy()
    opts = EvalOptions(top_k=7, temperature=1.0, params={"data": str(AIME)}, concurrency=2)
    evaluate([SuiteRequest("aime", opts)], policy)
    scored = [p for p in policy.params if p.max_tokens == opts.max_tokens]  # not the 1-token probes
    assert len(scored) >= 4
    assert {p.top_k for p in scored} == {7}


def test_openai_compatible_servers_get_top_k_in_the_body_and_the_openai_api_refuses() -> None:
    server = OpenAIPolicy("http://127.0.0.1:9/v1", model="m")
    assert server._sampling_body(SamplingParams(top_k=20), 16, 1)["top_k"] == 20
    assert "top_k" not in server._sampling_body(SamplingParams(), 16, 1)
    assert top_k_refusal(["http://127.0.0.1:8000/v1"]) is None
    assert "has no top_k" in (top_k_refusal(["http://x:1/v1", "https://api.openai.com/v1"]) or "")
    model = ModelConfig(backend="openai", openai=OpenAIConfig(base_urls=("https://api.openai.com/v1",)))
    with pytest.raises(EvalError, match=r"OpenAI API .* has no top_k"):
        load_policy(PolicySource(kind="model", model=model), 1, top_k=20)


def test_hf_sampling_applies_top_k() -> None:
    from transformers import TopKLogitsWarper  # noqa: PLC0415 - the hf backend's own dependency

    from spade.backends.hf import _Recorder  # noqa: PLC0415

    warpers = _Recorder(SamplingParams(temperature=0.7, top_k=5), 3, None).warpers
    assert [w.top_k for w in warpers if isinstance(w, TopKLogitsWarper)] == [5]
    assert not any(isinstance(w, TopKLogitsWarper) for w in _Recorder(SamplingParams(), 3, None).warpers)


def test_vllm_engine_params_carry_top_k() -> None:
    pytest.importorskip("vllm")
    from spade.backends.vllm_engine import VLLMPolicy  # noqa: PLC0415 - vllm only when installed

    engine = object.__new__(VLLMPolicy)  # no engine: only the translation of the parameters
    engine.max_context, engine.stop_ids = 1024, []
    built = engine._engine_params(SamplingParams(temperature=1.0, top_p=0.95, top_k=20, max_tokens=8), 10, 0)
    assert (built.top_k, built.top_p, built.max_tokens) == (20, 0.95, 8)
