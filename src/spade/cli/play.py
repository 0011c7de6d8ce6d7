"""Playing one environment from the terminal: a human at the keyboard or the scripted solution."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from spade.env import StepResult, TextEnv, ToolEnv, answer_action, tool_call_action
from spade.envs import rg_tasks
from spade.types import PlayStatus, plural, status_words

Solver = Literal["scripted", "human", "model"]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters other than tab and newline: ESC starts the sequence an arrow key sends."""

HELP = """Commands:
  <text>                  your action, sent to the environment as typed (e.g. 3, pour A B, \\boxed{7})
  /call NAME {json args}  call a tool (tool-use environments)
  /answer TEXT            submit a final answer, ending the episode (tool-use environments; in a game,
                          type the answer as your action)
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
            status = PlayStatus.TERMINATED if terminated else PlayStatus.TRUNCATED
            out.write(f"{ended_line(status, turns)}.\n")
            return PlayResult(turns, total, last, terminated, truncated, quit=False)


def ended_line(status: PlayStatus, turns: int) -> str:
    """``Episode ended after 2 turns: the context budget ran out (play.context_tokens)``."""
    return f"Episode ended after {plural(turns, 'turn')}: {status_words(status)}"


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
    """The action for one input line, ``/quit``, or None after printing help or an error.

    A line holding control characters (the escape sequences that arrow keys type where the terminal has no
    line editing) is refused rather than sent: it would cost a turn as a garbled move.
    """
    if not line:
        out.write("Empty input: type an action, or /help.\n")
        return None
    if _CONTROL.search(line):
        out.write(
            "That input holds terminal control codes (an arrow key?) and was not sent: type the action as "
            "text, e.g. left or \\boxed{left}.\n"
        )
        return None
    if not line.startswith("/"):
        return line
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if command == "/quit":
        return "/quit"
    if command in ("/answer", "/call") and rest and not env.tools():
        # A game reads every line as a move: <answer>...</answer> would only spend a turn as a garbled one.
        out.write(
            f"This game has no tools: {command} is for tool-use environments; type your action instead.\n"
        )
        return None
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
    from spade.sandbox import Limits, Sandbox  # noqa: PLC0415 - starts processes; only files need it

    if env_or_file in envs.names():
        kwargs = {} if max_turns is None else {"max_turns": max_turns}
        yield _TrustedEnv(envs.make(env_or_file, **kwargs))
        return
    if env_or_file.startswith(rg_tasks.ENV_PREFIX):  # a Reasoning-Gym task, as --mode procedural plays it
        limits = rg_tasks.sandbox_limits(Limits())
        code = _procedural_source(env_or_file)
        with Sandbox(limits) as box, box.open(code, filename=f"<{env_or_file}>", max_turns=max_turns) as env:
            yield env
        return
    path = Path(env_or_file)
    with (
        Sandbox() as sandbox,
        sandbox.open(_file_source(path), filename=str(path), max_turns=max_turns) as env,
    ):
        yield env


def _file_source(path: Path) -> str:
    """The text of an environment file (FileNotFoundError / ValueError naming the path when it is none)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} is neither a registered environment nor a file (see `spade envs`)"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(
            f"{path} is not a text Python file (it is not UTF-8 text); give an environment's .py file"
        ) from None


# -- the trained policy plays ------------------------------------------------------------------------------


def watch_model(
    env_or_file: str,
    run_root: Path,
    *,
    seed: int | None,
    options: dict[str, Any] | None,
    max_turns: int | None,
    out: TextIO,
) -> PlayResult:
    """The policy of a run (its config's model plus the trained ``policy/`` weights) plays one episode.

    Every observation, reply, parsed action and reward is printed to ``out`` as it happens. The environment
    runs in the sandbox (registry environments too), with the run's play settings (action parsing, turn
    and token budgets, and its level: ``play.difficulty`` unless ``options`` names a difficulty; a level
    the environment does not have is left out, as in training).
    """
    import asyncio  # noqa: PLC0415
    import random  # noqa: PLC0415

    from spade.backends import make_policy  # noqa: PLC0415 - heavy; only this solver needs a model
    from spade.rundir import RunDir  # noqa: PLC0415

    run = RunDir(Path(run_root))
    if not run.config_path.is_file():  # load_config's own message is about --resume
        raise FileNotFoundError(
            f"{run.root} is not a run directory (no config.json); give --run a run `spade runs` lists"
        )
    cfg = run.load_config()
    code, name = _source_of(env_or_file)
    policy = make_policy(cfg.model, seed=cfg.seed)
    weights = run.root / "policy"
    if weights.is_dir() and any(weights.iterdir()):
        policy.load_weights(weights)
        out.write(f"Policy: {cfg.model.backend} {cfg.model.model} with the trained weights in {weights}\n")
    else:
        out.write(f"Policy: {cfg.model.backend} {cfg.model.model} (the run has no trained weights yet)\n")
    seed = random.randrange(2**31) if seed is None else seed
    episode = _Watch(code, name, seed, options, max_turns)
    return asyncio.run(_watch(cfg, policy, episode, out))


