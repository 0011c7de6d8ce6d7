"""spade.ecosystem: the OpenEnv export (server on the loopback, played through the package's own client) and
training on a remote OpenEnv server (``--pool openenv:URL``), including a dead server's one-line stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from scripted_run import tiny_config, tiny_run
from spade.cli.app import main
from spade.cli.train import _failure
from spade.ecosystem.remote import RemoteEnvError, pool_sources, remote_target
from spade.errors import SetupError
from spade.run.loop import train
from spade.run.preflight import check_pool
from spade.rundir import RunDir
from spade.sandbox import Sandbox

SRC = Path(__file__).resolve().parents[1] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return tiny_run(tmp_path_factory.mktemp("runs"), steps=4)


@pytest.fixture(scope="module")
def package(run: RunDir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "out"
    assert main(["export", str(run.root), "--out", str(out), "--format", "openenv"]) == 0
    return out / "openenv"


@pytest.fixture(scope="module")
def server(package: Path) -> Iterator[str]:
    """The exported package's own server on a loopback port."""
    port = _free_port()
    pkg = next(p.name for p in package.iterdir() if p.is_dir())
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{package}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", f"{pkg}.server.app", "--port", str(port)],
        cwd=package,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "server exited")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_openenv_package_layout(package: Path) -> None:
    pkg = next(p for p in package.iterdir() if p.is_dir())
    assert pkg.name.startswith("spade_openenv_")
    assert {"pyproject.toml", "openenv.yaml", "README.md"} <= {p.name for p in package.iterdir()}
    assert f"app: {pkg.name}.server.app:app" in (package / "openenv.yaml").read_text()
    manifest = (pkg / "envs" / "manifest.jsonl").read_text().splitlines()
    assert len(manifest) == len(list((pkg / "envs").glob("*.py"))) > 0


def test_exported_server_plays_a_winning_episode_through_its_client(
    package: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(package))
    pkg = next(p for p in package.iterdir() if p.is_dir())
    client_mod = __import__(pkg.name, fromlist=["SpadeEnvClient", "SpadeAction"])
    env_file = sorted((pkg / "envs").glob("*.py"))[0]

    row = next(
        json.loads(line)
        for line in (pkg / "envs" / "manifest.jsonl").read_text().splitlines()
        if json.loads(line)["file"] == env_file.name
    )
    with Sandbox() as sb, sb.open(env_file.read_text()) as local:  # the scripted winning actions
        local.reset(seed=7)
        solution = local.solution()
    actions = [solution] if isinstance(solution, str) else list(solution)
    with client_mod.SpadeEnvClient(base_url=server).sync() as env:
        result = env.reset(seed=7, env_id=row["env_id"])
        assert result.observation.env_id == row["env_id"]
        assert not result.done
        assert result.observation.text
        for action in actions:
            result = env.step(client_mod.SpadeAction(message=action))
        assert result.done
        assert result.observation.terminated
        assert result.reward == 1.0
        assert env.state().step_count == len(actions)
        result = env.reset(seed=7, env_id=row["env_id"])  # a new episode: a fresh sandboxed instance
        result = env.step(client_mod.SpadeAction(message="\\boxed{-12345}"))
        assert result.reward == 0.0


def test_remote_pool_marker_names_the_server() -> None:
    [source] = pool_sources("openenv:http://127.0.0.1:9/")
    assert remote_target(source.code) == {"kind": "openenv", "url": "http://127.0.0.1:9"}
    assert remote_target("ENV = 1\n") is None
    with pytest.raises(RemoteEnvError, match="openenv:http://HOST:PORT"):
        pool_sources("openenv:localhost")


def test_fixed_pool_trains_on_a_remote_openenv_server(server: str, tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "remote", steps=1, mode="fixed_pool", pool=f"openenv:{server}")
    row = train(cfg).read_metrics()[0]
    assert row["agent/plays"] > 0
    assert row.get("agent/status/env_error", 0.0) == 0.0
    assert row["time/play_s"] > 0


