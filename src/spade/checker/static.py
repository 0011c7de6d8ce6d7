"""Rungs 1–2 of the ladder: parse the source and check it statically (never executes it)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from spade.checker.findings import Finding, FindingCode, finding
from spade.checker.rng import rng_findings
from spade.pyast import parse_module
from spade.replies import extract_code, looks_truncated

_NATIVE_BASES = frozenset({"TextEnv", "ToolEnv"})
_OFFICIAL_TOOL_BASE = "ToolUseBaseEnv"
_INJECTED_MODULES = (
    "collections", "copy", "functools", "heapq", "itertools", "json", "math", "operator", "random", "re",
    "statistics", "string",
)  # fmt: skip
"""Modules the loader pre-injects into every environment namespace (official-format compatibility)."""
_FORBIDDEN_NAMES = frozenset(
    {
        "open",
        "eval",
        "exec",
        "compile",
        "__import__",
        "input",
        "breakpoint",
        "exit",
        "quit",
        "globals",
        "vars",
    }
)
_FORBIDDEN_ATTRS = frozenset(
    {
        "__subclasses__", "__globals__", "__builtins__", "__code__", "__closure__", "__mro__", "__bases__",
        "__base__", "__getattribute__", "__reduce__", "__reduce_ex__", "__loader__", "__spec__", "__import__",
        "__self__", "__func__", "__dict__", "f_globals", "f_locals", "f_back", "gi_frame", "tb_frame",
        "co_code", "__traceback__",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class StaticInfo:
    """What the static rungs learned about the source."""

    code: str
    class_name: str
    official_format: bool
    """No ``ENV`` and no native base class: the authors' format (which seeds the global RNG in reset)."""
    tool_env: bool


def parse(text: str, max_chars: int) -> tuple[str | None, ast.Module | None, list[Finding]]:
    """Rung 1: the code (extracted from a reply when the text is not Python itself) and its AST."""
    code = text
    try:
        tree = parse_module(code)
    except SyntaxError as exc:
        extracted = extract_code(text)
        if extracted is None:
            looks_like_code = any(k in text for k in ("class ", "def ", "import "))
            return None, None, [_syntax(exc, text) if looks_like_code else _no_code()]
        code = extracted
        try:
            tree = parse_module(code)
        except SyntaxError as inner:
            return code, None, [_syntax(inner, text)]
    if len(code) > max_chars:
        msg = (
            f"the source has {len(code)} characters, over the limit of {max_chars}. Likely cause: "
            "large embedded data or repeated code. Fix: generate data from self.rng in reset and keep the "
            "environment to one focused class."
        )
        return code, None, [finding(FindingCode.SOURCE_TOO_LARGE, "parse", msg)]
    return code, tree, []


def _no_code() -> Finding:
    return finding(
        FindingCode.NO_CODE,
        "parse",
        "no Python code found. Likely cause: the reply has no ```python block or stopped before writing one. "
        "Fix: answer with the complete environment in a single ```python fenced block.",
    )


def _syntax(exc: SyntaxError, text: str) -> Finding:
    where = f"line {exc.lineno}" + (f": {exc.text.strip()!r}" if exc.text else "")
    if looks_truncated(text):
        cause = "the reply was cut off inside the code block (token budget)"
        fix = "write a shorter environment so the whole class fits"
    else:
        cause = "invalid Python, often an unescaped brace in an f-string or an unclosed bracket"
        fix = "correct the statement at that line"
    return finding(
        FindingCode.SYNTAX_ERROR, "parse", f"{exc.msg} at {where}. Likely cause: {cause}. Fix: {fix}."
    )


def check_static(
    code: str, tree: ast.Module, *, allowed_imports: tuple[str, ...], strict_rng: bool
) -> tuple[StaticInfo | None, list[Finding]]:
    """Rung 2: one environment class, required methods and signatures, imports, calls and RNG use."""
    nodes = list(ast.walk(tree))
    findings = _imports(nodes, allowed_imports) + _forbidden_calls(nodes, _module_names(nodes))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    name, found = _env_class(tree, classes)
    findings += found
    if name is None:
        return None, findings
    chain = _chain(name, classes)
    bases = {b for c in chain for b in _base_names(c)}
    official = not (bases & _NATIVE_BASES) and _declared_env(tree) is None
    tool_env = bool(bases & {"ToolEnv", _OFFICIAL_TOOL_BASE})
    findings += _methods(name, chain, bases)
    findings += rng_findings(nodes, official=official, strict=strict_rng)
    return StaticInfo(code, name, official, tool_env), findings


