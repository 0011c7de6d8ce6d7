"""spade environments served with OpenEnv: every episode runs in spade's sandbox.

``python -m <package>.server.app --port 8000`` serves the environments of ``envs/``; :class:`SpadeEnvClient`
plays them (``reset(seed=..., env_id=...)``, then ``step(SpadeAction(message=...))`` until ``done``).
"""

from .client import SpadeEnvClient
from .models import SpadeAction, SpadeObservation, SpadeState

__all__ = ["SpadeAction", "SpadeEnvClient", "SpadeObservation", "SpadeState"]
