"""The lines of a subprocess's stream as they come, for tests that act on what a running command prints."""

from __future__ import annotations

import queue
import threading
from typing import IO


def lines(stream: IO[str]) -> queue.Queue[str]:
    """The stream's lines as they come, then "" at its end (read by a daemon thread)."""
    out: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            out.put(line)
        out.put("")

    threading.Thread(target=pump, daemon=True).start()
    return out