def test_dead_server_is_a_one_line_resumable_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"openenv:http://127.0.0.1:{_free_port()}"
    with pytest.raises(SetupError, match="does not answer"):
        check_pool(dead)
    cfg = tiny_config(tmp_path, "dead", steps=1, mode="fixed_pool", pool=dead)
    with pytest.raises(RemoteEnvError, match="stopped answering"):
        train(cfg)
    assert (tmp_path / "dead" / "config.json").exists()  # the run directory stays: --resume continues it
    code, after = _failure(RemoteEnvError("the server stopped answering"), tmp_path / "dead")
    assert code == 1
    assert "--resume" in after
    assert main(["train", "--resume", str(tmp_path / "dead")]) == 2  # still down: preflight says so
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "does not answer" in err[0]


class _Segment:
    def __init__(self, reply: str, terminated: bool) -> None:
        self.last_reply, self.terminated = reply, terminated


class _Trace:
    def __init__(self) -> None:
        self.rewards: dict[str, float] = {}

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = value * weight


class _ScriptedSeat:
    """The agent side of verifiers' ``Interaction`` (``turn`` -> a segment with the reply), scripted: verifiers
    runs a real agent through a harness program it installs with uv, which this offline test cannot."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.seen, self.trace = list(replies), [], _Trace()

    @contextlib.asynccontextmanager
    async def interaction(self, task: object) -> AsyncIterator[_ScriptedSeat]:
        yield self

    async def turn(self, message: str) -> _Segment:
        self.seen.append(message)
        if not self.replies:  # the agent has nothing more to say: its run ends
            return _Segment("", terminated=True)
        return _Segment(self.replies.pop(0), terminated=False)


def test_verifiers_package_loads_with_its_loader_and_scores_a_scripted_episode(
    run: RunDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifiers.v1.utils.loaders import load_environment, resolve_env_config  # noqa: PLC0415

    assert main(["export", str(run.root), "--out", str(tmp_path / "out"), "--format", "verifiers"]) == 0
    package = tmp_path / "out" / "verifiers"
    pkg = next(p for p in package.iterdir() if p.is_dir())
    monkeypatch.syspath_prepend(str(package))
    env = load_environment(resolve_env_config({"taskset": {"id": pkg.name, "seeds": 2}}))
    tasks = list(env.taskset)
    assert len(tasks) == 2 * len((pkg / "envs" / "manifest.jsonl").read_text().splitlines())
    task = tasks[1]
    info = task.data.info
    with Sandbox() as sb, sb.open((pkg / "envs" / info["file"]).read_text()) as local:
        local.reset(seed=info["seed"])
        solution = local.solution()
    winning = [solution] if isinstance(solution, str) else list(solution)
    seat = _ScriptedSeat(winning)
    asyncio.run(env.run(task, SimpleNamespace(player=seat)))
    assert seat.trace.rewards == {"spade_return": 1.0}
    assert seat.seen[0]  # the environment's first observation opened the exchange
    seat = _ScriptedSeat(["\\boxed{-12345}"] * 20)
    asyncio.run(env.run(task, SimpleNamespace(player=seat)))
    assert seat.trace.rewards == {"spade_return": 0.0}


def test_fixed_pool_trains_on_a_verifiers_environment(
    run: RunDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local verifiers environment is the package exported above; spade's agent plays its tasks."""
    assert main(["export", str(run.root), "--out", str(tmp_path / "out"), "--format", "verifiers"]) == 0
    package = tmp_path / "out" / "verifiers"
    pkg = next(p for p in package.iterdir() if p.is_dir())
    monkeypatch.syspath_prepend(str(package))
    check_pool(f"verifiers:{pkg.name}")
    cfg = tiny_config(tmp_path, "vf", steps=1, mode="fixed_pool", pool=f"verifiers:{pkg.name}")
    row = train(cfg).read_metrics()[0]
    assert row["agent/plays"] > 0
    assert row.get("agent/status/env_error", 0.0) == 0.0
    with pytest.raises(SetupError, match="does not load"):
        check_pool("verifiers:no_such_verifiers_module")


@pytest.mark.slow
def test_docs_trl_example_trains_one_grpo_step(run: RunDir, tmp_path: Path) -> None:
    """The TRL example of docs/ecosystem.md, run as written (one GRPO step of the embedded model, CPU)."""
    doc = (SRC.parent / "docs" / "ecosystem.md").read_text()
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(script), str(run.root), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained 1 GRPO step on" in done.stdout
