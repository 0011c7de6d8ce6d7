"""Isolated execution of untrusted environment code: a zygote process and one hardened child per instance.

See SPEC §4. ``Sandbox(limits=Limits(...))`` starts the zygote; ``sb.open(source)`` forks a fresh, single-use
child that loads the source and returns an :class:`EnvHandle`; every value leaving the child is validated by
the harness, and every failure is a :class:`SandboxError` with a ``kind``.
"""

from spade.config.sandbox import LayerMode, Limits
from spade.sandbox.api import LAYER_NAMES, EnvInstance, EnvMeta, EnvRunner, SyncInstance
from spade.sandbox.errors import ERROR_KINDS, ErrorKind, SandboxError
from spade.sandbox.handle import EnvHandle
from spade.sandbox.harness import Sandbox

__all__ = [
    "ERROR_KINDS",
    "LAYER_NAMES",
    "EnvHandle",
    "EnvInstance",
    "EnvMeta",
    "EnvRunner",
    "ErrorKind",
    "LayerMode",
    "Limits",
    "Sandbox",
    "SandboxError",
    "SyncInstance",
]
