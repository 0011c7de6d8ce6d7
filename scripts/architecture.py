"""Measure the package's shape against the architecture targets (docs/architecture.md).

    python scripts/architecture.py            # the table (exit 1 when a target is missed)
    python scripts/architecture.py --json     # the figures as JSON
    python scripts/architecture.py --details  # and what each figure counts

Static figures come from the source's syntax trees (``src/spade``): import cycles (module-level imports and
imports inside functions; imports under ``if TYPE_CHECKING`` are not run and are left out), what the config
layer imports, where ``cfg.mode`` is read, which modules parse model replies, files over 450 lines (the seed
environments in ``envs/library`` aside) and functions over 50 lines.

The walks come from running one self-play step of ``cpu-tiny`` on the scripted backend (a few seconds, in a
temporary folder): the files whose functions receive the run config or one of its sections during the step,
and during its design phase (the files a reader follows to see where a step's behaviour comes from); and the
sections that functions handed the whole config read through it (each a function reaching up for a part).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import io
import json
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "spade"
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 50
EXEMPT = ("spade.envs.library.", "spade.envs.official_fixtures.")
"""Seed environments: single-file programs the designer reads as examples, exempt from the size limits."""
CONFIG = "spade.config"
CONFIG_MAY_IMPORT = ("spade.errors", "spade.types")
PARSE_WORDS = ("parse_", "extract_", "boxed", "reasoning", "verdict")
"""A function whose name holds one of these and whose first parameter is a reply (``text``, ``reply``,
``completion``, ``response``) parses model output. Evaluation suites (``spade.evals``) follow each
benchmark's own rule, and command-line modules parse arguments: neither is counted."""
REPLY_PARAMS = {"reply", "completion", "text", "response"}
STEP = "spade.run.loop:run_step"
"""``module:function``, looked up by the loop in that module's globals: the step (``--step``)."""
DESIGN = "spade.design.phase:DesignPhase.run"
"""``module:function`` or ``module:Class.method``: the design phase (``--design``)."""
LOOP = "spade/run/loop.py"
"""The loop's file, under src (``--loop``)."""
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "types", "pyast", "seeds", "stopping", "resources", "toolcalls", "env"),
    ("config",),
    ("replies", "rundir", "transcripts"),
    ("envs",),
    ("sandbox",),
    ("memory",),
    ("checker",),
    ("cluster",),
    ("ecosystem",),
    ("backends",),
    ("training",),
    ("play",),
    ("design",),
    ("scoring",),
    ("scripted",),
    ("modes",),
    ("evals",),
    ("run",),
    ("cli",),
    ("train",),
)
"""The layer order, bottom first: a package (or a flat module) imports only from its own layer and those below,
``TYPE_CHECKING`` imports included (docs/architecture.md, "Layers")."""
UP_ALLOWED = {("modes", "run"): "a mode's methods are handed the run's Components and LoopState"}
"""Imports up the order that remain, each with its reason: the figure's target counts them."""


# -- static figures ----------------------------------------------------------------------------------------


def modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The package module ``name`` refers to (a module, or the module holding that attribute)."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


@dataclass(frozen=True, slots=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def imports(mods: dict[str, Path], *, type_only: bool = False) -> list[Import]:
    """Every import of a package module by a package module (``TYPE_CHECKING`` blocks left out unless
    ``type_only``)."""
    found = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = set() if type_only else _type_checking_lines(tree)
        nested = {n.lineno for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                  for n in ast.walk(f) if isinstance(n, ast.Import | ast.ImportFrom)}  # fmt: skip
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in skip:
                continue
            for target in _targets(node, package, mods):
                if target != mod:
                    found.append(Import(mod, target, node.lineno, node.lineno in nested))
    return found


def _targets(node: ast.Import | ast.ImportFrom, package: str, mods: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            up = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*up, base] if base else up)
        names = [f"{base}.{a.name}" for a in node.names]
    for name in names:
        if name.startswith("spade") and (target := _resolve(name, mods)):
            yield target


def cycles(found: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.source, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _mode_reads(tree: ast.Module) -> int:
    """``cfg.mode`` / ``<x>.cfg.mode`` / ``config.mode`` reads."""
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "mode":
            owner = node.value
            name = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else ""
            )
            count += name in {"cfg", "config", "train_cfg"}
    return count


