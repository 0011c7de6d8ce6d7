"""The sandbox API on well-behaved environments: native, official format, tools, async, limits, layers."""

from __future__ import annotations

import asyncio
import pickle
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spade import envs
from spade.sandbox import LAYER_NAMES, EnvInstance, EnvRunner, Limits, Sandbox, SandboxError, bwrap
from spade.sandbox.decode import explain_exit, parse
from spade.sandbox.validate import InvalidValueError

pytestmark = pytest.mark.timeout(60)

FIXTURES = Path(envs.__file__).parent / "official_fixtures"

GUESS = '''
from spade.env import TextEnv

class Guess(TextEnv):
    """Guess a number."""
    max_turns = 4
    skill = "logical_deduction"
    difficulty_levels = 2

    def _reset(self, options):
        self.target = self.rng.randint(1, 100)
        return f"guess 1-100 (level {self.difficulty})", {"level": self.difficulty}

    def step(self, action):
        won = action.strip() == str(self.target)
        return self.end_turn("yes" if won else "no", 1.0 if won else 0.0, terminated=won)

    def solution(self):
        return [str(self.target)]

ENV = Guess
'''
NO_SOLUTION = GUESS.replace("    def solution(self):\n        return [str(self.target)]\n", "")


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with Sandbox(Limits(call_timeout_s=5.0, load_timeout_s=5.0)) as box:
        yield box


def test_native_environment_round_trip(sb: Sandbox) -> None:
    with sb.open(GUESS, filename="guess.py") as env:
        assert isinstance(env, EnvInstance)
        assert (env.meta.class_name, env.meta.max_turns, env.meta.is_tool_env) == ("Guess", 4, False)
        assert (env.meta.skill, env.meta.difficulty_levels) == ("logical_deduction", 2)
        obs, info = env.reset(seed=7, options={"difficulty": 1})
        assert (obs, info) == ("guess 1-100 (level 1)", {"level": 1})
        answer = env.solution()
        assert env.step("0") == ("no", 0.0, False, False, {})
        assert env.step(answer[0]) == ("yes", 1.0, True, False, {})
        assert env.tools() == []


def test_same_seed_gives_the_same_instance_across_processes(sb: Sandbox) -> None:
    def target(seed: int) -> list[str] | str:
        with sb.open(GUESS) as env:
            env.reset(seed=seed)
            return env.solution()

    assert target(11) == target(11)
    assert len({str(target(s)) for s in range(6)}) > 1


def test_max_turns_override_and_truncation(sb: Sandbox) -> None:
    with sb.open(GUESS, max_turns=2) as env:
        assert env.meta.max_turns == 2
        env.reset(seed=1)
        assert env.step("0")[3] is False
        assert env.step("0")[3] is True


def test_missing_solution_raises_not_implemented_and_keeps_the_instance(sb: Sandbox) -> None:
    with sb.open(NO_SOLUTION) as env:
        env.reset(seed=1)
        with pytest.raises(NotImplementedError):
            env.solution()
        assert env.step("0")[0] == "no"


def test_official_format_game_goes_through_the_same_path(sb: Sandbox) -> None:
    source = (FIXTURES / "game_coin_weighing.py").read_text()
    with sb.open(source) as env:
        assert env.meta.class_name == "CoinWeighingEnv"
        obs, _ = env.reset(seed=3)
        assert obs
        result = env.step("weigh 1 2")
        assert isinstance(result[1], float)


def test_official_format_tool_environment(sb: Sandbox) -> None:
    source = (FIXTURES / "tool_pharmacy_refill.py").read_text()
    with sb.open(source) as env:
        assert env.meta.is_tool_env
        env.reset(seed=2)
        tools = env.tools()
        assert tools
        assert all(t["type"] == "function" for t in tools)
        name = tools[0]["function"]["name"]
        assert isinstance(env.call_tool(name, {}), str)
        assert isinstance(env.call_tool("no_such_tool", {}), str)


@pytest.mark.parametrize("name", envs.names())
def test_every_seed_library_environment_loads_and_resets(sb: Sandbox, name: str) -> None:
    spec = envs.spec(name)
    with sb.open(spec.source(), filename=f"{name}.py") as env:
        obs, _ = env.reset(seed=0)
        assert obs
        assert env.meta.skill == spec.skill
        assert env.meta.is_tool_env == (spec.setting == "tool_use")
        if env.meta.is_tool_env:
            assert env.tools()


