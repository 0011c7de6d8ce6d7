"""Playing one environment from the terminal: a human at the keyboard or the scripted solution."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from spade.env import StepResult, TextEnv, ToolEnv, answer_action, tool_call_action

Solver = Literal["scripted", "human"]

HELP = """Commands:
  <text>                  your action, sent to the environment as typed (e.g. 3, pour A B, \\boxed{7})
  /call NAME {json args}  call a tool (tool-use environments)
  /answer TEXT            submit a final answer (tool-use environments)
  /tools                  list the tools
  /help                   this help
  /quit                   stop playing (Ctrl-C and Ctrl-D also stop)"""


class Playable(Protocol):
    """What a terminal session needs from an environment (a sandbox handle or an in-process env)."""

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode."""
        ...

    def step(self, action: str) -> StepResult:
        """Take one action."""
        ...

    def tools(self) -> list[dict[str, Any]]:
        """Tool schemas (empty for games)."""
        ...

    def solution(self) -> list[str] | str:
        """Scripted winning actions."""
        ...


@dataclass(frozen=True, slots=True)
class PlayResult:
    """Outcome of a terminal session."""

    turns: int
    total_reward: float
    last_reward: float
    terminated: bool
    truncated: bool
    quit: bool


def play(
    env: Playable,
    solver: Solver,
    *,
    seed: int | None,
    options: dict[str, Any] | None,
    out: TextIO,
    read_line: Callable[[str], str] = input,
) -> PlayResult:
    """Play one episode, printing observations, rewards and the turn counter to ``out``."""
    obs, _ = env.reset(seed=seed, options=options)
    _print_obs(out, obs, turn=0)
    if solver == "scripted":
        from spade.checker.feasibility import solution_actions  # noqa: PLC0415 - only the scripted solver

        actions, _ = solution_actions(env.solution())
        next_action: Callable[[], str | None] = _scripted(actions, out)
    else:
        out.write(HELP + "\n")
        next_action = _human(env, read_line, out)
    turns, total, last = 0, 0.0, 0.0
    while True:
        action = next_action()
        if action is None:
            out.write("Stopped.\n")
            return PlayResult(turns, total, last, False, False, quit=True)
        obs, last, terminated, truncated, _ = env.step(action)
        turns += 1
        total += last
        out.write(f"reward {last:+.2f} (total {total:+.2f})\n")
        _print_obs(out, obs, turn=turns)
        if terminated or truncated:
            out.write("Episode " + ("terminated" if terminated else "truncated") + f" after {turns} turns.\n")
            return PlayResult(turns, total, last, terminated, truncated, quit=False)


def _print_obs(out: TextIO, obs: str, turn: int) -> None:
    out.write(f"\n--- turn {turn} ---\n{obs}\n")
    out.flush()


def _scripted(actions: list[str], out: TextIO) -> Callable[[], str | None]:
    queue = list(actions)

    def next_action() -> str | None:
        if not queue:
            out.write("The scripted solution has no more actions.\n")
            return None
        action = queue.pop(0)
        out.write(f"> {action}\n")
        return action

    return next_action


def _human(env: Playable, read_line: Callable[[str], str], out: TextIO) -> Callable[[], str | None]:
    def next_action() -> str | None:
        while True:
            try:
                line = read_line("> ").strip()
            except (EOFError, KeyboardInterrupt):
                out.write("\n")
                return None
            action = _parse_command(env, line, out)
            if action == "/quit":
                return None
            if action is not None:
                return action

    return next_action


def _parse_command(env: Playable, line: str, out: TextIO) -> str | None:
    """The action for one input line, ``/quit``, or None after printing help or an error."""
    if not line:
        out.write("Empty input: type an action, or /help.\n")
        return None
    if not line.startswith("/"):
        return line
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if command == "/quit":
        return "/quit"
    if command == "/answer" and rest:
        return answer_action(rest)
    if command == "/call" and rest:
        return _tool_call(rest, out)
    if command == "/help":
        out.write(HELP + "\n")
    elif command == "/tools":
        names = [t["function"]["name"] for t in env.tools()]
        out.write(("Tools: " + ", ".join(names) if names else "This environment has no tools.") + "\n")
    else:
        out.write(f"Unknown or incomplete command {line!r}; type /help.\n")
    return None


def _tool_call(rest: str, out: TextIO) -> str | None:
    """``NAME {json}`` as a tool-call action, or None after printing what is wrong."""
    name, _, raw_args = rest.partition(" ")
    try:
        args = json.loads(raw_args) if raw_args.strip() else {}
    except json.JSONDecodeError as exc:
        out.write(f'Arguments must be a JSON object: {exc.msg}. Example: /call lookup {{"id": 3}}\n')
        return None
    if not isinstance(args, dict):
        out.write('Arguments must be a JSON object, e.g. {"id": 3}.\n')
        return None
    return tool_call_action(name, **args)


class _TrustedEnv:
    """A registry environment (the project's own code) driven in-process."""

    def __init__(self, env: TextEnv) -> None:
        self.env = env

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        return self.env.step(action)

    def tools(self) -> list[dict[str, Any]]:
        return self.env.tool_schemas() if isinstance(self.env, ToolEnv) else []

    def solution(self) -> list[str] | str:
        return self.env.solution()


@contextlib.contextmanager
def open_playable(env_or_file: str, max_turns: int | None = None) -> Iterator[Playable]:
    """A registry environment (the project's own code, in-process) or an environment file (in the sandbox)."""
    from spade import envs  # noqa: PLC0415 - keeps the module importable without the registry loaded
    from spade.sandbox import Sandbox  # noqa: PLC0415 - starts processes; only files need it

    if env_or_file in envs.names():
        kwargs = {} if max_turns is None else {"max_turns": max_turns}
        yield _TrustedEnv(envs.make(env_or_file, **kwargs))
        return
    path = Path(env_or_file)
    if not path.is_file():
        raise FileNotFoundError(
            f"{env_or_file!r} is neither a registered environment nor a file (see `spade envs`)"
        )
    with Sandbox() as sandbox, sandbox.open(path.read_text(), filename=str(path), max_turns=max_turns) as env:
        yield env
