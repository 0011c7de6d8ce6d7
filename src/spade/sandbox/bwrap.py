"""The bubblewrap command line around the zygote: read-only root, private /tmp, hidden homes, namespaces."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HIDDEN: tuple[str, ...] = ("/root", "/home", "/tmp", "/var/tmp", "/run", "/mnt", "/media", "/srv")
"""Directories replaced by empty tmpfs mounts; the interpreter's own paths under them are bound back."""


def find() -> str | None:
    """Path of the ``bwrap`` executable, or None when it is not installed."""
    return shutil.which("bwrap")


def _needed_paths() -> list[str]:
    """Paths the interpreter reads: prefixes, the executable's directory and every existing sys.path entry."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(str(Path(sys.executable).parent))
    paths.add(str(Path(os.path.realpath(sys.executable)).parent))
    paths.update(p for p in sys.path if p)
    return sorted(os.path.realpath(p) for p in paths if os.path.exists(p))


def _rebinds() -> list[str]:
    """Bind the needed paths under hidden folders back, their parents made world-traversable (bwrap creates
    them 0700, and after the per-instance UID drop nothing new could be imported through them)."""
    args: list[str] = []
    made: set[str] = set()
    bound: list[str] = []
    for path in _needed_paths():
        hidden = next((h for h in HIDDEN if path == h or path.startswith(h + "/")), None)
        if hidden is None:
            continue
        parent = Path(path).parent
        parents = [p for p in (parent, *parent.parents) if str(p).startswith(hidden + "/")]
        for p in reversed(parents):
            inside = any(str(p) == b or str(p).startswith(b + "/") for b in bound)
            if str(p) not in made and not inside:  # nothing is made inside a read-only bind
                made.add(str(p))
                args += ["--perms", "0755", "--dir", str(p)]
        bound.append(path)
        args += ["--ro-bind", path, path]
    return args


def command(executable: str, as_root: bool) -> list[str]:
    """The bwrap prefix that runs the zygote (``executable`` is the bwrap binary)."""
    args = [executable, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for hidden in HIDDEN:
        if os.path.isdir(hidden):
            args += ["--tmpfs", hidden]
    args += _rebinds()
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--new-session", "--chdir", "/"]
    if as_root:
        # The zygote keeps only what it needs: switching instances to their own UID/GID and killing them.
        args += ["--cap-drop", "ALL"]
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL"):
            args += ["--cap-add", cap]
    return [*args, "--"]
