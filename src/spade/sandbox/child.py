"""A forked instance process: hardening before any untrusted code, then one environment served over a socket.

Runs only in a child of the zygote. :func:`harden` applies, in order: new session, stdio to /dev/null, every
other descriptor closed, empty environment, resource limits, the per-instance UID, parent-death signal,
PR_SET_NO_NEW_PRIVS and the system-call filter; :func:`run` then adds the Python tripwires
(:mod:`spade.sandbox.guard`).
:func:`serve` then answers newline-delimited JSON requests (:mod:`spade.sandbox.calls`) until EOF.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
from dataclasses import dataclass

from spade.config.sandbox import Limits
from spade.sandbox import calls, guard
from spade.sandbox.seccomp import Installer, no_new_privs_only

SOCK_FD = 3
"""The instance end of the harness socket, after hardening."""
EXIT_HARDEN_FAILED = 90
"""Exit status of a child that could not apply a required layer (the harness reports it)."""
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """What the zygote decided every child applies (probed once at zygote start)."""

    limits: Limits
    seccomp: Installer | None
    """The compiled filter, or None when the seccomp layer is off."""
    drop_uid: bool
    """Whether each instance runs under its own UID/GID (``uid_base + serial % uid_count``)."""
    devnull: int
    """An open descriptor of /dev/null."""

    def uid(self, serial: int) -> int | None:
        """The UID/GID of instance number ``serial`` (None: keep the zygote's identity)."""
        if not self.drop_uid:
            return None
        return self.limits.uid_base + serial % self.limits.uid_count


def harden(sock_fd: int, plan: ChildPlan, uid: int | None) -> None:
    """Apply every layer of ``plan`` to the calling (freshly forked, single-threaded) process."""
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-size write fails with EFBIG instead of killing
    signal.signal(signal.SIGVTALRM, signal.SIG_DFL)  # the per-call CPU-time limit (calls.Session) kills
    for fd in (0, 1, 2):
        os.dup2(plan.devnull, fd)
    if sock_fd != SOCK_FD:
        os.dup2(sock_fd, SOCK_FD)
    os.closerange(SOCK_FD + 1, _max_fd())
    os.set_inheritable(SOCK_FD, False)
    os.environ.clear()
    os.chdir("/")
    _set_limits(plan.limits)
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    parent = os.getppid()
    _pdeathsig()
    if os.getppid() != parent:  # the zygote died between fork and here
        os._exit(EXIT_HARDEN_FAILED)
    if plan.seccomp is not None:
        plan.seccomp.install()
    else:
        no_new_privs_only()


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


def _set_limits(lim: Limits) -> None:
    address_space = lim.address_space_mb << 20
    for name, value in (
        (resource.RLIMIT_AS, address_space),
        (resource.RLIMIT_NOFILE, lim.open_files),
        (resource.RLIMIT_FSIZE, lim.file_size_bytes),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_NPROC, 0),
    ):
        resource.setrlimit(name, (value, value))
    resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_seconds, lim.cpu_seconds + 1))


LIBC = ctypes.CDLL(None, use_errno=True)
"""The C library, opened once in the zygote (children inherit it)."""


def _pdeathsig() -> None:
    """Die with the zygote; and never dump core or be traced (``/proc/<pid>`` becomes root-only)."""
    if LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def serve(sock: socket.socket, limits: Limits) -> int:
    """Answer requests on ``sock`` until the harness hangs up; returns the exit status."""
    session = calls.Session(limits)
    buffer = b""
    while True:
        newline = buffer.find(b"\n")
        while newline < 0:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return 0
            buffer += chunk
            newline = buffer.find(b"\n", len(buffer) - len(chunk))
        line, buffer = buffer[:newline], buffer[newline + 1 :]
        request = json.loads(line)
        sock.sendall(session.answer(request))


def run(sock_fd: int, plan: ChildPlan, serial: int) -> None:
    """The whole life of an instance process; never returns."""
    try:
        harden(sock_fd, plan, plan.uid(serial))
        sock = socket.socket(fileno=SOCK_FD)
        guard.install()
    except BaseException:
        os._exit(EXIT_HARDEN_FAILED)
    try:
        status = serve(sock, plan.limits)
    except BaseException:
        status = 1
    os._exit(status)