def test_the_async_api(sb: Sandbox) -> None:
    async def play() -> tuple[float, list[dict[str, object]]]:
        env = await sb.aopen(GUESS)
        await env.areset(seed=5)
        answer = await env.asolution()
        tools = await env.atools()
        _, reward, terminated, _, _ = await env.astep(answer[0])
        assert terminated
        assert await env.acall_tool("x", {}) == "Error: this environment has no tools."
        await env.aclose()
        return reward, tools

    assert asyncio.run(play()) == (1.0, [])


def test_handles_run_in_parallel_from_async_code(sb: Sandbox) -> None:
    async def many() -> list[float]:
        handles = await asyncio.gather(*(sb.aopen(GUESS) for _ in range(6)))
        await asyncio.gather(*(h.areset(seed=i) for i, h in enumerate(handles)))
        answers = await asyncio.gather(*(h.asolution() for h in handles))
        results = await asyncio.gather(*(h.astep(a[0]) for h, a in zip(handles, answers, strict=True)))
        await asyncio.gather(*(h.aclose() for h in handles))
        return [r[1] for r in results]

    assert asyncio.run(many()) == [1.0] * 6


def test_the_live_instance_cap_waits_then_fails_with_advice() -> None:
    with Sandbox(Limits(max_live_instances=1, slot_wait_s=0.3, bubblewrap="off")) as box:
        first = box.open(GUESS)
        with pytest.raises(SandboxError) as caught:
            box.open(GUESS)
        assert caught.value.kind == "stalled"
        assert "max_live_instances" in str(caught.value)
        first.close()
        with box.open(GUESS) as second:
            second.reset()


def test_a_failed_instance_frees_its_slot() -> None:
    with Sandbox(Limits(max_live_instances=1, slot_wait_s=0.5, bubblewrap="off")) as box:
        with pytest.raises(SandboxError):
            box.open("this is not python")
        with box.open(GUESS) as env:
            env.reset()


def test_an_oversized_source_is_refused_before_loading(sb: Sandbox) -> None:
    with pytest.raises(SandboxError) as caught:
        sb.open("#" * (sb.limits.max_source_bytes + 1))
    assert caught.value.kind == "load_error"


def test_closing_the_sandbox_ends_its_instances() -> None:
    box = Sandbox(Limits(bubblewrap="off")).start()
    env = box.open(GUESS)
    pids = box.instance_pids()
    assert len(pids) == 1
    box.close()
    deadline = time.monotonic() + 30  # a backstop: the loop ends as soon as the process is gone
    while Path(f"/proc/{pids[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not Path(f"/proc/{pids[0]}").exists()
    with pytest.raises(SandboxError):
        env.reset()
    with pytest.raises(SandboxError):
        box.open(GUESS)


def test_a_dead_zygote_is_replaced_on_next_open() -> None:
    with Sandbox(Limits(bubblewrap="off")) as box:
        first = box.open(GUESS)
        zygote = box._zygote
        assert zygote is not None
        assert zygote._proc is not None
        zygote._proc.send_signal(signal.SIGKILL)
        zygote._proc.wait()
        with pytest.raises(SandboxError):
            first.reset()
        with box.open(GUESS) as env:
            env.reset()


def test_layers_report_every_layer(sb: Sandbox) -> None:
    assert isinstance(sb, EnvRunner)
    layers = sb.layers
    assert set(layers) == set(LAYER_NAMES)
    assert all(isinstance(v, bool) for v in layers.values())
    assert layers["process"]
    assert layers["rlimits"]
    if layers["bubblewrap"]:
        assert layers["pid_namespace"]
        assert layers["hidden_filesystem"]


def test_bubblewrap_on_fails_loudly_and_auto_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "find", lambda: None)
    with pytest.raises(SandboxError) as caught:
        Sandbox(Limits(bubblewrap="on")).start()
    assert "bwrap is not installed" in str(caught.value)
    with Sandbox(Limits(bubblewrap="auto")) as box:
        assert box.layers["bubblewrap"] is False
        assert "bwrap is not installed" in box.notes
        with box.open(GUESS) as env:
            env.reset()


