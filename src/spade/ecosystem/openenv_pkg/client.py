"""The package's client: a persistent WebSocket session with the server (OpenEnv's ``EnvClient``)."""

from __future__ import annotations

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from .models import SpadeAction, SpadeObservation, SpadeState


class SpadeEnvClient(EnvClient[SpadeAction, SpadeObservation, SpadeState]):
    """Async client (``.sync()`` for a blocking one); ``reset(seed=s, env_id=e)`` picks the instance."""

    def _step_payload(self, action: SpadeAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SpadeObservation]:
        data = dict(payload.get("observation", {}))
        observation = SpadeObservation(
            **data, done=bool(payload.get("done", False)), reward=payload.get("reward")
        )
        return StepResult(observation=observation, reward=payload.get("reward"), done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> SpadeState:
        return SpadeState(**payload)
