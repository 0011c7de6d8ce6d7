"""Hostile environments against the sandbox: each case must fail with the right kind and leave nothing behind.

Every case runs under each configuration this machine allows (without and with bubblewrap). After every
case an autouse fixture asserts that no instance process is left and that a fresh instance still works.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spade.sandbox import Limits, Sandbox, SandboxError
from spade.sandbox.validate import InvalidValueError

pytestmark = pytest.mark.timeout(30)

HOSTILE_LIMITS = {
    "call_timeout_s": 0.5,
    "load_timeout_s": 2.0,
    "address_space_mb": 160,
    "cpu_seconds": 20,
    "max_observation_chars": 10_000,
    "max_info_bytes": 4096,
    "max_reply_bytes": 256 << 10,
}


def env_source(*, top: str = "", init: str = "", reset: str = "", step: str = "", extra: str = "") -> str:
    """A native environment whose hooks run the given (hostile) code."""

    def block(code: str, indent: int) -> str:
        return textwrap.indent(textwrap.dedent(code).strip() or "pass", " " * indent)

    return (
        "import os, sys, json, math\n"
        "from spade.env import TextEnv\n"
        f"{textwrap.dedent(top).strip()}\n\n"
        "class Hostile(TextEnv):\n"
        "    max_turns = 5\n"
        "    def __init__(self, max_turns=None):\n"
        "        super().__init__(max_turns)\n"
        f"{block(init, 8)}\n"
        "    def _reset(self, options):\n"
        f"{block(reset, 8)}\n"
        "        return 'start', {}\n"
        "    def step(self, action):\n"
        f"{block(step, 8)}\n"
        "        return self.end_turn('ok ' + action, 0.5)\n"
        f"{textwrap.indent(textwrap.dedent(extra).strip(), '    ')}\n"
        "ENV = Hostile\n"
    )


GOOD = env_source()


def sandbox_configs() -> list[str]:
    return ["off", "on"]


@pytest.fixture(scope="module", params=sandbox_configs(), ids=lambda m: f"bwrap-{m}")
def sb(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    try:
        box = Sandbox(Limits(bubblewrap=request.param, **HOSTILE_LIMITS)).start()
    except SandboxError as exc:
        pytest.skip(f"bubblewrap={request.param} is not possible on this machine: {exc}")
    yield box
    box.close()


def leftover(box: Sandbox, wait_s: float = 20.0) -> list[int]:
    deadline = time.monotonic() + wait_s
    pids = box.instance_pids()
    while pids and time.monotonic() < deadline:
        time.sleep(0.02)
        pids = box.instance_pids()
    return pids


@pytest.fixture(autouse=True)
def survives(sb: Sandbox) -> Iterator[None]:
    """After each case: nothing left behind, the zygote alive, and the next instance works."""
    yield
    assert leftover(sb) == [], "an instance process was left behind"
    with sb.open(GOOD) as env:
        assert env.reset(seed=1) == ("start", {})
        assert env.step("x") == ("ok x", 0.5, False, False, {})


def run_until(box: Sandbox, source: str, op: str) -> None:
    """Open ``source`` and call it up to ``op`` (load, reset, step, tools, solution)."""
    with box.open(source) as handle:
        if op != "load":
            handle.reset(seed=0)
        if op == "step":
            handle.step("go")
        if op == "tools":
            handle.tools()
        if op == "solution":
            handle.solution()


def expect(box: Sandbox, source: str, op: str, kinds: set[str]) -> SandboxError:
    """Run ``source`` up to ``op`` and return the failure it raises (which must be of one of ``kinds``)."""
    with pytest.raises(SandboxError) as caught:
        run_until(box, source, op)
    error = caught.value
    assert error.kind in kinds, f"{error.kind}: {error}"
    assert error.op == op, error
    assert str(error)
    return error


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    op: str
    kinds: frozenset[str]


SPIN_CATCHING = """
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
"""
MEMORY_SWALLOWED = """
hoard = []
while True:
    try:
        hoard.append(bytearray(50 << 20))
    except MemoryError:
        pass
"""

C_STACK_OVERFLOW = """
import gc
gc.disable()
sys.setrecursionlimit(10**8)
nested = []
for _ in range(200_000):
    nested = [nested]
