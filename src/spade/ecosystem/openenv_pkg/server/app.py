"""The FastAPI app (HTTP and WebSocket endpoints of OpenEnv) serving the package's environments.

Run: ``python -m <package>.server.app --host 127.0.0.1 --port 8000`` (or ``uvicorn <package>.server.app:app``).
"""

from __future__ import annotations

import argparse

from openenv.core.env_server.http_server import create_app

from ..models import SpadeAction, SpadeObservation
from .environment import SpadeEnvironment

MAX_SESSIONS = 64
"""Concurrent WebSocket sessions; each holds at most one live sandboxed instance."""

app = create_app(
    SpadeEnvironment, SpadeAction, SpadeObservation, env_name="spade", max_concurrent_envs=MAX_SESSIONS
)


def main() -> None:
    """Serve on ``--host`` / ``--port``."""
    import uvicorn  # noqa: PLC0415 - only the server process needs it

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
