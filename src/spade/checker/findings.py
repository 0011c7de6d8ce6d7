"""Typed results of the validation ladder: finding codes, findings and the report (JSON round trip)."""

from __future__ import annotations

import ast
import enum
import inspect
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["fatal", "warning", "info"]
"""``fatal`` rejects the environment; ``warning`` is reported but accepted; ``info`` is a note."""

Stage = Literal[
    "parse",
    "static",
    "load",
    "determinism",
    "steps",
    "termination",
    "tools",
    "feasibility",
    "reuse",
    "turns",
    "exploit",
    "review",
    "novelty",
]
"""Where a finding was made: a rung of the ladder (their order is ``spade.checker.ladder.STAGES``, derived
from the rungs), ``review``, the optional LLM review after it, or ``novelty``, the training loop's check that
an edit changed the game it plays."""


class FindingCode(enum.Enum):
    """What a check found. The value is the name, so codes read the same in JSON and in tests."""

    NO_CODE = "NO_CODE"
    """The text holds no Python code (no fenced block and it does not parse as a module)."""
    SOURCE_TOO_LARGE = "SOURCE_TOO_LARGE"
    """The source is longer than ``CheckerConfig.max_source_chars``."""
    SYNTAX_ERROR = "SYNTAX_ERROR"
    """``ast.parse`` fails (often a truncated reply or an unescaped brace in an f-string)."""
    NO_ENV_CLASS = "NO_ENV_CLASS"
    """No environment class: no ``ENV = ClassName`` and no class whose name ends in ``Env``."""
    MULTIPLE_ENV_CLASSES = "MULTIPLE_ENV_CLASSES"
    """Several candidate environment classes and no ``ENV`` to choose one."""
    ENV_NOT_DECLARED = "ENV_NOT_DECLARED"
    """A native TextEnv subclass without the module-level ``ENV = ClassName`` (found by name instead)."""
    MISSING_METHOD = "MISSING_METHOD"
    """The environment class lacks a required method (``reset``/``_reset``, ``step``, ``check_answer``)."""
    BAD_SIGNATURE = "BAD_SIGNATURE"
    """A required method has parameters the harness cannot call it with."""
    FORBIDDEN_IMPORT = "FORBIDDEN_IMPORT"
    """An import outside ``CheckerConfig.allowed_imports``."""
    FORBIDDEN_CALL = "FORBIDDEN_CALL"
    """A builtin or attribute that escapes the contract (``open``, ``eval``, ``exec``, ``input``, dunders)."""
    GLOBAL_RNG = "GLOBAL_RNG"
    """Module-level ``random`` / ``np.random`` state is used instead of ``self.rng`` / ``self.np_random``."""
    UNSEEDED_RNG = "UNSEEDED_RNG"
    """A random source that ignores the seed (``random.SystemRandom``, salted ``hash()`` of text)."""
    LOAD_ERROR = "LOAD_ERROR"
    """Executing the module or constructing the class failed in the sandbox."""
    TIMEOUT = "TIMEOUT"
    """A call used up its CPU-time limit (infinite loop, exponential search); independent of machine load."""
    STALLED = "STALLED"
    """A call neither answered nor used up its CPU-time limit within the wall-clock backstop (it blocks)."""
    MEMORY = "MEMORY"
    """The instance exhausted its memory limit."""
    FORBIDDEN = "FORBIDDEN"
    """The sandbox denied an operation (file write, network, process, thread, signal)."""
    PROTOCOL = "PROTOCOL"
    """The instance broke the sandbox wire protocol (wrote to the channel, oversized reply, died mid-call)."""
    RESET_CRASH = "RESET_CRASH"
    """``reset`` raised."""
    RESET_TYPE = "RESET_TYPE"
    """``reset`` did not return ``(non-empty str, dict)``."""
    NONDETERMINISTIC = "NONDETERMINISTIC"
    """The same seed and actions gave different observations, rewards or flags."""
    SEED_IGNORED = "SEED_IGNORED"
    """Different seeds gave identical instances: the seed has no effect. A warning, fatal when the share of
    tested seeds giving distinct instances is below ``CheckerConfig.min_distinct_instances`` (as in the paper
    presets)."""
    STALE_RESET = "STALE_RESET"
    """``reset(seed)`` on an instance that already played an episode gave another first observation or another
    play of the solution than a fresh instance of that seed: episode state survives reset (exported servers
    and trainers reuse one instance across episodes)."""
    STEP_TYPE = "STEP_TYPE"
    """``step`` did not return ``(str, float, bool, bool, dict)`` or returned an oversized/unsafe value."""
    STEP_CRASH = "STEP_CRASH"
    """``step`` raised on an action (environments must answer any text, even garbage)."""
    REWARD_NAN = "REWARD_NAN"
    """A reward was NaN or infinite."""
    REWARD_RANGE = "REWARD_RANGE"
    """A reward left ``CheckerConfig.reward_range``."""
    EMPTY_OBSERVATION = "EMPTY_OBSERVATION"
    """A step returned an empty observation (the agent learns nothing from it)."""
    NO_TERMINATION = "NO_TERMINATION"
    """An episode under a random or do-nothing policy never ended (neither terminated nor truncated)."""
    TOOL_SCHEMA = "TOOL_SCHEMA"
    """A tool schema is not a valid OpenAI function schema or does not match its ``tool_<name>`` method."""
    TOOL_ARGS_CRASH = "TOOL_ARGS_CRASH"
    """A tool call with wrong, missing or extra arguments crashed instead of returning error text."""
    NO_SOLUTION = "NO_SOLUTION"
    """Feasibility could not be verified: no ``solution()`` and no hint-following policy."""
    SOLUTION_CRASH = "SOLUTION_CRASH"
    """``solution()`` raised or returned an invalid value."""
    SOLUTION_FAILS = "SOLUTION_FAILS"
    """Playing the scripted ``solution()`` did not win on any tested seed."""
    SOLUTION_PROSE = "SOLUTION_PROSE"
    """``solution()`` is prose, not a playable script; feasibility came from other evidence (a warning)."""
    SOLUTION_PARTIAL = "SOLUTION_PARTIAL"
    """The scripted ``solution()`` won on some tested seeds but not all: fatal when it won less than
    ``CheckerConfig.min_solution_win_rate`` of them, else a warning."""
    ONE_REPLY_GAME = "ONE_REPLY_GAME"
    """The solution wins with one reply and a wrong first reply ends the episode: the agent never acts on
    feedback. A warning unless ``CheckerConfig.reject_one_reply``."""
    INFEASIBLE = "INFEASIBLE"
    """The hint-following policy never won."""
    EXPLOITABLE_CONSTANT = "EXPLOITABLE_CONSTANT"
    """Sending one fixed string (every turn, or one seed's winning answer on other seeds) wins."""
    EXPLOITABLE_DEGENERATE = "EXPLOITABLE_DEGENERATE"
    """Empty, enumerating, very long or format-breaking actions win."""
    EXPLOITABLE_RANDOM = "EXPLOITABLE_RANDOM"
    """Random actions, or random guesses in the range of numbers the first observation shows, win more often
    than ``CheckerConfig.exploit_max_success``."""
    FIXED_SOLUTION = "FIXED_SOLUTION"
    """One seed's multi-step solution wins every other seed too: the agent can memorise it."""
    ANSWER_LEAK = "ANSWER_LEAK"
    """The first observation prints the winning answer."""
    LLM_REVIEW = "LLM_REVIEW"
    """The optional last rung: the reviewing model did not explicitly accept the environment (fail closed)."""
    UNCHANGED_GAME = "UNCHANGED_GAME"
    """An edit whose scripted solution plays one instance exactly as its parent's does: it changed nothing the
    agent plays (a comment, a level not played). Found by the training loop, which knows the parent."""


