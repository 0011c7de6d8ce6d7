"""The retail and telecom tools as tau2's agent and user see them: OpenAI schemas and tool types.

``data/tau2_tools.json`` holds, per toolkit (``retail``, ``telecom``, ``telecom_user``), each tool's
``Tool.openai_schema`` (``src/tau2/environment/tool.py``: the docstring's summary and long description,
the pydantic model of the parameters with each ``Args:`` line as its description) and its ``@is_tool`` type,
in the toolkit's order, as tau2-bench (sierra-research/tau2-bench, MIT licence; commit a2c0247) builds them
from ``src/tau2/domains/retail/tools.py``, ``src/tau2/domains/telecom/tools.py`` and ``user_tools.py``.
They are written out rather than rebuilt here because tau2 derives them from docstrings with pydantic and
docstring_parser; the airline schemas are written out in :mod:`spade.evals.tau2_airline_model`.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from spade.types import ToolSchema

TOOLKITS = ("retail", "telecom", "telecom_user")


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files("spade.evals").joinpath("data/tau2_tools.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def tool_schemas(toolkit: str) -> tuple[ToolSchema, ...]:
    """The toolkit's tools as OpenAI schemas, in tau2's order."""
    return tuple(_table()[toolkit]["tools"])


def tool_types(toolkit: str) -> dict[str, str]:
    """Tool name -> ``ToolType`` (read, write, generic) of the toolkit."""
    return dict(_table()[toolkit]["types"])
