"""spade environments as a verifiers taskset: multi-turn, scored by each environment's own reward.

Load it with verifiers' loader, e.g. ``vf.load_environment(resolve_env_config({"taskset": {"id": "<package>"}}))``;
every episode runs in spade's sandbox (``spade`` must be installed).
"""

from .taskset import SpadeData, SpadeEnv, SpadeEnvConfig, SpadeTask, SpadeTaskset, SpadeTasksetConfig

__all__ = ["SpadeData", "SpadeEnv", "SpadeEnvConfig", "SpadeTask", "SpadeTaskset", "SpadeTasksetConfig"]