json.dumps(nested)
"""

CASES = [
    Case("loop-at-import", env_source(top="while True:\n    pass"), "load", frozenset({"timeout"})),
    Case(
        "loop-at-reset-catching-baseexception",
        env_source(reset=SPIN_CATCHING),
        "reset",
        frozenset({"timeout"}),
    ),
    Case("loop-at-step", env_source(step="while True:\n    pass"), "step", frozenset({"timeout"})),
    Case(
        "sleep-in-a-loop-at-step",  # time.sleep returns at once in an instance: the loop spins on CPU time
        env_source(step="import time\nwhile True:\n    time.sleep(1)"),
        "step",
        frozenset({"timeout"}),
    ),
    Case(
        "disarms-the-cpu-timer",
        env_source(
            step="import signal\nsignal.signal(signal.SIGVTALRM, signal.SIG_IGN)\nwhile True:\n    pass"
        ),
        "step",
        frozenset({"forbidden"}),
    ),
    Case("memory-bomb-at-import", env_source(top="blob = bytearray(8 << 30)"), "load", frozenset({"memory"})),
    Case(
        "memory-bomb-growing-at-step",
        env_source(step="hoard = []\nwhile True:\n    hoard.append(bytearray(10 << 20))"),
        "step",
        frozenset({"memory"}),
    ),
    Case(
        "memory-bomb-swallowed", env_source(step=MEMORY_SWALLOWED), "step", frozenset({"timeout", "memory"})
    ),
    Case("fork-bomb", env_source(reset="while True:\n    os.fork()"), "reset", frozenset({"forbidden"})),
    Case(
        "subprocess",
        env_source(step="import subprocess\nsubprocess.run(['true'])"),
        "step",
        frozenset({"forbidden"}),
    ),
    Case("os-system", env_source(step="os.system('true')"), "step", frozenset({"forbidden"})),
    Case(
        "exec-swallowed",
        env_source(step="try:\n    os.execv('/bin/true', ['true'])\nexcept BaseException:\n    pass"),
        "step",
        frozenset({"forbidden"}),
    ),
    Case(
        "thread-outliving-the-call",
        env_source(
            reset="import threading\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)]).start()"
        ),
        "reset",
        frozenset({"forbidden"}),
    ),
    Case(
        "ctypes-raw-fork",
        env_source(step="import ctypes\nctypes.CDLL(None).fork()"),
        "step",
        frozenset({"forbidden"}),
    ),
    Case("sys-exit", env_source(step="sys.exit(0)"), "step", frozenset({"crash"})),
    Case("os-exit", env_source(step="os._exit(3)"), "step", frozenset({"crash"})),
    Case("abort", env_source(step="os.abort()"), "step", frozenset({"crash"})),
    Case("recursion", env_source(step="def f(n):\n    return f(n + 1)\nf(0)"), "step", frozenset({"crash"})),
    Case(  # SIGSEGV on the C stack, or MemoryError first when the preloaded libraries' virtual memory (BLAS
        # buffers grow with the CPU count) leaves less of the small address space: machine-dependent, both contain
        "c-stack-overflow",
        env_source(step=C_STACK_OVERFLOW),
        "step",
        frozenset({"crash", "memory"}),
    ),
    Case("raises", env_source(step="raise ValueError('broken rule')"), "step", frozenset({"crash"})),
    Case("syntax-error", "class Broken(:\n", "load", frozenset({"load_error"})),
    Case("no-env-class", "x = 1\n", "load", frozenset({"load_error"})),
    Case(  # killed after hanging up (crash) or ended by its CPU limit first (timeout): a race, both reject
        "closes-its-socket-and-spins",
        env_source(step="os.close(3)\nwhile True:\n    pass"),
        "step",
        frozenset({"crash", "timeout"}),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_hostile_case(sb: Sandbox, case: Case) -> None:
    expect(sb, case.source, case.op, set(case.kinds))


def test_sleeping_returns_at_once_inside_an_instance(sb: Sandbox) -> None:
    with sb.open(env_source(step="import time\ntime.sleep(3600)")) as env:
        env.reset()
        assert env.step("a") == ("ok a", 0.5, False, False, {})
    expect(sb, env_source(step="import time\ntime.sleep(-1)"), "step", {"crash"})


def test_a_call_that_blocks_without_computing_is_reported_as_stalled() -> None:
    """The wall-clock backstop is the one verdict that depends on wall time: it has its own kind."""
    block = "import _thread\nlock = _thread.allocate_lock()\nlock.acquire()\nlock.acquire()"
    limits = Limits(call_timeout_s=0.5, load_timeout_s=0.5, stall_timeout_s=1.0, bubblewrap="off")
    with Sandbox(limits) as box:
        error = expect(box, env_source(top=block), "load", {"stalled"})
        assert "stall_timeout_s" in str(error)
        assert leftover(box) == []


def test_a_memory_bomb_is_memory_however_slow_its_page_faults_are() -> None:
    """Touching ~1 GiB costs seconds of kernel (system) time on some machines and under load; only user time
    counts against the call limit, so the verdict is ``memory`` (a wall-clock limit said ``timeout`` here)."""
    bomb = env_source(reset="blocks = [bytearray(1 << 28) for _ in range(64)]")
    limits = Limits(address_space_mb=1024, call_timeout_s=0.5, load_timeout_s=2.0, bubblewrap="off")
    with Sandbox(limits) as box:
        expect(box, bomb, "reset", {"memory"})
        assert leftover(box) == []


def test_the_cpu_limit_counts_computation_not_waiting_for_the_processor(sb: Sandbox) -> None:
    """A call whose user CPU time stays under the limit passes however long it waits for a core."""
    busy = "import time\nend = time.process_time() + 0.2\nwhile time.process_time() < end:\n    pass"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        with sb.open(env_source(step=busy)) as env:
            env.reset()
            assert env.step("a") == ("ok a", 0.5, False, False, {})
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


VALUE_CASES = [
    ("nan-reward", "return 'o', float('nan'), False, False, {}", "reward", "nan"),
    ("inf-reward", "return 'o', float('inf'), False, False, {}", "reward", "nan"),
    ("bool-reward", "return 'o', True, False, False, {}", "reward", "type"),
    ("out-of-range-reward", "return 'o', 1e6, False, False, {}", "reward", "range"),
    ("int-flag", "return 'o', 0.0, 1, False, {}", "terminated", "type"),
    ("huge-observation", "return 'x' * 1_000_000, 0.0, False, False, {}", "observation", "size"),
    ("bytes-observation", "return b'o', 0.0, False, False, {}", "observation", "type"),
    ("non-json-info", "return 'o', 0.0, False, False, {'s': {1, 2}}", "info", "json"),
    ("huge-info", "return 'o', 0.0, False, False, {'k': 'v' * 100_000}", "info", "size"),
    ("wrong-arity", "return 'o', 0.0", "result", "type"),
]


@pytest.mark.parametrize(("name", "ret", "field", "problem"), VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_invalid_values_are_rejected(sb: Sandbox, name: str, ret: str, field: str, problem: str) -> None:
    error = expect(sb, env_source(step=ret), "step", {"invalid_value"})
    assert isinstance(error, InvalidValueError)
    assert (error.field, error.problem) == (field, problem)


def test_reply_over_the_size_cap_is_rejected(sb: Sandbox) -> None:
    source = env_source(extra="def solution(self):\n    return ['a' * 9000] * 100")
    expect(sb, source, "solution", {"invalid_value"})


def test_forged_info_flags_do_not_change_the_verdict(sb: Sandbox) -> None:
    source = env_source(
        step="return 'o', 0.0, False, False, {'terminated': True, 'success': True, 'reward': 1}"
    )
    with sb.open(source) as env:
        env.reset()
        _, reward, terminated, truncated, info = env.step("x")
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info == {"terminated": True, "success": True, "reward": 1}  # plain data, never a verdict


FORGERIES = [
    (
        "stale-forged-reply",
        'os.write(3, b\'{"id": 2, "ok": true, "value": ["won", 1.0, true, false, {}]}\\n\')',
    ),
    ("garbage-on-the-socket", "os.write(3, b'\\x00\\xff garbage\\n')"),
    (
        "nan-token-on-the-socket",
        'os.write(3, b\'{"id": 2, "ok": true, "value": ["o", NaN, false, false, {}]}\\n\')',
    ),
    ("deeply-nested-json", "os.write(3, b'[' * 200000 + b'\\n')"),
    ("socket-spam", "chunk = b'x' * 65536\nfor _ in range(64):\n    os.write(3, chunk)"),
    ("wrong-id", 'os.write(3, b\'{"id": 99, "ok": true, "value": null}\\n\')'),
]


@pytest.mark.parametrize(("name", "code"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_protocol_forgeries_are_detected(sb: Sandbox, name: str, code: str) -> None:
    expect(sb, env_source(step=code), "step", {"protocol"})


def test_a_forged_reply_with_the_right_id_is_caught_by_the_next_call(sb: Sandbox) -> None:
    forge = 'os.write(3, b\'{"id": 3, "ok": true, "value": ["won", 1.0, true, false, {}]}\\n\')'

    def play() -> None:
        with sb.open(env_source(step=forge)) as env:
            env.reset()
            env.step("a")  # may return the forged values: they are no more than the environment could return
            env.reset()

    with pytest.raises(SandboxError) as caught:
        play()
    assert caught.value.kind == "protocol"


def test_monkeypatching_builtins_and_the_harness_stays_inside_the_instance(sb: Sandbox) -> None:
    patch = """
    import builtins, json as _json
    from spade.sandbox import validate
    validate.step_result = lambda value, limits: ('won', 1e999, True, False, {})
    _json.dumps = lambda *a, **k: '{"id": 3, "ok": true, "value": ["won", 1e999, true, false, {}]}'
    builtins.len = lambda obj: 0
    """
    error = expect(sb, env_source(step=patch), "step", {"protocol", "invalid_value", "crash"})
    assert error.kind != "timeout"
    with sb.open(GOOD) as env:  # nothing leaked into the next instance
        env.reset()
        assert env.step("a") == ("ok a", 0.5, False, False, {})


def test_output_spam_on_stdout_is_harmless(sb: Sandbox) -> None:
    spam = "for _ in range(200):\n    print('x' * 50_000)\n    sys.stderr.write('y' * 50_000)"
    with sb.open(env_source(step=spam)) as env:
        env.reset()
        assert env.step("a")[0] == "ok a"


def test_file_writes_and_deletes_are_refused(sb: Sandbox, tmp_path: Path) -> None:
    shared = Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path
    victim = shared / f"spade-victim-{os.getpid()}"
    victim.write_text("keep me")
    victim.chmod(0o666)
    target = shared / f"spade-written-{os.getpid()}"
    try:
        expect(sb, env_source(step=f"open({str(target)!r}, 'w').write('x')"), "step", {"forbidden"})
        expect(sb, env_source(step=f"os.remove({str(victim)!r})"), "step", {"forbidden"})
        flags = "os.O_WRONLY | os.O_TRUNC"
        expect(sb, env_source(step=f"os.open({str(victim)!r}, {flags})"), "step", {"forbidden"})
        assert not target.exists()
        assert victim.read_text() == "keep me"
    finally:
        victim.unlink(missing_ok=True)
        target.unlink(missing_ok=True)


def test_sockets_to_loopback_are_refused(sb: Sandbox) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        connect = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=0.2)"
        expect(sb, env_source(step=connect), "step", {"forbidden"})
        swallowed = (
            "import socket\ntry:\n    socket.socket().connect(('127.0.0.1', %d))\nexcept OSError:\n    pass"
        )
        swallowed %= port
        expect(sb, env_source(step=swallowed), "step", {"forbidden"})
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_environment_variables_and_outside_files_stay_hidden(sb: Sandbox, tmp_path: Path) -> None:
    secret = f"s3cret-{os.getpid()}"
    os.environ["SPADE_TEST_SECRET"] = secret
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "key").write_text(secret)
    spy = f"""
    found = [repr(dict(os.environ))]
    for path in ({str(private / "key")!r}, '/proc/{os.getpid()}/environ', '/proc/1/environ'):
        try:
            found.append(open(path, 'rb').read().decode(errors='replace'))
        except OSError as exc:
            found.append(type(exc).__name__)
    return ' | '.join(found)[:5000], 0.0, False, False, {{}}
    """
    try:
        with sb.open(env_source(step=spy)) as env:
            env.reset()
            observation = env.step("x")[0]
    finally:
        del os.environ["SPADE_TEST_SECRET"]
    if not (sb.layers["uid_drop"] or sb.layers["bubblewrap"]):
        pytest.skip("without root and without bubblewrap an instance shares the harness's file permissions")
    assert secret not in observation


def test_signalling_or_killing_the_parent_is_refused(sb: Sandbox) -> None:
    me = os.getpid()
    for code in (f"os.kill({me}, {int(signal.SIGKILL)})", "os.kill(os.getppid(), 9)", "os.killpg(0, 9)"):
        expect(sb, env_source(step=code), "step", {"forbidden"})
    with sb.open(GOOD) as env:  # the zygote survived
        env.reset()


def test_a_failed_handle_keeps_failing_with_the_same_kind(sb: Sandbox) -> None:
    env = sb.open(env_source(step="while True:\n    pass"))
    env.reset()
    with pytest.raises(SandboxError) as first:
        env.step("a")
    with pytest.raises(SandboxError) as again:
        env.reset()
    assert first.value.kind == again.value.kind == "timeout"
    assert env.closed
    assert env.failed is not None


def test_cpu_seconds_limit_ends_a_spinning_instance(sb: Sandbox) -> None:
    rest = {k: v for k, v in HOSTILE_LIMITS.items() if k not in ("cpu_seconds", "call_timeout_s")}
    limits = Limits(bubblewrap=sb.limits.bubblewrap, cpu_seconds=1, call_timeout_s=20, **rest)
    with Sandbox(limits) as box:
        error = expect(box, env_source(step="while True:\n    pass"), "step", {"timeout"})
        assert "CPU" in str(error)
        assert leftover(box) == []


def test_async_calls_time_out_and_clean_up(sb: Sandbox) -> None:
    async def scenario() -> str:
        good, bad = await asyncio.gather(sb.aopen(GOOD), sb.aopen(env_source(step="while True:\n    pass")))
        await good.areset(seed=3)
        await bad.areset(seed=3)
        results = await asyncio.gather(good.astep("a"), bad.astep("b"), return_exceptions=True)
        await good.aclose()
        assert results[0] == ("ok a", 0.5, False, False, {})
        assert isinstance(results[1], SandboxError)
        return results[1].kind

    assert asyncio.run(scenario()) == "timeout"


def test_concurrent_hostile_instances_do_not_disturb_each_other(sb: Sandbox) -> None:
    errors: list[str] = []

    def worker(source: str) -> None:
        try:
            with sb.open(source) as env:
                env.reset()
                env.step("a")
        except SandboxError as exc:
            errors.append(exc.kind)

    sources = [env_source(step="while True:\n    pass"), env_source(step="os.fork()"), GOOD, GOOD]
    threads = [threading.Thread(target=worker, args=(s,)) for s in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(errors) == ["forbidden", "timeout"]


def test_seccomp_denies_system_calls_no_python_hook_sees(sb: Sandbox) -> None:
    probe = """
    lines = open('/proc/self/status').read().splitlines()
    out = [line for line in lines if line.startswith(('Seccomp:', 'NoNew'))]
    calls = (('memfd_create', lambda: os.memfd_create('x')), ('pidfd_open', lambda: os.pidfd_open(1)))
    for name, call in calls:
        try:
            call()
            out.append(name + ' allowed')
        except OSError as exc:
            out.append(name + ' errno ' + str(exc.errno))
    return ' | '.join(out), 0.0, False, False, {}
    """
    with sb.open(env_source(step=probe)) as env:
        env.reset()
        report = env.step("x")[0]
    assert "NoNewPrivs:\t1" in report
    if not sb.layers["seccomp"]:
        pytest.skip("the seccomp layer is not available here")
    assert "Seccomp:\t2" in report
    assert "memfd_create errno 1" in report, report
    assert "pidfd_open errno 1" in report, report


def test_each_live_instance_has_its_own_uid(sb: Sandbox) -> None:
    if not sb.layers["uid_drop"]:
        pytest.skip("per-instance UIDs need a root harness")
    who = "return str(os.getuid()) + ' ' + str(os.getgid()), 0.0, False, False, {}"
    with sb.open(env_source(step=who)) as a, sb.open(env_source(step=who)) as b:
        a.reset()
        b.reset()
        ids = {a.step("x")[0], b.step("x")[0]}
    assert len(ids) == 2
    assert all(int(uid) >= sb.limits.uid_base for uid in (i.split()[0] for i in ids))


UNPRIVILEGED_SCRIPT = """
import json, sys, time
from spade.sandbox import Limits, Sandbox, SandboxError
cases, limits = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {"kinds": {}}
with Sandbox(Limits(**limits)) as box:
    report["layers"] = box.layers
    for name, source, op in cases:
        try:
            env = box.open(source)
            with env:
                if op != "load":
                    env.reset()
                if op == "step":
                    env.step("x")
            report["kinds"][name] = None
        except SandboxError as exc:
            report["kinds"][name] = exc.kind
    deadline = time.monotonic() + 20
    while box.instance_pids() and time.monotonic() < deadline:
        time.sleep(0.02)
    report["leftover"] = box.instance_pids()