def test_seccomp_can_be_switched_off() -> None:
    with Sandbox(Limits(seccomp="off", bubblewrap="off")) as box:
        assert box.layers["seccomp"] is False
        with box.open(GUESS) as env:
            env.reset()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("call_timeout_s", 0),
        ("stall_timeout_s", 1.0),
        ("slot_wait_s", 0),
        ("address_space_mb", 8),
        ("reward_min", 50.0),
        ("bubblewrap", "maybe"),
        ("uid_count", 0),
    ],
)
def test_limits_refuse_bad_values_with_a_message(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field.split("_", maxsplit=1)[0]):
        Limits(**{field: value})  # type: ignore[arg-type]


def test_errors_survive_pickling() -> None:
    error = SandboxError("timeout", "too slow", op="step")
    again = pickle.loads(pickle.dumps(error))
    assert (again.kind, again.message, again.op, str(again)) == ("timeout", "too slow", "step", str(error))


@pytest.mark.parametrize(
    ("ended", "kind", "phrase"),
    [
        ({"status": {"signal": int(signal.SIGXCPU)}, "killed": False}, "timeout", "CPU"),
        ({"status": {"signal": int(signal.SIGVTALRM)}, "killed": False}, "timeout", "call_timeout_s"),
        ({"status": {"signal": int(signal.SIGSEGV)}, "killed": False}, "crash", "SIGSEGV"),
        ({"status": {"signal": int(signal.SIGSYS)}, "killed": False}, "forbidden", "system call"),
        ({"status": {"exited": 3}, "killed": False}, "crash", "status 3"),
        ({"status": {"signal": int(signal.SIGKILL)}, "killed": True}, "crash", "kept running"),
        ({"status": None, "killed": False}, "crash", "unknown"),
    ],
)
def test_exit_statuses_are_explained(ended: dict[str, object], kind: str, phrase: str) -> None:
    got_kind, message = explain_exit(ended, "step", Limits())
    assert got_kind == kind
    assert phrase in message


def test_a_dropped_handle_frees_its_slot_and_its_process() -> None:
    with Sandbox(Limits(max_live_instances=1, slot_wait_s=2.0, bubblewrap="off")) as box:
        box.open(GUESS).reset()  # never closed: the handle is garbage as soon as this line ends
        with box.open(GUESS) as env:
            env.reset()
        deadline = time.monotonic() + 30  # a backstop: the loop ends as soon as the process is gone
        while box.live_instances() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert box.live_instances() == 0
        assert box.instance_pids() == []


def test_a_bubblewrap_that_cannot_start_falls_back_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "find", lambda: "/bin/false")
    monkeypatch.setattr(bwrap, "command", lambda exe, as_root: ["/bin/false"])
    with Sandbox(Limits(bubblewrap="auto")) as box:
        assert box.layers["bubblewrap"] is False
        assert any("exit status 1" in note for note in box.notes)
        with box.open(GUESS) as env:
            env.reset()
    with pytest.raises(SandboxError, match="bubblewrap='on'"):
        Sandbox(Limits(bubblewrap="on")).start()


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (b'{"id": 1, "ok": true, "value": 1, "extra": 0}', "protocol"),
        (b'{"id": 2, "ok": true, "value": 1}', "protocol"),
        (b'{"id": true, "ok": true, "value": 1}', "protocol"),
        (b'{"id": 1, "ok": true, "value": NaN}', "protocol"),
        (b'{"id": 1, "ok": false, "kind": "bogus", "error": "x"}', "protocol"),
        (b'{"id": 1, "ok": false, "kind": "crash", "error": "boom"}', "crash"),
        (b"[" * 100_000, "protocol"),
        (b"\xff\xfe", "protocol"),
    ],
)
def test_replies_are_parsed_strictly(line: bytes, kind: str) -> None:
    with pytest.raises(SandboxError) as caught:
        parse(line, 1, "step")
    assert caught.value.kind == kind


def test_an_invalid_value_reply_keeps_its_field_and_problem() -> None:
    line = (
        b'{"id": 1, "ok": false, "kind": "invalid_value", "error": "x", "field": "reward", "problem": "nan"}'
    )
    with pytest.raises(InvalidValueError) as caught:
        parse(line, 1, "step")
    assert (caught.value.field, caught.value.problem, caught.value.op) == ("reward", "nan", "step")
    assert parse(b'{"id": 1, "ok": true, "value": [1, {"a": null}]}', 1, "step") == [1, {"a": None}]
