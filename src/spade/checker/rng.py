"""Static detection of random sources that break ``reset(seed=s)`` reproducibility.

Native environments draw from ``self.rng`` / ``self.np_random``. Official-format files seed the global
``random`` module in ``reset`` (``random.seed(seed)``), which is reproducible inside a single-use sandbox
process, so for them a *seeded* global RNG is only a warning: the format must load unchanged. A global RNG
that is never seeded from a variable (or seeded with a constant) ignores the seed, and in a sandbox whose
instances fork from one zygote every instance is then the same game: that is fatal in any format.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from spade.checker.findings import Finding, FindingCode, Severity, finding

_RANDOM_FUNCS = frozenset(
    {
        "random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform", "gauss",
        "getrandbits", "triangular", "betavariate", "expovariate", "normalvariate", "lognormvariate",
        "vonmisesvariate", "gammavariate", "paretovariate", "weibullvariate", "setstate", "binomialvariate",
        "randbytes",
    }
)  # fmt: skip
_NUMPY_SEEDED = frozenset(
    {
        "default_rng",
        "Generator",
        "RandomState",
        "SeedSequence",
        "PCG64",
        "PCG64DXSM",
        "Philox",
        "SFC64",
        "MT19937",
    }
)


@dataclass(slots=True)
class _Scan:
    modules: dict[str, str] = field(default_factory=lambda: {"random": "random"})
    """Local name -> module it is bound to (``random`` is pre-injected by the loader)."""
    functions: dict[str, str] = field(default_factory=dict)
    """Local name -> ``module.function`` imported with ``from module import function``."""
    uses: set[str] = field(default_factory=set)
    seeded_from_variable: bool = False
    bad_seeds: set[str] = field(default_factory=set)
    unseeded: set[str] = field(default_factory=set)


def _bind_imports(nodes: list[ast.AST], scan: _Scan) -> None:
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("random", "numpy", "numpy.random"):
                    scan.modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom) and node.module in ("random", "numpy", "numpy.random"):
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target == "numpy.random":
                    scan.modules[alias.asname or alias.name] = "numpy.random"
                else:
                    scan.functions[alias.asname or alias.name] = target
    rebound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | {
        a.arg for n in nodes if isinstance(n, ast.arguments) for a in [*n.args, *n.kwonlyargs]
    }
    for name in rebound:
        scan.modules.pop(name, None)  # a variable named `random` is not the module


def _qualified(func: ast.expr, scan: _Scan) -> str | None:
    """``module.function`` for calls on the random/numpy modules, e.g. ``numpy.random.randint``."""
    if isinstance(func, ast.Name):
        return scan.functions.get(func.id) or ("hash" if func.id == "hash" else None)
    parts: list[str] = []
    node: ast.expr = func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in scan.modules:
        return None
    return ".".join([scan.modules[node.id], *reversed(parts)])


def _classify(call: ast.Call, name: str, scan: _Scan) -> None:
    module, _, function = name.rpartition(".")
    if name == "hash":
        scan.unseeded.add("hash()")
    elif name == "random.SystemRandom":
        scan.unseeded.add("random.SystemRandom")
    elif function == "seed" and module in ("random", "numpy.random"):
        if not call.args:
            scan.bad_seeds.add(f"{name}() seeds from the clock/OS")
        elif isinstance(call.args[0], ast.Constant) and call.args[0].value is not None:
            scan.bad_seeds.add(f"{name}({call.args[0].value!r}) uses a constant")
        else:
            scan.seeded_from_variable = True
    elif (module == "random" and function in _RANDOM_FUNCS) or (
        module == "numpy.random" and function not in _NUMPY_SEEDED
    ):
        scan.uses.add(name)


def rng_findings(nodes: list[ast.AST], *, official: bool, strict: bool) -> list[Finding]:
    """GLOBAL_RNG / UNSEEDED_RNG findings for a module's nodes (see the module docstring for the policy)."""
    scan = _Scan()
    _bind_imports(nodes, scan)
    for node in nodes:
        if isinstance(node, ast.Call):
            name = _qualified(node.func, scan)
            if name is not None:
                _classify(node, name, scan)
    findings: list[Finding] = []
    if scan.unseeded:
        severity: Severity = "warning" if scan.unseeded == {"hash()"} else "fatal"
        msg = (
            f"uses {', '.join(sorted(scan.unseeded))}, which does not follow reset's seed (hash() of text is "
            "salted per process). Fix: draw everything from self.rng, seeded in reset."
        )
        findings.append(finding(FindingCode.UNSEEDED_RNG, "static", msg, severity))
    if scan.uses or scan.bad_seeds:
        findings.append(_global_rng(scan, official=official, strict=strict))
    return findings


def _global_rng(scan: _Scan, *, official: bool, strict: bool) -> Finding:
    used = ", ".join(sorted(scan.uses)) or "the global RNG"
    fix = "Fix: draw from self.rng (random.Random seeded by reset) or self.np_random instead."
    if scan.bad_seeds or not scan.seeded_from_variable:
        why = "; ".join(sorted(scan.bad_seeds)) or "it is never seeded from reset's seed"
        msg = (
            f"uses the module-level RNG ({used}) but {why}, so reset(seed=s) does not choose the instance: "
            f"every sandboxed instance is the same game (or an irreproducible one). {fix}"
        )
        return finding(FindingCode.GLOBAL_RNG, "static", msg, "fatal")
    if official or not strict:
        msg = (
            f"uses the module-level RNG ({used}) seeded in reset: reproducible only because each instance "
            f"runs in its own process. {fix}"
        )
        return finding(FindingCode.GLOBAL_RNG, "static", msg, "warning")
    msg = f"a native environment uses the module-level RNG ({used}); the contract is self.rng. {fix}"
    return finding(FindingCode.GLOBAL_RNG, "static", msg, "fatal")
