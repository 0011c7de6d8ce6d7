"""Turning a recorded sandbox failure into the finding that names it, with cause and fix."""

from __future__ import annotations

from spade.checker.episodes import Episode, Failure
from spade.checker.findings import Finding, FindingCode, Stage, finding

_BY_KIND: dict[str, FindingCode] = {
    "timeout": FindingCode.TIMEOUT,
    "stalled": FindingCode.STALLED,
    "memory": FindingCode.MEMORY,
    "forbidden": FindingCode.FORBIDDEN,
    "protocol": FindingCode.PROTOCOL,
    "load_error": FindingCode.LOAD_ERROR,
}
_CRASH_BY_OP: dict[str, FindingCode] = {
    "load": FindingCode.LOAD_ERROR,
    "reset": FindingCode.RESET_CRASH,
    "step": FindingCode.STEP_CRASH,
    "tools": FindingCode.TOOL_SCHEMA,
    "call_tool": FindingCode.TOOL_ARGS_CRASH,
    "solution": FindingCode.SOLUTION_CRASH,
}
_FIX: dict[FindingCode, str] = {
    FindingCode.TIMEOUT: "a call used up its CPU time. Likely cause: an unbounded loop or an exponential "
    "search in module code, reset or step. Fix: bound every loop and precompute with a cheap algorithm",
    FindingCode.STALLED: "a call blocked without computing. Likely cause: waiting on a lock, a pipe or input. "
    "Fix: environments never wait; compute the answer directly",
    FindingCode.MEMORY: "the instance ran out of memory. Likely cause: a huge list, string or recursion. "
    "Fix: keep the state small (kilobytes, not gigabytes)",
    FindingCode.FORBIDDEN: "the sandbox denied an operation (file, network, process, thread or signal). Fix: "
    "environments only compute; keep all state in memory",
    FindingCode.PROTOCOL: "the instance broke the sandbox protocol or died mid-call. Fix: do not touch "
    "file descriptors, stdio or the interpreter",
    FindingCode.LOAD_ERROR: "the module or the class constructor failed. Fix: make the file import cleanly "
    "and the class constructible with no arguments (max_turns optional)",
    FindingCode.RESET_CRASH: "reset raised. Fix: make reset build a valid instance for every seed",
    FindingCode.RESET_TYPE: "reset must return (observation: non-empty str, info: dict). Fix: "
    "`return observation_text, {}`",
    FindingCode.STEP_CRASH: "step raised on an action. Likely cause: parsing the action without checking it. "
    "Fix: treat unreadable actions as a wasted turn with a helpful message, never raise",
    FindingCode.STEP_TYPE: "step must return (observation: str, reward: float, terminated: bool, "
    "truncated: bool, info: dict) with plain JSON-safe values. Fix: return exactly that 5-tuple",
    FindingCode.REWARD_NAN: "a reward was NaN or infinite. Likely cause: a division by zero or log of 0 in "
    "the reward. Fix: guard the computation and return a finite float",
    FindingCode.REWARD_RANGE: "a reward is outside the allowed range. Fix: give 1.0 for a win, 0.0 otherwise "
    "(small partial rewards in between)",
    FindingCode.TOOL_SCHEMA: "tool schemas could not be read. Fix: return OpenAI function schemas",
    FindingCode.TOOL_ARGS_CRASH: "a tool call crashed. Fix: validate tool arguments and return error text",
    FindingCode.SOLUTION_CRASH: "solution() failed. Fix: return the list of winning actions for the current "
    "instance",
}


def failure_code(failure: Failure) -> FindingCode:
    """The finding code for a recorded SandboxError."""
    if failure.kind in _BY_KIND:
        return _BY_KIND[failure.kind]
    if failure.kind == "invalid_value":
        return _invalid_code(failure)
    return _CRASH_BY_OP.get(failure.op, FindingCode.STEP_CRASH)


def _invalid_code(failure: Failure) -> FindingCode:
    if failure.op == "reset":
        return FindingCode.RESET_TYPE
    if failure.op in ("tools", "call_tool"):
        return FindingCode.TOOL_SCHEMA if failure.op == "tools" else FindingCode.STEP_TYPE
    if failure.op == "solution":
        return FindingCode.SOLUTION_CRASH
    text = failure.message.lower()
    is_reward = failure.field == "reward" or (not failure.field and "reward" in text)
    if is_reward and (failure.problem == "nan" or any(w in text for w in ("finite", "nan", "inf"))):
        return FindingCode.REWARD_NAN
    if is_reward and (failure.problem == "range" or "outside" in text or "range" in text):
        return FindingCode.REWARD_RANGE
    return FindingCode.STEP_TYPE


def failure_finding(ep: Episode, failure: Failure, stage: Stage) -> Finding:
    """A finding describing ``failure``, which ended ``ep``."""
    code = failure_code(failure)
    where = f"{failure.op}" + (f"(action={_short(ep.failed_action)})" if failure.op == "step" else "")
    msg = (
        f"{where} failed with {failure.kind}: {_short(failure.message, 300)} "
        f"[{ep.policy} play, seed {ep.seed}, after {len(ep.steps)} steps]. {_capital(_FIX.get(code, ''))}."
    )
    return finding(code, stage, msg)


def first_failure(episodes: list[Episode], stage: Stage) -> list[Finding]:
    """A finding for the first failed episode, if any (one is enough to reject; more would repeat it)."""
    for ep in episodes:
        if ep.failure is not None:
            return [failure_finding(ep, ep.failure, stage)]
    return []


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _short(text: str | None, limit: int = 60) -> str:
    if text is None:
        return "?"
    shown = text if len(text) <= limit else text[: limit - 3] + "..."
    return repr(shown)