def _imports(nodes: list[ast.AST], allowed: tuple[str, ...]) -> list[Finding]:
    bad: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if not _allowed(a.name, allowed)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or not _allowed(module, allowed):
                bad.append(module)
    if not bad:
        return []
    names = ", ".join(sorted(set(bad)))
    msg = (
        f"imports outside the allow-list: {names}. Likely cause: file, network, process or third-party "
        f"access, which environments never need. Fix: use only {', '.join(sorted(allowed))}."
    )
    return [finding(FindingCode.FORBIDDEN_IMPORT, "static", msg)]


def _allowed(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def _module_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound to modules: the loader's pre-injected ones and every import."""
    names = set(_INJECTED_MODULES)
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


def _forbidden_calls(nodes: list[ast.AST], modules: set[str]) -> list[Finding]:
    bad: set[str] = set()
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FORBIDDEN_NAMES
        ):
            bad.add(f"{node.func.id}()")
        elif isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRS:
            bad.add(f".{node.attr}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            bad.add(f"{node.value.id}.{node.attr}")  # module internals such as random._os
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            bad.add("__builtins__")
    if not bad:
        return []
    msg = (
        f"uses {', '.join(sorted(bad))}. Likely cause: reading input, files or interpreter internals, which "
        "the sandbox forbids. Fix: keep all state in the instance and take input only through step(action)."
    )
    return [finding(FindingCode.FORBIDDEN_CALL, "static", msg)]


def _declared_env(tree: ast.Module) -> str | None:
    """The class named by a module-level ``ENV = Name``."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "ENV" for t in node.targets)
            and isinstance(node.value, ast.Name)
        ):
            return node.value.id
    return None


def _base_names(cls: ast.ClassDef) -> list[str]:
    out = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            out.append(base.id)
        elif isinstance(base, ast.Attribute):
            out.append(base.attr)
    return out


def _chain(name: str, classes: dict[str, ast.ClassDef]) -> list[ast.ClassDef]:
    """The class and its ancestors defined in this module (depth first, no repeats)."""
    out: list[ast.ClassDef] = []
    todo = [name]
    while todo:
        current = todo.pop(0)
        cls = classes.get(current)
        if cls is None or cls in out:
            continue
        out.append(cls)
        todo += _base_names(cls)
    return out


def _env_class(tree: ast.Module, classes: dict[str, ast.ClassDef]) -> tuple[str | None, list[Finding]]:
    declared = _declared_env(tree)
    if declared is not None:
        if declared in classes:
            if {b for c in _chain(declared, classes) for b in _base_names(c)} & _NATIVE_BASES:
                return declared, []
            msg = f"ENV = {declared}, which does not subclass TextEnv. Fix: `class {declared}(TextEnv):`."
            return None, [finding(FindingCode.NO_ENV_CLASS, "static", msg)]
        msg = (
            f"ENV = {declared}, but no class {declared} is defined in this file. Fix: define the environment "
            "class in the file and set ENV to it."
        )
        return None, [finding(FindingCode.NO_ENV_CLASS, "static", msg)]
    candidates = [
        n for n in classes if n.endswith("Env") and n != _OFFICIAL_TOOL_BASE and _has_reset_step(n, classes)
    ]
    parents = {b for n in candidates for b in _base_names(classes[n])}
    leaves = [n for n in candidates if n not in parents]
    if not leaves:
        msg = (
            "no environment class. Fix: define one class that subclasses spade.env.TextEnv and set "
            "`ENV = ClassName` (official format: one class whose name ends in 'Env' with reset() and step())."
        )
        return None, [finding(FindingCode.NO_ENV_CLASS, "static", msg)]
    if len(leaves) > 1:
        msg = (
            f"several candidate environment classes ({', '.join(leaves)}). Fix: keep one environment class, "
            "or set `ENV = ClassName` to choose it (helper classes should not end in 'Env')."
        )
        return None, [finding(FindingCode.MULTIPLE_ENV_CLASSES, "static", msg)]
    name = leaves[0]
    if {b for c in _chain(name, classes) for b in _base_names(c)} & _NATIVE_BASES:
        msg = f"{name} subclasses TextEnv but the file has no `ENV = {name}`. Fix: add that line at the end."
        return name, [finding(FindingCode.ENV_NOT_DECLARED, "static", msg)]
    return name, []


def _has_reset_step(name: str, classes: dict[str, ast.ClassDef]) -> bool:
    """Whether the class has (or inherits) reset and step, as the loader requires of a candidate."""
    chain = _chain(name, classes)
    if {b for c in chain for b in _base_names(c)} & (_NATIVE_BASES | {_OFFICIAL_TOOL_BASE}):
        return True
    methods = {n.name for c in chain for n in c.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return {"reset", "step"} <= methods


def _methods(name: str, chain: list[ast.ClassDef], bases: set[str]) -> list[Finding]:
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for cls in reversed(chain):
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                defs[node.name] = node
    native = bool(bases & _NATIVE_BASES)
    required: list[tuple[str, ...]] = []
    if not bases & {"ToolEnv", _OFFICIAL_TOOL_BASE}:
        required.append(("step",))
    required.append(("_reset", "reset") if native else ("reset",))
    if "ToolEnv" in bases:
        required.append(("check_answer",))
    missing = [" or ".join(alts) for alts in required if not any(a in defs for a in alts)]
    findings = []
    if missing:
        msg = (
            f"{name} does not define {', '.join(missing)}. Fix: implement "
            + ("_reset(self, options) -> (obs, info) and step(self, action) -> 5-tuple." if native else
               "reset(self, seed=None) -> (obs, info) and step(self, action) -> 5-tuple.")
        )  # fmt: skip
        findings.append(finding(FindingCode.MISSING_METHOD, "static", msg))
    return findings + _signatures(name, defs, native)


def _positional(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int, bool]:
    """(required positional params after self, total positional params after self, has *args)."""
    args = fn.args
    params = [*args.posonlyargs, *args.args][1:]
    required = len(params) - len(args.defaults)
    return max(required, 0), len(params), args.vararg is not None


def _accepts_keyword(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    args = fn.args
    names = {a.arg for a in [*args.args, *args.kwonlyargs]}
    return name in names or args.kwarg is not None


def _signatures(
    name: str, defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], native: bool
) -> list[Finding]:
    problems: list[str] = []
    step = defs.get("step")
    if step is not None:
        required, total, star = _positional(step)
        if required > 1 or (total < 1 and not star):
            problems.append("step(self, action) must take exactly one action argument")
    reset = defs.get("reset")
    if reset is not None:
        if _positional(reset)[0] > 0 or not _accepts_keyword(reset, "seed"):
            problems.append("reset must accept reset(seed=None) with every other parameter optional")
        if native and not _accepts_keyword(reset, "options"):
            problems.append("a TextEnv's reset must accept options=None (or override _reset instead)")
    if "_reset" in defs and native and _positional(defs["_reset"])[0] > 1:
        problems.append("_reset(self, options) takes exactly one argument")
    init = defs.get("__init__")
    if init is not None and _positional(init)[0] > 0:
        problems.append("__init__ must be callable without arguments (give every parameter a default)")
    if init is not None and native and not _accepts_keyword(init, "max_turns"):
        problems.append("a TextEnv's __init__ must accept max_turns=None and pass it to super().__init__")
    for method in ("solution", "close"):
        if method in defs and _positional(defs[method])[0] > 0:
            problems.append(f"{method}(self) takes no arguments")
    if not problems:
        return []
    return [finding(FindingCode.BAD_SIGNATURE, "static", f"{name}: " + "; ".join(problems) + ".")]
