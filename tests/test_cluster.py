"""Plays and checks on Ray workers: a real two-node local Ray cluster, a worker killed mid-step, and the
pure parts (placement, accounting, config)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from spade.checker import Checker
from spade.cluster.placement import ClusterError, ClusterLedger, node_label, parse_resources, pick_worker
from spade.cluster.worker import EnvWorker
from spade.config import ClusterConfig, ConfigError, TrainConfig
from spade.memory.archive import seed_sources
from spade.sandbox import Limits, Sandbox
from spade.types import Completion, SamplingParams
from test_train import scripted_config

# -- pure parts ---------------------------------------------------------------------------------------------


def test_pick_worker_takes_the_least_loaded_live_worker_and_spreads_ties() -> None:
    assert pick_worker([3, 1, 2], [0, 0, 0], [True, True, True]) == 1
    assert pick_worker([0, 0], [5, 2], [True, True]) == 1  # equally idle: the one given less so far
    assert pick_worker([0, 9], [0, 0], [False, True]) == 1  # a dead worker takes nothing
    with pytest.raises(ClusterError, match=r"all 2 Ray workers are lost.*--resume"):
        pick_worker([0, 0], [0, 0], [False, False])


def test_pick_worker_alternates_between_idle_workers() -> None:
    loads, assigned, alive = [0, 0], [0, 0], [True, True]
    picks = []
    for _ in range(6):
        i = pick_worker(loads, assigned, alive)
        assigned[i] += 1
        picks.append(i)
    assert picks == [0, 1, 0, 1, 0, 1]


def test_ledger_reports_one_period_then_starts_over() -> None:
    ledger = ClusterLedger()
    ledger.instances["aaaa"] += 3
    ledger.instances["bbbb"] += 1
    ledger.checks["aaaa"] += 2
    ledger.retries, ledger.actors_lost, ledger.failed = 2, 1, 0
    row = ledger.take(1, {"aaaa": 1, "bbbb": 0})
    assert row == {
        "cluster/workers_live": 1.0, "cluster/nodes_live": 1.0, "cluster/retries": 2.0,
        "cluster/actors_lost": 1.0, "cluster/failed": 0.0, "cluster/instances/aaaa": 3.0,
        "cluster/instances/bbbb": 1.0, "cluster/checks/aaaa": 2.0,
    }  # fmt: skip
    again = ledger.take(1, {"aaaa": 1})
    assert again["cluster/retries"] == 0.0
    assert not any(k.startswith("cluster/instances/") for k in again)


def test_node_labels_and_resources() -> None:
    assert node_label("21cc7b3352be7559f9ec7b74219e6abcefcd23fd") == "21cc7b3352be"
    assert parse_resources(["node_b=1", "x=0.5"]) == {"node_b": 1.0, "x": 0.5}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"workers": 0}, "cluster.workers must be >= 1"),
        ({"cpus_per_worker": 0.0}, "cluster.cpus_per_worker must be > 0"),
        ({"max_retries": -1}, "cluster.max_retries must be >= 0"),
        ({"worker_resources": ("node_b",)}, "must be NAME=AMOUNT"),
        ({"worker_resources": ("node_b=x",)}, "must be NAME=AMOUNT"),
    ],
)
def test_cluster_config_errors_say_the_fix(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(cluster=ClusterConfig(**over))


def test_cluster_flags_parse_and_round_trip_through_the_saved_config() -> None:
    from spade.cli.train import parse_config  # noqa: PLC0415
    from spade.config import from_json, to_json  # noqa: PLC0415

    cfg, _ = parse_config(
        ["--model.backend", "scripted", "--cluster.backend", "ray", "--cluster.address", "10.0.0.7:6379",
         "--cluster.workers", "16", "--cluster.cpus-per-worker", "4", "--cluster.worker-resources", "spade_env=4"]
    )  # fmt: skip
    assert cfg.cluster == ClusterConfig(
        backend="ray",
        address="10.0.0.7:6379",
        workers=16,
        cpus_per_worker=4.0,
        worker_resources=("spade_env=4",),
    )
    assert from_json(to_json(cfg)) == cfg
    assert TrainConfig().cluster.backend == "local"


def test_ray_backend_without_ray_is_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"pip install 'spade\[ray\]'") as info:
        TrainConfig(cluster=ClusterConfig(backend="ray"))
    assert "\n" not in str(info.value)


def test_local_mode_never_imports_ray() -> None:
    code = (
        "import sys, spade.run.loop, spade.cluster, spade.cli.app\n"
        "from spade.config import TrainConfig\n"
        "TrainConfig()\n"
        "assert 'ray' not in sys.modules, 'local mode imported ray'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_worker_body_plays_and_checks_in_its_own_sandbox() -> None:
    source = seed_sources("games")[0].code
    worker = EnvWorker(Limits(call_timeout_s=2.0, load_timeout_s=4.0))
    try:
        opened = worker.open(source, "<w>", None)
        assert opened.status == "ok"
        iid, meta = opened.value
        obs, _ = worker.call(iid, "reset", (3, None)).value
        assert isinstance(obs, str)
        assert meta.max_turns >= 1
        result = worker.call(iid, "step", ("\\boxed{1}",)).value
        assert len(result) == 5
        assert worker.live_instances() == 1
        worker.close(iid)
        closed = worker.call(iid, "step", ("x",))
        assert closed.status == "error"
        assert closed.error is not None
        assert "closed" in str(closed.error)
        broken = worker.open("this is not python", "<bad>", None)
        assert broken.status == "error"
        assert broken.error is not None
        assert broken.error.kind == "load_error"
        assert worker.check(source, Checker(TrainConfig().checker), 0, "<w>").ok
    finally:
        worker.shutdown()


# -- a real two-node Ray cluster ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[Any]:
    """Head (1 CPU) + a second `ray start` node (1 CPU, resource node_b) in a temp folder with free ports."""
    from spade.cluster.local import LocalRayCluster, NodeSpec  # noqa: PLC0415

    # A loopback test cluster runs without token auth: a token another cluster left in ~/.ray makes the
    # driver and the nodes disagree (Ray enables auth when it finds one).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_MODE", "disabled")
        with LocalRayCluster([NodeSpec(1), NodeSpec(1, {"node_b": 1})]) as cluster:
            yield cluster


class _KillsAWorker:
    """Wraps the scripted policy: once armed, kills one Ray worker actor at its second sampling call.

    The plays of the step are then open on both workers (reset done, a turn taken): the killed worker's
    episodes must move to the other worker and finish there.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.armed = False
        self.calls = 0
        self.killed: list[str] = []

    @property
    def template(self) -> Any:
        return self.inner.template

    def load_weights(self, path: Path) -> None:
        self.inner.load_weights(path)

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        if self.armed:
            self.calls += 1
            if self.calls == 2 and not self.killed:
                import ray  # noqa: PLC0415

                names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)]
                name = sorted(n for n in names if n.startswith("spade-worker-"))[-1]
                handle = ray.get_actor(name)
                ray.kill(handle)
                _wait_until_dead(handle)  # the kill lands asynchronously: on a busy machine, after the step
                self.killed.append(name)
        result: list[Completion] = await self.inner.sample(prompts, params)
        return result