def _parses_replies(tree: ast.Module) -> list[str]:
    out = []
    for f in _functions(tree):
        first = [a.arg for a in [*f.args.posonlyargs, *f.args.args]][:1]
        if any(w in f.name.lower() for w in PARSE_WORDS) and set(first) & REPLY_PARAMS:
            out.append(f.name)
    return out


@dataclass
class Static:
    cycles: list[list[str]] = field(default_factory=list)
    in_function_imports: list[str] = field(default_factory=list)
    config_imports: list[str] = field(default_factory=list)
    layer_breaks: list[str] = field(default_factory=list)
    package_cycles: list[list[str]] = field(default_factory=list)
    mode_reads: dict[str, int] = field(default_factory=dict)
    reply_parsers: dict[str, list[str]] = field(default_factory=dict)
    long_files: dict[str, int] = field(default_factory=dict)
    long_functions: dict[str, int] = field(default_factory=dict)
    library_lines: int = 0


def static() -> Static:
    """The figures read from the source."""
    mods = modules()
    found = imports(mods)
    typed = imports(mods, type_only=True)
    s = Static(cycles=cycles(found), layer_breaks=layer_breaks(typed), package_cycles=package_cycles(typed))
    s.in_function_imports = sorted({f"{i.source} -> {i.target}" for i in found if i.in_function})
    s.config_imports = sorted({i.target for i in found if _in(i.source, CONFIG) and not _in(i.target, CONFIG)
                               and i.target not in CONFIG_MAY_IMPORT})  # fmt: skip
    for mod, path in mods.items():
        text = path.read_text()
        tree = ast.parse(text)
        s.library_lines += len(text.splitlines())
        if reads := _mode_reads(tree):
            s.mode_reads[mod] = reads
        if (parsers := _parses_replies(tree)) and not mod.startswith("spade.evals") and "cli" not in mod:
            s.reply_parsers[mod] = parsers
        if mod.startswith(EXEMPT):
            continue
        if (n := len(text.splitlines())) > MAX_FILE_LINES:
            s.long_files[mod] = n
        for f in _functions(tree):
            if (n := (f.end_lineno or f.lineno) - f.lineno + 1) > MAX_FUNCTION_LINES:
                s.long_functions[f"{mod}.{f.name}"] = n
    return s


def unit(mod: str) -> str:
    """The layer unit of a module: its package under ``spade`` (or the flat module itself)."""
    return mod.split(".")[1] if "." in mod else mod


def layer_breaks(found: list[Import]) -> list[str]:
    """Imports up the layer order (:data:`LAYERS`) as ``unit -> unit`` pairs, each with a first example."""
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    out: dict[str, str] = {}
    for i in found:
        a, b = unit(i.source), unit(i.target)
        if "spade" in (a, b) or a == b:
            continue
        for u in (a, b):
            if u not in rank:
                raise SystemExit(f"{u}: not in architecture.LAYERS; place the new package in the layer order")
        if rank[b] > rank[a]:
            out.setdefault(f"{a} -> {b}", f"{i.source}:{i.line} imports {i.target}")
    return [f"{k} ({v})" for k, v in sorted(out.items())]


def package_cycles(found: list[Import]) -> list[list[str]]:
    """Cycles between layer units (``TYPE_CHECKING`` imports included)."""
    units = {Import(unit(i.source), unit(i.target), i.line, i.in_function) for i in found}
    return cycles([i for i in units if i.source != i.target and "spade" not in (i.source, i.target)])


def _in(mod: str, package: str) -> bool:
    return mod == package or mod.startswith(package + ".")


# -- one step, traced --------------------------------------------------------------------------------------


@dataclass
class Walk:
    files: set[str] = field(default_factory=set)
    """Files whose functions received the whole run config (a ``TrainConfig`` argument): the walk."""
    reads: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    """(file, first line) of each such function -> the parameters that held the whole config."""
    section_files: set[str] = field(default_factory=set)
    """Files whose functions received the config or one of its sections."""


