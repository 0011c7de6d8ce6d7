"""The unsafe in-process runner keeps the sandbox's observable contract (values, kinds, failure semantics)."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from spade import envs
from spade.sandbox import EnvInstance, EnvRunner, Limits, SandboxError
from spade.sandbox.inprocess import InProcessSandbox
from spade.sandbox.validate import InvalidValueError


def native(step: str = "return self.end_turn('ok', 0.5)", extra: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(extra).strip(), "    ")
    return (
        "from spade.env import TextEnv\n"
        "class E(TextEnv):\n"
        "    max_turns = 3\n"
        "    skill = 'logical_deduction'\n"
        "    def _reset(self, options):\n"
        "        self.x = self.rng.randint(0, 9)\n"
        "        return f'x? {self.x}', {'x': self.x}\n"
        "    def step(self, action):\n"
        f"        {step}\n"
        f"{body}\n"
        "ENV = E\n"
    )


def test_it_implements_the_runner_protocols() -> None:
    box = InProcessSandbox()
    assert isinstance(box, EnvRunner)
    assert not any(box.layers.values())
    with box.open(native()) as env:
        assert isinstance(env, EnvInstance)
        assert env.meta.class_name == "E"
        assert env.meta.max_turns == 3
        assert env.meta.skill == "logical_deduction"
        assert env.reset(seed=4) == env.reset(seed=4)
        assert env.step("a") == ("ok", 0.5, False, False, {})


@pytest.mark.parametrize(
    ("step", "field", "problem"),
    [
        ("return 'o', float('nan'), False, False, {}", "reward", "nan"),
        ("return 'o', 11.0, False, False, {}", "reward", "range"),
        ("return 'o', True, False, False, {}", "reward", "type"),
        ("return 'o', 0.0, 1, False, {}", "terminated", "type"),
        ("return 'o', 0.0, False, False, {'s': {1, 2}}", "info", "json"),
        ("return 'o', 0.0, False, False", "result", "type"),
        ("return 'x' * 200_000, 0.0, False, False, {}", "observation", "size"),
    ],
)
def test_returned_values_are_validated(step: str, field: str, problem: str) -> None:
    with InProcessSandbox().open(native(step)) as env:
        env.reset(seed=1)
        with pytest.raises(InvalidValueError) as caught:
            env.step("a")
    assert (caught.value.kind, caught.value.field, caught.value.problem) == ("invalid_value", field, problem)


def test_numpy_scalars_become_plain_values() -> None:
    step = (
        "import numpy as np\n        return 'o', np.float32(0.5), np.bool_(True), False, {'n': np.int64(3)}"
    )
    with InProcessSandbox().open(native(step)) as env:
        env.reset(seed=1)
        _, reward, terminated, _, info = env.step("a")
    assert (type(reward), type(terminated), info) == (float, bool, {"n": 3})


def test_a_failure_is_sticky_and_names_the_environment_line() -> None:
    with InProcessSandbox().open(native("return {}['missing']")) as env:
        env.reset(seed=1)
        with pytest.raises(SandboxError) as first:
            env.step("a")
        assert first.value.kind == "crash"
        assert first.value.op == "step"
        assert "KeyError" in first.value.message
        assert "line 9" in first.value.message
        with pytest.raises(SandboxError, match="already failed"):
            env.reset(seed=2)


def test_load_errors_and_exits() -> None:
    box = InProcessSandbox(Limits(max_source_bytes=2000))
    for source in (
        "x = (",
        "class NotAnEnvironment: pass",
        "from spade.env import TextEnv\nraise ValueError('no')",
    ):
        with pytest.raises(SandboxError) as caught:
            box.open(source)
        assert caught.value.kind == "load_error"
    with pytest.raises(SandboxError, match="over the limit"):
        box.open("#" * 3000)
    with box.open(native("raise SystemExit(3)")) as env:
        env.reset(seed=0)
        with pytest.raises(SandboxError, match="exit"):
            env.step("a")


def test_missing_solution_leaves_the_instance_usable() -> None:
    with InProcessSandbox().open(native()) as env:
        env.reset(seed=1)
        with pytest.raises(NotImplementedError):
            env.solution()
        assert env.step("a")[0] == "ok"


def test_tools_of_native_and_official_environments() -> None:
    box = InProcessSandbox()
    with box.open(envs.spec("freight_booking").source()) as env:
        env.reset(seed=3)
        names = [t["function"]["name"] for t in env.tools()]
        assert "get_order" in names
        assert env.call_tool("get_order", {"order_id": 5}).startswith("Error")
        assert env.meta.is_tool_env
    with box.open(native()) as env:
        assert env.tools() == []
        assert env.call_tool("x", {}).startswith("Error")


def test_async_calls_run_inline() -> None:
    async def play() -> tuple[str, float]:
        env = await InProcessSandbox().aopen(native())
        await env.areset(seed=2)
        obs, reward, *_ = await env.astep("a")
        await env.aclose()
        return obs, reward

    assert asyncio.run(play()) == ("ok", 0.5)


def test_each_open_executes_the_module_afresh() -> None:
    source = native(
        "E.calls.append(action)\n        return self.end_turn(str(len(E.calls)))", extra="calls: list = []"
    )
    box = InProcessSandbox()
    for _ in range(2):
        with box.open(source) as env:
            env.reset(seed=0)
            assert env.step("a")[0] == "1"  # class state does not leak between instances
