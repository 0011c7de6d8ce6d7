"""Tool-use rung: schemas are valid OpenAI function schemas, and bad arguments never crash a tool."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from spade.checker.findings import Finding, FindingCode, finding
from spade.checker.probes import random_word

_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_MISMATCH = re.compile(
    r"unexpected keyword argument|missing \d+ required (positional|keyword)|takes \d+ positional", re.I
)
Call = tuple[str, dict[str, Any]]


def _param_problems(name: str, params: Any) -> list[str]:
    if not isinstance(params, dict) or params.get("type") != "object":
        return [f"{name}: parameters must be a JSON schema with type 'object'"]
    props = params.get("properties", {})
    if not isinstance(props, dict):
        return [f"{name}: parameters.properties must be an object"]
    problems = []
    for pname, pschema in props.items():
        kind = pschema.get("type") if isinstance(pschema, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        has_alt = isinstance(pschema, dict) and any(k in pschema for k in ("enum", "anyOf", "oneOf", "$ref"))
        if not has_alt and not all(k in _JSON_TYPES for k in kinds):
            problems.append(f"{name}.{pname}: type must be one of {', '.join(sorted(_JSON_TYPES))}")
    required = params.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        problems.append(f"{name}: every name in 'required' must be a property")
    return problems


def schema_problems(schemas: Sequence[dict[str, Any]]) -> list[str]:
    """What is wrong with a list of OpenAI function schemas (empty when they are fine)."""
    if not schemas:
        return ["a tool environment offers no tools (after reset)"]
    problems: list[str] = []
    seen: set[str] = set()
    for i, schema in enumerate(schemas):
        fn = schema.get("function") if schema.get("type") == "function" else None
        if not isinstance(fn, dict):
            problems.append(f"tool {i}: expected {{'type': 'function', 'function': {{...}}}}")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(f"tool {i}: name must be an identifier, got {name!r}")
            continue
        if name in seen:
            problems.append(f"{name}: declared twice")
        seen.add(name)
        if not isinstance(fn.get("description", ""), str):
            problems.append(f"{name}: description must be a string")
        problems += _param_problems(name, fn.get("parameters", {"type": "object", "properties": {}}))
    return problems


def _value(rng: random.Random, kind: str) -> Any:
    return {
        "string": random_word(rng),
        "number": round(rng.uniform(-5, 100), 2),
        "integer": rng.randint(-3, 50),
        "boolean": rng.random() < 0.5,
        "array": [random_word(rng)],
        "object": {random_word(rng): rng.randint(0, 9)},
        "null": None,
    }.get(kind, random_word(rng))


def _wrong(rng: random.Random, kind: str) -> Any:
    choices: dict[str, list[Any]] = {
        "string": [rng.randint(0, 99), None, [1, 2], {"x": 1}, True],
        "number": ["abc", None, [], {"n": 1}, ""],
        "integer": ["seven", 2.5, None, [3], ""],
        "boolean": ["maybe", 3, None],
        "array": [5, "a,b", None, {"a": 1}],
        "object": ["x", 7, None, [1]],
    }
    return rng.choice(choices.get(kind, [None, 12345, [], {}]))


def _kind(schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return kind if isinstance(kind, str) else "string"


def probe_calls(
    schemas: Sequence[dict[str, Any]], rng: random.Random, per_tool: int = 4
) -> tuple[list[Call], list[Call]]:
    """``(bad_calls, well_typed_calls)``: missing, wrong-typed, extra and unknown arguments or tool names, and
    calls whose argument names and types follow the schema exactly (they must not be rejected as unknown)."""
    bad: list[Call] = [(f"{random_word(rng)}_{rng.randint(0, 99)}", {})]
    good: list[Call] = []
    for schema in schemas[:16]:
        fn = schema["function"]
        props: dict[str, Any] = fn.get("parameters", {}).get("properties", {})
        kinds: dict[str, str] = {p: _kind(s) for p, s in props.items()}
        typed = {p: _value(rng, k) for p, k in kinds.items()}
        candidates: list[dict[str, Any]] = [
            {},
            {p: _wrong(rng, k) for p, k in kinds.items()},
            {**typed, random_word(rng) + "_x": rng.randint(0, 9)},
            {p: random_word(rng) * rng.randint(50, 200) for p in kinds},
        ]
        if props and rng.random() < 0.5:
            candidates.append({rng.choice(list(props)): _wrong(rng, "string")})
        bad += [(fn["name"], args) for args in rng.sample(candidates, min(per_tool, len(candidates)))]
        good.append((fn["name"], typed))
    return bad, good


def mismatch_findings(good: Sequence[Call], outputs: Sequence[str]) -> list[Finding]:
    """TOOL_SCHEMA when a call using exactly the schema's parameter names is refused as a signature error."""
    for (name, args), output in zip(good, outputs, strict=False):
        if _MISMATCH.search(output):
            msg = (
                f"calling {name} with its schema's parameters {sorted(args)} fails: {output[:160]!r}. Fix: "
                f"make tool_{name}'s parameter names match the schema's properties exactly."
            )
            return [finding(FindingCode.TOOL_SCHEMA, "tools", msg)]
    return []


def schema_findings(schemas: Sequence[dict[str, Any]]) -> list[Finding]:
    """TOOL_SCHEMA for invalid schemas."""
    problems = schema_problems(schemas)
    if not problems:
        return []
    msg = (
        "invalid tool schemas: "
        + "; ".join(problems[:6])
        + ". Fix: declare each tool as {'type': 'function', "
        "'function': {'name', 'description', 'parameters': {'type': 'object', 'properties': {...}, "
        "'required': [...]}}}."
    )
    return [finding(FindingCode.TOOL_SCHEMA, "tools", msg)]