def _wait_until_dead(handle: Any, attempts: int = 600) -> None:
    """Block until calls on the killed actor fail, so the open plays meet a dead worker in this step."""
    import ray  # noqa: PLC0415
    from ray.exceptions import GetTimeoutError, RayActorError  # noqa: PLC0415

    for _ in range(attempts):
        try:
            ray.get(handle.node_id.remote(), timeout=1.0)
        except RayActorError:
            return
        except GetTimeoutError:
            continue
        time.sleep(0.1)  # it answered: the kill has not landed yet
    raise AssertionError("the killed worker still answers")


def _stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    skip = ("time/", "speed/", "resources/", "cluster/", "engine/", "sft/cached")
    return [{k: v for k, v in r.items() if not k.startswith(skip)} for r in rows]


BUSY_START_S = 400.0
"""Ray workers start in seconds on a quiet machine and took over 120 s (the default) on a 2-core one running
the suite beside two trainings: these tests are about placement, not start-up speed."""


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_two_node_train_plays_on_both_nodes_and_survives_a_killed_worker(
    two_nodes: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spade.run.components  # noqa: PLC0415
    from spade.run.loop import train  # noqa: PLC0415

    local_cfg = scripted_config(tmp_path, "valid", name="local", steps=3)
    ray_cfg = dataclasses.replace(
        local_cfg,
        name="ray",
        cluster=ClusterConfig(
            backend="ray",
            address=two_nodes.address,
            workers=2,
            cpus_per_worker=1,
            start_timeout_s=BUSY_START_S,
        ),
    )
    wrappers: list[_KillsAWorker] = []
    real_make_policy = spade.run.components.make_policy

    def make_policy(*args: Any, **kw: Any) -> Any:
        wrappers.append(_KillsAWorker(real_make_policy(*args, **kw)))
        return wrappers[-1]

    def progress(line: str) -> None:
        if line.startswith("step 1: play"):
            wrappers[-1].armed = True

    monkeypatch.setattr(spade.run.components, "make_policy", make_policy)
    rows = train(ray_cfg, progress=progress).read_metrics()
    monkeypatch.setattr(spade.run.components, "make_policy", real_make_policy)
    expected = train(local_cfg).read_metrics()

    per_node = {k.rsplit("/", 1)[1]: v for k, v in rows[0].items() if k.startswith("cluster/instances/")}
    checks = {k.rsplit("/", 1)[1]: v for k, v in rows[0].items() if k.startswith("cluster/checks/")}
    print(f"step 0 instances per node {per_node}, checks per node {checks}")
    for r in rows:
        print({k: v for k, v in r.items() if k.startswith("cluster/") and "/" not in k[8:]})
    assert len(per_node) == 2
    assert min(per_node.values()) > 0
    assert rows[0]["cluster/nodes_live"] == 2.0
    assert rows[0]["cluster/retries"] == 0.0
    # step 1: a worker was killed with plays in flight; they moved to the other node and finished
    assert wrappers[-1].killed, "the kill hook never fired"
    assert rows[1]["cluster/actors_lost"] == 1.0
    assert rows[1]["cluster/retries"] >= 1.0
    assert rows[1]["cluster/failed"] == 0.0
    assert "agent/status/env_error" not in rows[1]
    assert rows[2]["cluster/workers_live"] == 1.0
    assert len(rows) == 3
    # the lost worker changed nothing the agent saw: the run equals the local-sandbox run
    assert _stable(rows) == _stable(expected)
    glossary = (Path(__file__).parents[1] / "docs" / "metrics.md").read_text()
    documented = set(re.findall(r"`([a-z_]+(?:/[A-Za-z_<>]+)*)`", glossary))
    families = tuple(d.split("<")[0] for d in documented if "<" in d)
    logged = {k for r in rows for k in r if k.startswith("cluster/")}
    assert not {k for k in logged if k not in documented and not k.startswith(families)}


NOT_SEEDED = """
import random
from spade.env import TextEnv

class Drifts(TextEnv):
    \"\"\"Draws from the process-wide RNG: a rebuilt instance does not repeat itself.\"\"\"
    max_turns = 5

    def _reset(self, options):
        return f"value {random.random()}", {}

    def step(self, action):
        return self.end_turn("ok", 0.0)

ENV = Drifts
"""


def test_auto_address_without_a_cluster_and_a_dead_address_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spade.cluster import ray_runner  # noqa: PLC0415

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray_runner, "CURRENT_CLUSTER", tmp_path / "none")
    with pytest.raises(ClusterError, match=r"no Ray cluster runs on this machine.*ray start --head"):
        ray_runner.resolve_address("auto")
    (tmp_path / "none").write_text("10.0.0.7:6379\n")
    assert ray_runner.resolve_address("auto") == "10.0.0.7:6379"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.8:6379")
    assert ray_runner.resolve_address("auto") == "10.0.0.8:6379"
    assert ray_runner.resolve_address("h:1") == "h:1"
    with pytest.raises(ClusterError, match=r"no Ray cluster answers at '127\.0\.0\.1:1'") as info:
        ray_runner.RayRunner(ClusterConfig(backend="ray", address="127.0.0.1:1"), Limits())
    assert "\n" not in str(info.value)