def code_docs() -> dict[FindingCode, str]:
    """Each code's docstring as one line, read from this module's source (so listings cannot drift from it).

    Codes whose docstring cannot be read (no source shipped) map to an empty string.
    """
    try:
        tree = ast.parse(inspect.getsource(FindingCode))
    except (OSError, TypeError):  # no source (a frozen or bytecode-only install)
        return dict.fromkeys(FindingCode, "")
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[FindingCode, str] = dict.fromkeys(FindingCode, "")
    for node, after in itertools.pairwise(body):
        doc = (
            after.value.value
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            else None
        )
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(doc, str):
            docs[FindingCode[node.targets[0].id]] = " ".join(doc.split())
    return docs


def codes_help() -> str:
    """Every code with its one-line docstring and default severity, one per line (for ``spade check --help``)."""
    docs = code_docs()
    width = max(len(c.value) for c in FindingCode)
    return "\n".join(
        f"  {c.value:<{width}}  {DEFAULT_SEVERITY[c]:<7}  {docs[c].replace('``', '`')}" for c in FindingCode
    )


_FATAL: Severity = "fatal"
DEFAULT_SEVERITY: dict[FindingCode, Severity] = dict.fromkeys(FindingCode, _FATAL) | {
    FindingCode.ENV_NOT_DECLARED: "warning",
    FindingCode.SEED_IGNORED: "warning",
    FindingCode.EMPTY_OBSERVATION: "warning",
    FindingCode.NO_SOLUTION: "warning",
    FindingCode.SOLUTION_PROSE: "warning",
    FindingCode.ONE_REPLY_GAME: "warning",
    FindingCode.FIXED_SOLUTION: "warning",
}
"""Severity of each code unless a check says otherwise (GLOBAL_RNG is a warning for official-format files)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: ``message`` says what is wrong, the likely cause and the fix."""

    code: FindingCode
    severity: Severity
    stage: Stage
    message: str

    @property
    def fatal(self) -> bool:
        """Whether this finding rejects the environment."""
        return self.severity == "fatal"

    def to_dict(self) -> dict[str, str]:
        """JSON-safe form."""
        return {
            "code": self.code.value,
            "severity": self.severity,
            "stage": self.stage,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """Inverse of :meth:`to_dict`."""
        return cls(FindingCode(data["code"]), data["severity"], data["stage"], data["message"])

    def __str__(self) -> str:
        return f"[{self.severity}] {self.code.value} ({self.stage}): {self.message}"


def finding(code: FindingCode, stage: Stage, message: str, severity: Severity | None = None) -> Finding:
    """A finding with the code's default severity unless one is given."""
    return Finding(code, severity or DEFAULT_SEVERITY[code], stage, message)


@dataclass(frozen=True, slots=True)
class CheckReport:
    """The verdict on one environment source.

    ``timings_s`` maps each stage that ran to its wall time; ``stats`` holds rates and counts such as
    ``solution_win_rate``, ``min_turns`` (the fewest replies a won episode took), ``random_win_rate``,
    ``guess_win_rate``, ``degenerate_win_rate``, ``constant_win_rate``, ``distinct_instance_share`` (the share of
    tested seeds that gave distinct instances), ``episodes`` and ``steps``.
    ``seed`` reproduces the run's probe actions and seeds.
    """

    ok: bool
    findings: tuple[Finding, ...]
    timings_s: dict[str, float] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    source_sha256: str = ""
    is_tool_env: bool = False
    official_format: bool = False

    @property
    def fatal(self) -> tuple[Finding, ...]:
        """The findings that reject the environment."""
        return tuple(f for f in self.findings if f.fatal)

    @property
    def codes(self) -> tuple[FindingCode, ...]:
        """Codes of all findings, in the order they were found."""
        return tuple(f.code for f in self.findings)

    @property
    def total_s(self) -> float:
        """Total time of all stages."""
        return sum(self.timings_s.values())

    def to_json(self) -> str:
        """The report as one JSON object."""
        data = {
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "timings_s": self.timings_s,
            "stats": self.stats,
            "seed": self.seed,
            "source_sha256": self.source_sha256,
            "is_tool_env": self.is_tool_env,
            "official_format": self.official_format,
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CheckReport:
        """Parse the output of :meth:`to_json`."""
        data = json.loads(text)
        return cls(
            ok=bool(data["ok"]),
            findings=tuple(Finding.from_dict(f) for f in data["findings"]),
            timings_s={str(k): float(v) for k, v in data.get("timings_s", {}).items()},
            stats={str(k): float(v) for k, v in data.get("stats", {}).items()},
            seed=int(data.get("seed", 0)),
            source_sha256=str(data.get("source_sha256", "")),
            is_tool_env=bool(data.get("is_tool_env", False)),
            official_format=bool(data.get("official_format", False)),
        )

    def summary(self) -> str:
        """A short human-readable verdict: the first fatal finding, or 'ok'."""
        fatal = self.fatal
        return "ok" if not fatal else f"rejected: {fatal[0].code.value}: {fatal[0].message}"