print(json.dumps(report))
"""


def unprivileged_python() -> tuple[str, dict[str, str]]:
    """An interpreter `nobody` can run (this one, or the system's of the same version) and its environment.

    The venv's interpreter may live under a root-only home; the system interpreter of the same version can
    import the same packages (same ABI) through PYTHONPATH.
    """
    import spade  # noqa: PLC0415 - only to locate the source tree for the unprivileged interpreter

    paths = [str(Path(spade.__file__).parents[1]), sysconfig.get_paths()["purelib"]]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(paths)}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    probe = (
        "import subprocess as s, sys; s.run([sys.executable, '-c', 'import numpy, spade.sandbox'], check=1)"
    )
    reasons = []
    for python in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", probe]
        try:
            check = subprocess.run(command, check=False, env=env, cwd="/", capture_output=True, timeout=30)
        except OSError as exc:
            reasons.append(f"{python}: {exc}")
            continue
        if check.returncode == 0:
            return python, env
        reasons.append(f"{python}: {check.stderr.decode(errors='replace').strip()[-200:]}")
    pytest.skip("no interpreter that an unprivileged user can run: " + "; ".join(reasons))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bwrap_mode", ["off", "auto"])
def test_key_cases_as_an_unprivileged_user(sb: Sandbox, bwrap_mode: str) -> None:
    """The same cases with the whole harness running as `nobody` (no UID drop possible there)."""
    if sb.limits.bubblewrap != "off":
        pytest.skip("runs once (it starts its own sandboxes)")
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip(
            "needs root and setpriv to switch to an unprivileged user (the suite itself runs unprivileged)"
        )
    cases = [
        ("good", GOOD, "step"),
        ("loop", env_source(step="while True:\n    pass"), "step"),
        ("memory", env_source(top="blob = bytearray(8 << 30)"), "load"),
        ("fork", env_source(step="os.fork()"), "step"),
        ("socket", env_source(step="import socket\nsocket.socket()"), "step"),
        ("write", env_source(step="open('/dev/shm/spade-nobody', 'w')"), "step"),
        ("kill-parent", env_source(step="os.kill(os.getppid(), 9)"), "step"),
        ("exit", env_source(step="os._exit(1)"), "step"),
        ("nan", env_source(step="return 'o', float('nan'), False, False, {}"), "step"),
    ]
    limits = dict(HOSTILE_LIMITS, bubblewrap=bwrap_mode)
    python, env = unprivileged_python()
    command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c"]
    run = subprocess.run(
        [*command, UNPRIVILEGED_SCRIPT, json.dumps(cases), json.dumps(limits)],
        check=False, env=env, cwd="/", capture_output=True, timeout=50,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    report = json.loads(run.stdout)
    assert report["kinds"] == {
        "good": None, "loop": "timeout", "memory": "memory", "fork": "forbidden", "socket": "forbidden",
        "write": "forbidden", "kill-parent": "forbidden", "exit": "crash", "nan": "invalid_value",
    }  # fmt: skip
    assert report["leftover"] == []
    assert report["layers"]["uid_drop"] is False
    assert report["layers"]["seccomp"] is True
    assert not Path("/dev/shm/spade-nobody").exists()