def _config_params(frame: FrameType, config_types: tuple[type, ...]) -> list[str]:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = [
        a for a in code.co_varnames[:n] if a not in ("self", "cls")
    ]  # a config's own methods: not a visit
    return [a for a in names if isinstance(frame.f_locals.get(a), config_types)]


def _tracer(
    walks: dict[str, Walk], active: dict[str, set[int]], whole: type, sections: tuple[type, ...]
) -> Callable[..., Any]:
    package = str(PACKAGE)

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or not active or not frame.f_code.co_filename.startswith(package):
            return
        if not (params := _config_params(frame, sections)):
            return
        where = str(Path(frame.f_code.co_filename).relative_to(SRC))
        holders = [p for p in params if isinstance(frame.f_locals.get(p), whole)]
        for name, outer in list(active.items()):
            if id(frame) in outer:  # a coroutine around the window, resumed as the awaited one resumes
                continue
            walks[name].section_files.add(where)
            if holders:
                walks[name].files.add(where)
                walks[name].reads.setdefault((where, frame.f_code.co_firstlineno), set()).update(holders)

    return profile


def climbs(walk: Walk) -> list[str]:
    """``file:function -> section``: each section of the whole config a walked function reads through it (a
    function handed everything reaching up for a part)."""
    out = set()
    for (where, line), params in walk.reads.items():
        tree = ast.parse((SRC / where).read_text())
        for f in _functions(tree):
            if f.lineno <= line <= (f.decorator_list[0].lineno if f.decorator_list else f.lineno):
                for node in ast.walk(f):
                    if (
                        isinstance(node, ast.Attribute)
                        and isinstance(node.value, ast.Name)
                        and node.value.id in params
                    ):
                        out.add(f"{where}:{f.name} -> {node.attr}")
    return sorted(out)


def _window(module: Any, attr: str, name: str, active: dict[str, set[int]]) -> Callable[[], None]:
    """Replace ``module.attr`` (an async function, or ``Class.method``) by one that marks ``name`` active while
    it runs, with the frames around it (they are resumed, and so reported as calls, each time the window
    resumes); returns what puts the original back."""
    *owner_path, attr = attr.split(".")
    for part in owner_path:
        module = getattr(module, part)
    inner = getattr(module, attr)

    async def marked(*args: Any, **kwargs: Any) -> Any:
        outer, f = set(), sys._getframe()
        while f is not None:
            outer.add(id(f))
            f = f.f_back
        active[name] = outer
        try:
            return await inner(*args, **kwargs)
        finally:
            del active[name]

    setattr(module, attr, marked)
    return lambda: setattr(module, attr, inner)


def traced_step(step: str = STEP, design: str = DESIGN) -> dict[str, Walk]:
    """Run a 1-step scripted cpu-tiny self-play run; the files taking the whole config in the step and its
    design phase."""
    sys.path.insert(0, str(SRC))  # this tree's package, not an installed one
    from spade import config  # noqa: PLC0415 (after the path above)
    from spade.cli.app import main  # noqa: PLC0415 (after the path above)

    homes = ("spade.config", "spade.sandbox.limits")
    config_types = tuple(
        v for v in vars(config).values()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__.startswith(homes)
    )  # fmt: skip

    walks = {"step": Walk(), "design": Walk()}
    active: dict[str, set[int]] = {}
    restore = []
    for name, entry in (("step", step), ("design", design)):
        module, attr = entry.split(":")
        restore.append(_window(importlib.import_module(module), attr, name, active))
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["train", "--preset", "cpu-tiny", "--model.backend", "scripted", "--steps", "1",
                "--runs-dir", tmp, "--name", "architecture", "--sft.episodes", "0"]  # fmt: skip
        profile = _tracer(walks, active, config.TrainConfig, config_types)
        sys.setprofile(profile)
        threading.setprofile(profile)  # plays and checks run in worker threads too
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = main(argv)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            for put_back in restore:
                put_back()
    if code != 0:
        raise SystemExit(f"the traced run failed (exit {code}): spade {' '.join(argv)}")
    return walks


# -- report ------------------------------------------------------------------------------------------------


