"""The system-call deny-list of an instance: compiled once in the zygote, installed in every child.

Everything not listed is allowed (Python needs a broad base set), and the list removes what an environment
never needs: creating sockets, processes and threads, writing or changing files, signalling other processes,
changing identity, and the kernel interfaces that sandbox escapes use. Denied calls fail with EPERM, so the
environment sees an ordinary ``PermissionError`` (and the child reports ``forbidden``). Foreign
architectures (i386 system calls from a 64-bit process) kill the process.

The filter is built with libseccomp (through ``pyseccomp``) and exported as a raw BPF program, which the
child installs with one ``prctl`` call after ``PR_SET_NO_NEW_PRIVS``.
"""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

from spade.errors import SpadeError

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C

DENIED: tuple[str, ...] = (
    # network and descriptor passing
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    "sendmsg", "sendmmsg", "recvmsg", "recvmmsg",
    # processes, threads, signals to anything
    "fork", "vfork", "clone", "clone3", "execve", "execveat",
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv", "process_vm_writev",
    "setsid", "setpgid", "unshare", "setns", "kcmp",
    # file writes and metadata changes (open/openat are filtered on their flags below)
    "creat", "openat2", "open_by_handle_at", "name_to_handle_at", "mkdir", "mkdirat", "rmdir",
    "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate", "ftruncate",
    "fallocate", "mknod", "mknodat", "utime", "utimes", "utimensat", "futimesat",
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
    "memfd_create", "memfd_secret",
    # mounts and file systems
    "mount", "umount2", "pivot_root", "chroot", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount",
    "open_tree", "mount_setattr", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    # identity and privileges
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
    "setgroups", "capset", "personality",
    # kernel interfaces
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "syslog", "iopl", "ioperm", "modify_ldt", "lookup_dcookie", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "fanotify_init", "landlock_create_ruleset", "uselib", "migrate_pages", "move_pages",
)  # fmt: skip
"""System calls an instance may not make at all."""

_WRITE_FLAGS = (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND)


class SeccompUnavailableError(SpadeError):
    """libseccomp (or the pyseccomp binding) is missing or refused the filter."""


def build_program() -> bytes:
    """Compile the deny-list to a raw BPF program for this machine's architecture."""
    try:
        import pyseccomp as sc  # noqa: PLC0415 - optional at run time: absent means no seccomp layer
    except (ImportError, OSError, RuntimeError) as exc:
        raise SeccompUnavailableError(f"pyseccomp/libseccomp not usable: {exc}") from None
    try:
        filt = sc.SyscallFilter(sc.ALLOW)
        if sc.system_arch() == sc.Arch.X86_64:
            filt.add_arch(sc.Arch.X32)  # x32 system calls share the 64-bit audit arch: deny them too
        deny = sc.ERRNO(errno.EPERM)
        for name in DENIED:
            _add(sc, filt, deny, name)
        for flag in _WRITE_FLAGS:
            _add(sc, filt, deny, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
            _add(sc, filt, deny, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
        for request in (_TIOCSTI, _TIOCLINUX):
            _add(sc, filt, deny, "ioctl", sc.Arg(1, sc.EQ, request))
        return _export(filt)
    except OSError as exc:
        raise SeccompUnavailableError(f"libseccomp refused the filter: {exc}") from None


def _add(sc: Any, filt: Any, action: int, name: str, *args: Any) -> None:
    try:
        number = sc.resolve_syscall(sc.Arch.NATIVE, name)
    except (OSError, ValueError):
        return  # not a system call on this architecture (e.g. `open` on aarch64)
    if number < 0:
        return
    filt.add_rule(action, number, *args)


def _export(filt: Any) -> bytes:
    read_fd, write_fd = os.pipe()
    try:
        with open(write_fd, "wb", closefd=True) as sink:
            filt.export_bpf(sink)
        chunks = []
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise SeccompUnavailableError(f"libseccomp exported a malformed BPF program ({len(program)} bytes)")
    return program


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def _prctl() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    prctl.restype = ctypes.c_int
    return prctl


class Installer:
    """Holds a compiled program and installs it in the calling process (no allocation at install time)."""

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self._prctl = _prctl()

    def no_new_privs(self) -> None:
        """Set PR_SET_NO_NEW_PRIVS: no exec can ever gain privileges (required for an unprivileged filter)."""
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")

    def install(self) -> None:
        """Install the filter on the calling thread (the process is single-threaded)."""
        self.no_new_privs()
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


def no_new_privs_only() -> None:
    """Set PR_SET_NO_NEW_PRIVS without a filter (when seccomp is off or unavailable)."""
    if _prctl()(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
