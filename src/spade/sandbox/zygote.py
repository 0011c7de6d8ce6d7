"""The zygote: one pre-warmed, single-threaded process that forks a hardened child per instance.

Started by the harness as ``python -c "from spade.sandbox.zygote import main; main()" CONFIG``, optionally
inside bubblewrap. It preloads every module an environment may use (after a UID drop nothing new can be read
from a root-only prefix), compiles the system-call filter once, probes which layers work on this machine,
says hello, then serves control requests on a SOCK_SEQPACKET socket until the harness hangs up, at which
point it kills every child and exits.

Control requests (one JSON packet each): ``spawn`` (with the instance's socket end attached as SCM_RIGHTS),
``kill`` (SIGKILL after an optional grace period, then reap and report the exit status) and ``list``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import signal
import socket
import sys
import time
from typing import Any

from spade.config.sandbox import Limits
from spade.sandbox import child
from spade.sandbox.seccomp import Installer, SeccompUnavailableError, build_program

PRELOAD: tuple[str, ...] = (
    "abc", "array", "ast", "base64", "binascii", "bisect", "calendar", "cmath", "collections",
    "collections.abc", "colorsys", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "enum", "fractions", "functools", "graphlib", "hashlib", "heapq", "hmac", "html", "inspect",
    "io", "itertools", "json", "keyword", "math", "numbers", "operator", "pprint", "queue", "random", "re",
    "secrets", "statistics", "string", "struct", "textwrap", "time", "traceback", "types", "typing",
    "unicodedata", "uuid", "warnings", "weakref", "zlib", "encodings.idna", "encodings.utf_8",
    "encodings.latin_1", "encodings.ascii",
    "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.polynomial",
    "spade.env", "spade.replies", "spade.envs.official", "spade.envs.loader",
)  # fmt: skip
"""Modules imported before the first fork (environments may use any of them without importing anew)."""

_CLONE_NEWNET = 0x40000000
_CLONE_NEWIPC = 0x08000000
_REAPED_KEEP = 4096


def preload(extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """Import :data:`PRELOAD` and ``extra`` (``Limits.preload``); returns the names not installed here."""
    missing = []
    for name in (*PRELOAD, *extra):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def _full_uid_map() -> bool:
    """Whether this process sees the host's UIDs (not a user namespace mapping a few of them)."""
    try:
        with open("/proc/self/uid_map") as fh:
            fields = fh.read().split()
    except OSError:
        return False
    return fields[:3] == ["0", "0", "4294967295"]


def _unshare_network() -> None:
    """As root without bubblewrap: leave the host network (and System V IPC) for an empty namespace.

    A refusal (no CAP_SYS_ADMIN in this container) is not an error: the harness reports the layer as off.
    """
    if os.geteuid() == 0:
        child.LIBC.unshare(_CLONE_NEWNET | _CLONE_NEWIPC)


def _net_isolated() -> bool:
    try:
        with open("/proc/self/net/dev") as fh:
            names = [line.split(":")[0].strip() for line in fh.readlines()[2:]]
    except OSError:
        return False
    return all(name == "lo" for name in names)


def _pid_isolated() -> bool:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("NSpid:"):
                return len(line.split()) > 2
    return False