def figures(s: Static, walks: dict[str, Walk], loop: str = LOOP) -> dict[str, Any]:
    return {
        "import cycles (module-level or in-function)": len(s.cycles),
        "imports inside functions (spade modules)": len(s.in_function_imports),
        "package cycles (type-only imports included)": len(s.package_cycles),
        "imports up the layer order (package pairs)": len(s.layer_breaks),
        "config imports from spade (beyond errors/types)": len(s.config_imports),
        "modules reading cfg.mode": len(s.mode_reads),
        "modules parsing model replies": len(s.reply_parsers),
        f"library files over {MAX_FILE_LINES} lines": len(s.long_files),
        f"functions over {MAX_FUNCTION_LINES} lines": len(s.long_functions),
        "loop file lines": len((SRC / loop).read_text().splitlines()),
        "files the config walks in one step": len(walks["step"].section_files),
        "sections read through the whole config in one step": len(climbs(walks["step"])),
        "files the config walks in the design phase": len(walks["design"].section_files),
        "sections read through the whole config in the design phase": len(climbs(walks["design"])),
        "library lines": s.library_lines,
    }


TARGETS = {
    "import cycles (module-level or in-function)": "0",
    "imports inside functions (spade modules)": "-",
    "package cycles (type-only imports included)": f"<= {len(UP_ALLOWED)}",
    "imports up the layer order (package pairs)": f"<= {len(UP_ALLOWED)}",
    "config imports from spade (beyond errors/types)": "0",
    "modules reading cfg.mode": "1 (the modes registry)",
    "modules parsing model replies": "1",
    f"library files over {MAX_FILE_LINES} lines": "0",
    f"functions over {MAX_FUNCTION_LINES} lines": "0",
    "loop file lines": "<= 300",
    "files the config walks in one step": "<= 12",
    "sections read through the whole config in one step": "-",
    "files the config walks in the design phase": "<= 6",
    "sections read through the whole config in the design phase": "-",
    "library lines": "-",
}


def unmet(out: dict[str, Any]) -> list[str]:
    """The figures of ``out`` that miss their target (``N``, ``N (who)``: exactly N; ``<= N``: at most N)."""
    missed = []
    for name, target in TARGETS.items():
        if target == "-":
            continue
        bound = int(target.removeprefix("<= ").split()[0])
        if out[name] > bound or (not target.startswith("<=") and out[name] != bound):
            missed.append(f"{name}: {out[name]} (target {target})")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--details", action="store_true", help="print what each figure counts")
    parser.add_argument("--no-trace", action="store_true", help="static figures only (no traced step)")
    parser.add_argument("--step", default=STEP, help=f"the step entry point (default {STEP})")
    parser.add_argument("--design", default=DESIGN, help=f"the design phase entry point (default {DESIGN})")
    parser.add_argument("--loop", default=LOOP, help=f"the loop's file under src (default {LOOP})")
    args = parser.parse_args()
    s = static()
    walks = {"step": Walk(), "design": Walk()} if args.no_trace else traced_step(args.step, args.design)
    out = figures(s, walks, args.loop)
    if args.json:
        print(json.dumps({"figures": out, "details": _details(s, walks)} if args.details else out, indent=1))
        return 0
    width = max(map(len, out))
    print(f"{'figure':<{width}}  {'value':>6}  target")
    for name, value in out.items():
        print(f"{name:<{width}}  {value:>6}  {TARGETS[name]}")
    if args.details:
        print(json.dumps(_details(s, walks), indent=1))
    missed = unmet(out)
    for line in missed:
        print(f"missed: {line}")
    return 1 if missed else 0


def _details(s: Static, walks: dict[str, Walk]) -> dict[str, Any]:
    return {
        "cycles": s.cycles,
        "in_function_imports": s.in_function_imports,
        "config_imports": s.config_imports,
        "layer_breaks": s.layer_breaks,
        "package_cycles": s.package_cycles,
        "mode_reads": s.mode_reads,
        "reply_parsers": s.reply_parsers,
        "long_files": s.long_files,
        "long_functions": s.long_functions,
        "step_files": sorted(walks["step"].section_files),
        "step_whole_config_files": sorted(walks["step"].files),
        "step_reads": climbs(walks["step"]),
        "design_files": sorted(walks["design"].section_files),
        "design_whole_config_files": sorted(walks["design"].files),
        "design_reads": climbs(walks["design"]),
    }


if __name__ == "__main__":
    sys.exit(main())