def _source_of(env_or_file: str) -> tuple[str, str]:
    from spade import envs  # noqa: PLC0415

    if env_or_file in envs.names():
        return envs.spec(env_or_file).source(), env_or_file
    if env_or_file.startswith(rg_tasks.ENV_PREFIX):
        return _procedural_source(env_or_file), env_or_file
    path = Path(env_or_file)
    return _file_source(path), path.stem


def _procedural_source(name: str) -> str:
    """The environment source of ``rg:<task>`` (ValueError naming close tasks when there is none)."""
    task = rg_tasks.task_of(name)
    problem = rg_tasks.task_problem([task], where=name)
    if problem:
        raise ValueError(problem)
    return rg_tasks.task_source(task).code


@dataclass(frozen=True, slots=True)
class _Watch:
    code: str
    name: str
    seed: int
    options: dict[str, Any] | None
    max_turns: int | None


async def _watch(cfg: Any, policy: Any, w: _Watch, out: TextIO) -> PlayResult:
    from typing import cast  # noqa: PLC0415

    from spade.play.agent import Episode, play_episode  # noqa: PLC0415
    from spade.sandbox import EnvInstance, Sandbox  # noqa: PLC0415

    out.write(f"Seed: {w.seed}\n")
    limits = rg_tasks.sandbox_limits(cfg.sandbox) if w.name.startswith(rg_tasks.ENV_PREFIX) else cfg.sandbox
    with Sandbox(limits=limits) as runner:
        env = await runner.aopen(w.code, filename=f"<{w.name}>", max_turns=w.max_turns)
        options, level = _run_level(cfg.play, w.options, env.meta.difficulty_levels)
        out.write(f"Level: {level}\n")
        narrated = cast(EnvInstance, _NarratedEnv(env, out))
        try:
            traj = await play_episode(
                _NarratedPolicy(policy, out), narrated, Episode(w.name, w.seed, None, options), cfg.play,
                is_tool_env=env.meta.is_tool_env,
            )  # fmt: skip
        finally:
            await env.aclose()
    if traj.error:
        out.write(f"Episode error: {traj.error}\n")
    last = traj.transitions[-1] if traj.transitions else None
    out.write(f"{ended_line(traj.status, len(traj.transitions))}; return {traj.episode_return:+.2f}.\n")
    return PlayResult(
        len(traj.transitions), sum(t.reward for t in traj.transitions), last.reward if last else 0.0,
        last.terminated if last else False, last.truncated if last else False, quit=False,
    )  # fmt: skip


def _run_level(play: Any, given: dict[str, Any] | None, levels: int) -> tuple[dict[str, Any] | None, str]:
    """The reset options of a watched episode and how its level was chosen (for the transcript)."""
    from spade.play.rollout import reset_options  # noqa: PLC0415

    if given and "difficulty" in given:
        return given, f"{given['difficulty']} (--difficulty)"
    options = reset_options(play, None)
    if options is None:
        return given or None, "the environment's default (the run sets no play.difficulty)"
    if levels <= options["difficulty"]:  # as training: a level the environment lacks is not asked for
        return given or None, f"the environment's default (it has no level {options['difficulty']})"
    return {**(given or {}), **options}, f"{options['difficulty']} (the run's play.difficulty)"


class _NarratedPolicy:
    """A policy that prints every reply it samples."""

    def __init__(self, policy: Any, out: TextIO) -> None:
        self._policy, self._out = policy, out

    @property
    def template(self) -> Any:
        return self._policy.template

    async def sample(self, prompts: Any, params: Any) -> Any:
        completions = await self._policy.sample(prompts, params)
        for c in completions:
            self._out.write(
                f"model> {c.text}\n"
                + (f"(cut at {params.max_tokens} tokens)\n" if c.finish_reason == "length" else "")
            )
        self._out.flush()
        return completions

    def load_weights(self, path: Path) -> None:
        self._policy.load_weights(path)


class _NarratedEnv:
    """An environment instance that prints observations, actions, tool calls and rewards."""

    def __init__(self, env: Any, out: TextIO) -> None:
        self._env, self._out, self._turn, self._total = env, out, 0, 0.0

    async def areset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = await self._env.areset(seed=seed, options=options)
        _print_obs(self._out, obs, turn=0)
        return obs, info

    async def atools(self) -> list[dict[str, Any]]:
        return await self._env.atools()  # type: ignore[no-any-return]

    async def acall_tool(self, name: str, args: dict[str, Any]) -> str:
        result: str = await self._env.acall_tool(name, args)
        self._out.write(f"tool {name}({json.dumps(args)}) -> {result}\n")
        return result

    async def astep(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = await self._env.astep(action)
        self._turn += 1
        self._total += reward
        self._out.write(f"action: {action!r}\nreward {reward:+.2f} (total {self._total:+.2f})\n")
        _print_obs(self._out, obs, turn=self._turn)
        return obs, reward, terminated, truncated, info
