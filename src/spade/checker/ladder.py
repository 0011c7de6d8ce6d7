"""The validation ladder (SPEC §5): named rungs run in order, stopping after the first fatal one."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spade.checker import dynamic, feasibility, probes, tooling
from spade.checker.episodes import Episode, Job, Prober
from spade.checker.failures import failure_finding, first_failure
from spade.checker.findings import CheckReport, Finding, FindingCode, Stage, finding
from spade.checker.probes import Policy, RandomActions
from spade.checker.static import StaticInfo, check_static, parse
from spade.config import CheckerConfig
from spade.sandbox.api import EnvRunner

_SCRIPT_CAP = 1000
"""Most steps a scripted solution or hint-following episode may take."""
_EXPLOIT_ROTA = ("constant", "enumerate", "constant", "format", "long", "constant", "empty", "format")


@dataclass(slots=True)
class _Run:
    """Everything one check learns as it climbs the ladder."""

    text: str
    runner: EnvRunner
    cfg: CheckerConfig
    rng: random.Random
    policy: Policy | None
    filename: str
    code: str = ""
    tree: ast.Module | None = None
    info: StaticInfo | None = None
    prober: Prober | None = None
    workers: int = 1
    tool_env: bool = False
    tool_names: list[str] = field(default_factory=list)
    first: Episode | None = None
    randoms: list[Episode] = field(default_factory=list)
    idle: list[Episode] = field(default_factory=list)
    solved: list[Episode] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    pairs: list[tuple[Episode, Episode]] = field(default_factory=list)

    def seed(self) -> int:
        return self.rng.randrange(2**31)

    @property
    def play(self) -> Prober:
        if self.prober is None:
            self.prober = Prober(self.runner, self.code, self.filename, self.workers)
        return self.prober

    def won(self, ep: Episode) -> bool:
        return ep.won(self.cfg.success_threshold, self.cfg.return_mode)


def _parse(run: _Run) -> list[Finding]:
    code, tree, found = parse(run.text, run.cfg)
    run.code, run.tree = code or "", tree
    return found


def _static(run: _Run) -> list[Finding]:
    if run.tree is None:  # the parse rung already reported why
        return []
    run.info, found = check_static(run.code, run.tree, run.cfg)
    return found


def _load(run: _Run) -> list[Finding]:
    ep = run.play.play(
        "random", run.seed(), RandomActions(random.Random(run.seed())), max_steps=run.cfg.termination_turns,
        want_tools=True,
    )  # fmt: skip
    run.first = ep
    if ep.failure is not None and ep.failure.op in ("load", "reset", "tools"):
        return [failure_finding(ep, ep.failure, "load")]
    run.randoms.append(ep)
    run.tool_env = bool(ep.tools) or bool(ep.meta and ep.meta.is_tool_env)
    run.tool_names = [str(t.get("function", {}).get("name", "")) for t in ep.tools]
    if not ep.first_obs.strip():
        msg = "reset returned an empty observation. Fix: describe the task, the state and the action format."
        return [finding(FindingCode.RESET_TYPE, "load", msg)]
    return []


def _already_failed(run: _Run) -> bool:
    """Random play already failed: the steps rung will report it, more probes would only repeat it (and
    a hung instance costs a full call timeout each time)."""
    return any(ep.failure is not None for ep in run.randoms)


def _determinism(run: _Run) -> list[Finding]:
    if _already_failed(run):
        return []
    action_seed, cap = run.seed(), run.cfg.termination_turns
    jobs = []
    for _ in range(run.cfg.determinism_seeds):
        seed = run.seed()
        jobs += [
            Job(
                "determinism",
                seed,
                RandomActions(random.Random(action_seed), run.tool_names),
                cap,
                peek_solution=True,
            )
            for _ in range(2)
        ]
    played = run.play.play_all(jobs)
    pairs = list(zip(played[::2], played[1::2], strict=True))
    run.randoms += [a for a, _ in pairs]
    run.pairs = pairs
    return dynamic.determinism_findings(pairs)


def _steps(run: _Run) -> list[Finding]:
    if _already_failed(run):
        return dynamic.step_findings(run.randoms, run.cfg)
    jobs = [
        Job(
            "random",
            run.seed(),
            RandomActions(random.Random(run.seed()), run.tool_names),
            run.cfg.termination_turns,
        )
        for _ in range(run.cfg.probe_episodes)
    ]
    run.randoms += run.play.play_all(jobs)
    return dynamic.step_findings(run.randoms, run.cfg)


def _termination(run: _Run) -> list[Finding]:
    nothing = run.rng.choice(("", " ", "\n"))
    idle = run.play.play(
        "do-nothing", run.seed(), probes.constant(nothing), max_steps=run.cfg.termination_turns
    )
    run.idle.append(idle)
    found = dynamic.step_findings([idle], run.cfg)
    return found or dynamic.termination_findings([*run.randoms, idle], run.cfg.termination_turns)


def _tools(run: _Run) -> list[Finding]:
    if not run.tool_env or run.first is None:
        return []
    found = tooling.schema_findings(run.first.tools)
    if found:
        return found
    bad, good = tooling.probe_calls(run.first.tools, run.rng)
    seed = run.seed()
    outputs, failure = run.play.call_tools(seed, bad)
    if failure is not None:
        call = bad[len(outputs)] if len(outputs) < len(bad) else ("?", {})
        msg = (
            f"tool call {call[0]}({_args(call[1])}) crashed the instance ({failure.kind}: "
            f"{failure.message[:200]}). Likely cause: arguments used without checking their type or "
            "presence. Fix: validate arguments and return an error message as text (agents send wrong "
            "arguments)."
        )
        return [finding(FindingCode.TOOL_ARGS_CRASH, "tools", msg)]
    outputs, failure = run.play.call_tools(seed, good)
    if failure is not None:
        msg = f"a well-typed tool call crashed the instance ({failure.kind}: {failure.message[:200]})."
        return [finding(FindingCode.TOOL_ARGS_CRASH, "tools", msg + " Fix: return error text, never raise.")]
    return tooling.mismatch_findings(good, outputs)


def _args(args: dict[str, object]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) < 80 else text[:77] + "..."


def _feasibility(run: _Run) -> list[Finding]:
    def solve(solution: list[str] | str) -> list[str]:
        return feasibility.solution_actions(solution)[0]

    seeds = [run.seed() for _ in range(run.cfg.feasibility_seeds)]
    run.solved = run.play.play_all([Job("solution", s, None, _SCRIPT_CAP, solve) for s in seeds])
    played = [e for e in run.solved if e.steps and e.solution is not None]
    explicit = any(feasibility.solution_actions(e.solution)[1] for e in played if e.solution is not None)
    plan_won = any(run.won(e) for e in played)  # a prose plan bound to the instance that won is evidence too
    hinted: list[Episode] = []
    if run.policy is not None and not (played and (explicit or plan_won)):
        hinted = [
            run.play.play("hinted", s, run.policy, max_steps=_SCRIPT_CAP) for s in seeds
        ]  # may be stateful
    found, stats = feasibility.feasibility_findings(run.solved, explicit, hinted, run.cfg)
    run.stats.update(stats)
    return found


def _exploit(run: _Run) -> list[Finding]:
    cfg = run.cfg
    winners = [e for e in run.solved if run.won(e)]
    extra = [feasibility.normalised_answer(e.steps[0].action) for e in winners]
    first_obs = run.first.first_obs if run.first else ""
    constants = probes.constant_candidates(run.rng, first_obs, run.tool_env, list(dict.fromkeys(extra)))
    jobs: list[Job] = []
    for i in range(cfg.exploit_episodes):
        kind = _EXPLOIT_ROTA[i % len(_EXPLOIT_ROTA)]
        if kind == "constant":
            action = constants[sum(j.label.startswith("constant") for j in jobs) % len(constants)]
            jobs.append(
                Job(f"constant {action[:30]!r}", run.seed(), probes.constant(action), cfg.termination_turns)
            )
        else:
            policy = probes.degenerate(kind, random.Random(run.seed()), cfg.long_action_chars, run.tool_env)
            jobs.append(Job(kind, run.seed(), policy, cfg.termination_turns))
    multi = [e for e in winners if len(e.steps) > 1]
    if multi:
        script = [s.action for s in multi[0].steps]
        jobs += [Job("replay", run.seed(), probes.scripted(script), len(script)) for _ in range(2)]
    slot = feasibility.leak_slot(winners)
    if slot is not None:
        jobs.append(Job("copy-slot", run.seed(), feasibility.copy_policy(slot), cfg.termination_turns))
    played = run.play.play_all(jobs)
    groups: dict[str, list[Episode]] = {"random": run.randoms, "empty": list(run.idle), "constant": []}
    for ep in played:
        groups.setdefault(ep.policy.split()[0], []).append(ep)
    copied = groups.pop("copy-slot", [])
    for group, ep in _confirm(run, groups):
        groups[group].append(ep)
    played = [e for g in groups.values() for e in g]
    broken = first_failure(played, "exploit") or dynamic.reward_findings(played, cfg, "exploit")
    if broken:
        return broken
    found, stats = feasibility.exploit_findings(groups, cfg)
    run.stats.update(stats)
    if slot is not None and copied:
        found += feasibility.leak_findings(slot, copied[0], cfg)
    return found + dynamic.seed_findings([a for a, _ in run.pairs], run.solved)


def _confirm(run: _Run, groups: dict[str, list[Episode]]) -> list[tuple[str, Episode]]:
    """Replay each policy that won once (a constant: the same string) on fresh seeds."""
    cfg = run.cfg
    jobs: list[tuple[str, Job]] = []
    for group, winner in feasibility.unconfirmed(groups, cfg):
        for _ in range(cfg.exploit_confirm_episodes):
            if group == "constant":
                policy = probes.constant(winner.steps[0].action)
            else:
                policy = probes.degenerate(
                    group, random.Random(run.seed()), cfg.long_action_chars, run.tool_env
                )
            jobs.append((group, Job(winner.policy, run.seed(), policy, cfg.termination_turns)))
    played = run.play.play_all([job for _, job in jobs])
    return [(group, ep) for (group, _), ep in zip(jobs, played, strict=True)]


_RUNGS: tuple[tuple[Stage, Callable[[_Run], list[Finding]]], ...] = (
    ("parse", _parse), ("static", _static), ("load", _load), ("determinism", _determinism), ("steps", _steps),
    ("termination", _termination), ("tools", _tools), ("feasibility", _feasibility), ("exploit", _exploit),
)  # fmt: skip


def check_env(
    source: str,
    sandbox: EnvRunner,
    config: CheckerConfig | None = None,
    *,
    seed: int | None = None,
    policy: Policy | None = None,
    filename: str = "<env>",
) -> CheckReport:
    """Run the validation ladder on ``source`` (environment code, or a model reply holding it).

    Args:
        source: the environment's code, or a reply from which :func:`extract_code` takes it.
        sandbox: the runner that executes it (:class:`spade.sandbox.Sandbox` for untrusted code).
        config: episode counts, thresholds and the import allow-list.
        seed: seeds every probe action and environment seed; None draws one (recorded in the report).
        policy: optional hint-following policy ``(observation, turn) -> action`` for feasibility when the
            environment has no playable ``solution()``.
        filename: shown in error messages.

    Returns:
        A report whose ``ok`` is False when any finding is fatal.
    """
    cfg = config or CheckerConfig()
    if seed is None:
        seed = random.SystemRandom().randrange(2**63)
    run = _Run(source, sandbox, cfg, random.Random(seed), policy, filename)
    run.workers = cfg.parallel_episodes if sandbox.layers.get("process") else 1
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    for stage, rung in _RUNGS:
        start = time.perf_counter()
        found = rung(run)
        timings[stage] = time.perf_counter() - start
        findings += found
        if any(f.fatal for f in found):
            break
    stats = dict(run.stats)
    if run.prober is not None:
        stats.update(episodes=float(run.prober.episodes), steps=float(run.prober.steps))
    return CheckReport(
        ok=not any(f.fatal for f in findings),
        findings=tuple(findings),
        timings_s=timings,
        stats=stats,
        seed=seed,
        source_sha256=hashlib.sha256((run.code or source).encode()).hexdigest(),
        is_tool_env=run.tool_env,
        official_format=bool(run.info and run.info.official_format),
    )


async def acheck_env(
    source: str,
    sandbox: EnvRunner,
    config: CheckerConfig | None = None,
    *,
    seed: int | None = None,
    policy: Policy | None = None,
    filename: str = "<env>",
) -> CheckReport:
    """:func:`check_env` in a worker thread, so an event loop keeps serving other work meanwhile."""
    return await asyncio.to_thread(
        check_env, source, sandbox, config, seed=seed, policy=policy, filename=filename
    )