def _probe(plan: child.ChildPlan) -> str:
    """Fork one child that applies ``plan`` and checks it took effect; returns '' or what failed."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        try:
            child.harden(theirs.fileno(), plan, plan.uid(0))
            problem = _probe_checks(plan)
        except BaseException as exc:
            problem = f"{type(exc).__name__}: {exc}"
        os.write(child.SOCK_FD, problem.encode()[:4000] or b"ok")
        os._exit(0)
    theirs.close()
    ours.settimeout(10)
    try:
        answer = ours.recv(4096).decode(errors="replace")
    except OSError as exc:
        answer = f"probe did not answer: {exc}"
    finally:
        ours.close()
        _reap(pid, grace=1.0)
    return "" if answer == "ok" else answer or "probe exited without answering"


def _probe_checks(plan: child.ChildPlan) -> str:
    if plan.seccomp is not None:
        try:
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        except PermissionError:
            pass
        else:
            return "the system-call filter did not block socket()"
    expected = plan.uid(0)
    if expected is not None and os.getuid() != expected:
        return f"uid drop did not take effect (uid {os.getuid()})"
    return ""


def decide(limits: Limits) -> tuple[child.ChildPlan, dict[str, bool]]:
    """Compile the filter and probe the layers; fall back where ``auto`` allows, raise where ``on`` fails."""
    devnull = os.open(os.devnull, os.O_RDWR)
    installer = None
    if limits.seccomp != "off":
        try:
            installer = Installer(build_program())
        except SeccompUnavailableError:
            if limits.seccomp == "on":
                raise
    drop = limits.drop_uid and os.geteuid() == 0 and _full_uid_map()
    plan = child.ChildPlan(limits=limits, seccomp=installer, drop_uid=drop, devnull=devnull)
    problem = _probe(plan)
    if problem and plan.seccomp is not None and limits.seccomp == "auto":
        plan = child.ChildPlan(limits=limits, seccomp=None, drop_uid=drop, devnull=devnull)
        problem = _probe(plan)
    if problem and plan.drop_uid:
        plan = child.ChildPlan(limits=limits, seccomp=plan.seccomp, drop_uid=False, devnull=devnull)
        problem = _probe(plan)
    if problem:
        raise SeccompUnavailableError(f"an instance process could not be hardened: {problem}")
    layers = {
        "seccomp": plan.seccomp is not None,
        "uid_drop": plan.drop_uid,
        "pid_namespace": _pid_isolated(),
        "net_namespace": _net_isolated(),
    }
    return plan, layers


# -- children -----------------------------------------------------------------------------------------------
_children: set[int] = set()
_reaped: dict[int, dict[str, int]] = {}


def _status(raw: int) -> dict[str, int]:
    if os.WIFSIGNALED(raw):
        return {"signal": os.WTERMSIG(raw)}
    return {"exited": os.waitstatus_to_exitcode(raw)}


def _reap_finished() -> None:
    for pid in list(_children):
        with contextlib.suppress(ChildProcessError):
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            _reaped[pid] = _status(raw)
        _children.discard(pid)
    while len(_reaped) > _REAPED_KEEP:
        _reaped.pop(next(iter(_reaped)))


def _reap(pid: int, grace: float) -> dict[str, Any]:
    """Wait up to ``grace`` s for ``pid`` to end by itself, then SIGKILL it; returns how it ended."""
    if pid in _reaped:
        return {"status": _reaped.pop(pid), "killed": False}
    killed = False
    deadline = time.monotonic() + grace
    give_up = deadline + 5.0
    while True:
        try:
            done, raw = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            _children.discard(pid)
            return {"status": None, "killed": killed}
        if done:
            _children.discard(pid)
            return {"status": _status(raw), "killed": killed}
        now = time.monotonic()
        if now >= deadline and not killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed = True
        if now >= give_up:
            return {"status": None, "killed": killed}  # stuck in the kernel: reaped on a later request
        time.sleep(0.0002 if killed else 0.001)


def _serve(control: socket.socket, plan: child.ChildPlan) -> None:
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 16, 1)
        if not data:
            return
        _reap_finished()
        request = json.loads(data)
        op = request.get("op")
        if op == "spawn":
            reply: dict[str, Any] = {"pid": _spawn(fds[0], plan, int(request["serial"]))}
        elif op == "kill":
            reply = _reap(int(request["pid"]), float(request.get("grace", 0.0)))
        elif op == "list":
            reply = {"pids": sorted(_children)}
        else:
            reply = {"error": f"unknown control request {op!r}"}
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        control.send(json.dumps(reply).encode())


def _spawn(sock_fd: int, plan: child.ChildPlan, serial: int) -> int:
    pid = os.fork()
    if pid == 0:
        child.run(sock_fd, plan, serial)
    _children.add(pid)
    return pid


def _shutdown() -> None:
    for pid in list(_children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in list(_children):
        _reap(pid, grace=0.0)


def main() -> None:
    """Entry point of the zygote process (``argv[1]`` is the JSON configuration from the harness)."""
    config = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.dont_write_bytecode = True
    control = socket.socket(fileno=int(config["control_fd"]))
    try:
        limits = Limits(**config["limits"])
        missing = preload(limits.preload)
        if not config.get("bubblewrap"):
            _unshare_network()
        plan, layers = decide(limits)
    except (SeccompUnavailableError, OSError, ValueError, TypeError) as exc:
        control.send(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}).encode())
        return
    gc.collect()
    gc.freeze()  # children share the preloaded heap without copying it on the collector's first pass
    hello = {"ok": True, "pid": os.getpid(), "layers": layers, "missing": missing}
    control.send(json.dumps(hello).encode())
    os.dup2(plan.devnull, 2)
    try:
        _serve(control, plan)
    finally:
        _shutdown()