@pytest.mark.ray
@pytest.mark.xdist_group("ray")
def test_a_killed_worker_moves_its_episodes_and_refuses_a_replay_that_diverges(two_nodes: Any) -> None:
    import ray  # noqa: PLC0415

    from spade.cluster.ray_runner import RayRunner  # noqa: PLC0415
    from spade.sandbox import SandboxError  # noqa: PLC0415

    good = seed_sources("games")[0].code
    cfg = ClusterConfig(
        backend="ray", address=two_nodes.address, workers=2, cpus_per_worker=1, start_timeout_s=BUSY_START_S
    )
    with RayRunner(cfg, Limits(call_timeout_s=2.0, load_timeout_s=4.0)) as runner:
        assert len(set(runner.nodes)) == 2  # one worker per node (each node offers one CPU)
        assert runner.layers["process"]
        with Sandbox(Limits()) as here:  # same machine: the workers' sandboxes have this one's layers
            assert runner.layers == here.layers
        envs = [runner.open(src, filename=f"<{i}>") for i, src in enumerate([good, good, good, NOT_SEEDED])]
        for env in envs:
            env.reset(seed=7)
        for env in envs[:3]:
            env.step("\\boxed{1}")
        assert {envs[0].node, envs[1].node} == set(runner.nodes)  # least loaded: the first two alternate
        victim = envs[3].actor  # the drifting env and envs[1] share this worker
        ray.kill(victim)
        assert envs[1].actor is victim
        for env in envs[:3]:
            assert len(env.step("\\boxed{2}")) == 5  # moved (if it had to) and went on
        with pytest.raises(SandboxError, match="not deterministic"):
            envs[3].step("x")
        row = runner.metrics()
        for env in envs:
            env.close()
    assert row["cluster/actors_lost"] == 1.0
    assert row["cluster/retries"] == 2.0  # envs[1] and envs[3]
    assert row["cluster/workers_live"] == 1.0
    assert row["cluster/nodes_live"] == 1.0
