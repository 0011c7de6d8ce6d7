"""The harness's handle on the zygote process: start it (inside bubblewrap when possible) and talk to it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from spade.config.sandbox import Limits
from spade.sandbox import bwrap
from spade.sandbox.errors import SandboxError

# The zygote gets exactly the harness's import path (it may be an editable install or a source checkout).
_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[1])['sys_path']; "
    "import spade.sandbox.zygote as z; z.main()"
)
_PACKET = 1 << 16
_CONTROL_TIMEOUT_S = 15.0
_ZYGOTE_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONHASHSEED": "0",  # the same set/dict order in every instance and every run
    "PYTHONDONTWRITEBYTECODE": "1",
    "OPENBLAS_NUM_THREADS": "1",  # the zygote must stay single-threaded to fork safely
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


class Zygote:
    """A running zygote process and its control socket (thread-safe)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self.layers: dict[str, bool] = {}
        self.missing: list[str] = []
        self.ns_pid = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self.bubblewrap = False
        self.notes: list[str] = []
        notes = self.notes
        if limits.bubblewrap != "off":
            exe = bwrap.find()
            if exe is None:
                notes.append("bwrap is not installed")
            else:
                note = self._try_start(bwrap.command(exe, as_root=os.geteuid() == 0))
                if not note:
                    self.bubblewrap = True
                    return
                notes.append(note)
            if limits.bubblewrap == "on":
                raise SandboxError("crash", "bubblewrap='on' but it cannot run here: " + "; ".join(notes))
        note = self._try_start([])
        if note:
            raise SandboxError("crash", f"the sandbox zygote did not start: {note}")

    def _try_start(self, prefix: list[str]) -> str:
        """Start the zygote under ``prefix``; returns '' on success, else why it failed."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "control_fd": theirs.fileno(),
            "limits": dataclasses.asdict(self.limits),
            "bubblewrap": bool(prefix),
            "sys_path": [os.path.abspath(p) for p in sys.path if p],
        }
        cmd = [*prefix, sys.executable, "-s", "-c", _BOOT, json.dumps(config)]
        try:
            proc = subprocess.Popen(
                cmd, pass_fds=(theirs.fileno(),), env=_ZYGOTE_ENV, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd="/",
            )  # fmt: skip
        except OSError as exc:
            ours.close()
            theirs.close()
            return f"cannot run {cmd[0]}: {exc}"
        theirs.close()
        ours.settimeout(self.limits.zygote_timeout_s)
        try:
            hello = json.loads(ours.recv(_PACKET) or b"null")
        except (OSError, ValueError) as exc:
            hello = {"ok": False, "error": f"no hello: {exc}"}
        if not isinstance(hello, dict) or hello.get("ok") is not True:
            ours.close()
            detail = hello.get("error", "") if isinstance(hello, dict) else ""
            return _stop(proc, detail or "it exited before saying hello")
        assert proc.stderr is not None
        proc.stderr.close()
        ours.settimeout(_CONTROL_TIMEOUT_S)
        self._proc, self._sock = proc, ours
        self.ns_pid = int(hello["pid"])
        self.layers = {k: v is True for k, v in dict(hello["layers"]).items()}
        self.layers.update(self._namespaces())
        self.missing = [str(m) for m in hello.get("missing", [])]
        return ""

    def _host_pid(self) -> int | None:
        """The zygote's pid as this process sees it (it differs inside a pid namespace)."""
        if self._proc is None:
            return None
        tree = _descendants(self._proc.pid, _parent_map()) | {self._proc.pid}
        return next((p for p in sorted(tree) if _ns_pid(p) == self.ns_pid), None)

    def _namespaces(self) -> dict[str, bool]:
        """Whether the zygote (hence every instance) sits in its own pid and network namespaces."""
        pid = self._host_pid()
        found = {}
        for ns, layer in (("pid", "pid_namespace"), ("net", "net_namespace")):
            try:
                found[layer] = os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
            except OSError:
                found[layer] = False
        return found

    @property
    def alive(self) -> bool:
        """Whether the zygote process is still running."""
        return self._proc is not None and self._proc.poll() is None

    def request(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> dict[str, Any]:
        """One control request and its reply; a dead or silent zygote raises SandboxError(crash)."""
        with self._lock:
            if self._sock is None:
                raise SandboxError("crash", "the sandbox is closed; start a new Sandbox")
            try:
                socket.send_fds(self._sock, [json.dumps(message).encode()], list(fds))
                reply = json.loads(self._sock.recv(_PACKET) or b"null")
            except (OSError, ValueError) as exc:
                raise SandboxError(
                    "crash", f"the sandbox zygote stopped answering ({exc}); restart it"
                ) from exc
        if not isinstance(reply, dict) or "error" in reply:
            raise SandboxError("crash", f"the sandbox zygote failed a request: {reply!r:.200}")
        return reply

    def spawn(self, sock_fd: int, serial: int) -> int:
        """Fork a hardened child serving ``sock_fd``; returns its pid (in the zygote's namespace)."""
        return int(self.request({"op": "spawn", "serial": serial}, (sock_fd,))["pid"])

    def kill(self, pid: int, grace: float = 0.0) -> dict[str, Any]:
        """End ``pid`` (after ``grace`` s for it to exit by itself) and return ``{"status", "killed"}``."""
        return self.request({"op": "kill", "pid": pid, "grace": grace})

    def children(self) -> list[int]:
        """Pids of instance processes not yet reaped (zygote namespace)."""
        return [int(p) for p in self.request({"op": "list"})["pids"]]

    def host_pids(self) -> list[int]:
        """Host pids of every live process under the zygote (instances), from /proc."""
        zygote = self._host_pid()
        return sorted(_descendants(zygote, _parent_map())) if zygote is not None else []

    def close(self) -> None:
        """Hang up; the zygote kills every child and exits (killed after 5 s if it does not)."""
        with self._lock:
            sock, proc, self._sock = self._sock, self._proc, None
        if sock is not None:
            sock.close()
        if proc is not None:
            _stop(proc, "", wait=5.0)


def _stop(proc: subprocess.Popen[bytes], detail: str, wait: float = 2.0) -> str:
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    err = b""
    if proc.stderr is not None and not proc.stderr.closed:
        with contextlib.suppress(OSError):
            err = proc.stderr.read()[-2000:]
        proc.stderr.close()
    tail = err.decode(errors="replace").strip().splitlines()[-3:]
    return "; ".join(filter(None, [detail, f"exit status {proc.returncode}", *tail]))


def _parent_map() -> dict[int, int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def _descendants(root: int, parents: dict[int, int]) -> set[int]:
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _ns_pid(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return -1


def wait_gone(host_pids: list[int], timeout: float) -> list[int]:
    """Poll until none of ``host_pids`` exists (or ``timeout``); returns those still present."""
    deadline = time.monotonic() + timeout
    left = [p for p in host_pids if Path(f"/proc/{p}").exists()]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if Path(f"/proc/{p}").exists()]
    return left
