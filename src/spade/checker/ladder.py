"""The validation ladder (SPEC §5): named rungs run in order, stopping after the first fatal one."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from spade.checker import dynamic, feasibility, probes, rates, reuse, tooling, turns
from spade.checker.episodes import Episode, Job, Prober
from spade.checker.failures import failure_finding, first_failure
from spade.checker.findings import CheckReport, Finding, FindingCode, Stage, finding
from spade.checker.probes import Policy, RandomActions
from spade.checker.static import StaticInfo, check_static, parse
from spade.config import CheckerConfig, WinRule
from spade.replies import normalised_answer
from spade.sandbox.api import EnvRunner

_SCRIPT_CAP = 1000
"""Most steps a scripted solution or hint-following episode may take."""
_EXPLOIT_ROTA = ("constant", "enumerate", "constant", "format", "long", "constant", "empty", "format")


@dataclass(frozen=True, slots=True)
class _Context:
    """What every rung of one check may use; fixed for the whole check."""

    text: str
    runner: EnvRunner
    cfg: CheckerConfig
    rule: WinRule
    rng: random.Random
    """Draws every seed of the check, in rung order (so a check is reproducible from its seed)."""
    policy: Policy | None
    filename: str
    workers: int

    def seed(self) -> int:
        return self.rng.randrange(2**31)

    def won(self, ep: Episode) -> bool:
        return ep.won(self.rule.success_threshold, self.rule.return_mode)

    @property
    def reward_range(self) -> tuple[float, float]:
        return self.cfg.reward_min, self.cfg.reward_max


@dataclass(frozen=True, slots=True)
class Evidence:
    """What the rungs have learned so far. Immutable: each rung returns a new record (``replace``)."""

    code: str = ""
    tree: ast.Module | None = None
    info: StaticInfo | None = None
    prober: Prober | None = None
    """Plays episodes of ``code`` (set by the parse rung once there is code)."""
    tool_env: bool = False
    tool_names: tuple[str, ...] = ()
    first: Episode | None = None
    randoms: tuple[Episode, ...] = ()
    idle: tuple[Episode, ...] = ()
    solved: tuple[Episode, ...] = ()
    hinted: tuple[Episode, ...] = ()
    """Episodes of the hint-following policy (played only when no solution() script is evidence)."""
    pairs: tuple[tuple[Episode, Episode], ...] = ()
    stats: tuple[tuple[str, float], ...] = ()
    """Rates and counts, in the order the rungs found them."""

    @property
    def play(self) -> Prober:
        if self.prober is None:  # pragma: no cover - the parse rung sets it before any rung plays
            raise RuntimeError("no prober: the parse rung has not run")
        return self.prober

    def with_stats(self, stats: dict[str, float]) -> Evidence:
        return replace(self, stats=(*self.stats, *stats.items()))


Rung = Callable[[_Context, Evidence], tuple[list[Finding], Evidence]]


def _parse(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    code, tree, found = parse(ctx.text, ctx.cfg.max_source_chars)
    prober = Prober(ctx.runner, code or "", ctx.filename, ctx.workers, ctx.rule.difficulty)
    return found, replace(ev, code=code or "", tree=tree, prober=prober)


def _static(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    if ev.tree is None:  # the parse rung already reported why
        return [], ev
    info, found = check_static(
        ev.code, ev.tree, allowed_imports=ctx.cfg.allowed_imports, strict_rng=ctx.cfg.strict_rng
    )
    return found, replace(ev, info=info)


def _load(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    ep = ev.play.play(
        "random", ctx.seed(), RandomActions(random.Random(ctx.seed())), max_steps=ctx.cfg.termination_turns,
        want_tools=True,
    )  # fmt: skip
    ev = replace(ev, first=ep)
    if ep.failure is not None and ep.failure.op in ("load", "reset", "tools"):
        return [failure_finding(ep, ep.failure, "load")], ev
    names = tuple(str(t.get("function", {}).get("name", "")) for t in ep.tools)
    tool_env = bool(ep.tools) or bool(ep.meta and ep.meta.is_tool_env)
    ev = replace(ev, randoms=(*ev.randoms, ep), tool_env=tool_env, tool_names=names)
    if not ep.first_obs.strip():
        msg = "reset returned an empty observation. Fix: describe the task, the state and the action format."
        return [finding(FindingCode.RESET_TYPE, "load", msg)], ev
    return [], ev


def _already_failed(ev: Evidence) -> bool:
    """Random play already failed: the steps rung will report it, more probes would only repeat it (and
    a hung instance costs a full call limit each time)."""
    return any(ep.failure is not None for ep in ev.randoms)


def _determinism(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    if _already_failed(ev):
        return [], ev
    action_seed, cap = ctx.seed(), ctx.cfg.termination_turns
    jobs = []
    for _ in range(ctx.cfg.determinism_seeds):
        seed = ctx.seed()
        jobs += [
            Job(
                "determinism",
                seed,
                RandomActions(random.Random(action_seed), list(ev.tool_names)),
                cap,
                peek_solution=True,
            )
            for _ in range(2)
        ]
    played = ev.play.play_all(jobs)
    pairs = tuple(zip(played[::2], played[1::2], strict=True))
    ev = replace(ev, randoms=(*ev.randoms, *(a for a, _ in pairs)), pairs=pairs)
    return dynamic.determinism_findings(list(pairs)), ev


def _steps(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    if _already_failed(ev):
        return dynamic.step_findings(list(ev.randoms), ctx.reward_range), ev
    jobs = [
        Job(
            "random",
            ctx.seed(),
            RandomActions(random.Random(ctx.seed()), list(ev.tool_names)),
            ctx.cfg.termination_turns,
        )
        for _ in range(ctx.cfg.probe_episodes)
    ]
    ev = replace(ev, randoms=(*ev.randoms, *ev.play.play_all(jobs)))
    return dynamic.step_findings(list(ev.randoms), ctx.reward_range), ev


def _termination(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    nothing = ctx.rng.choice(("", " ", "\n"))
    idle = ev.play.play(
        "do-nothing", ctx.seed(), probes.constant(nothing), max_steps=ctx.cfg.termination_turns
    )
    ev = replace(ev, idle=(*ev.idle, idle))
    found = dynamic.step_findings([idle], ctx.reward_range)
    return found or dynamic.termination_findings([*ev.randoms, idle], ctx.cfg.termination_turns), ev


def _tools(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    if not ev.tool_env or ev.first is None:
        return [], ev
    found = tooling.schema_findings(ev.first.tools)
    if found:
        return found, ev
    bad, good = tooling.probe_calls(ev.first.tools, ctx.rng)
    seed = ctx.seed()
    outputs, failure = ev.play.call_tools(seed, bad)
    if failure is not None:
        call = bad[len(outputs)] if len(outputs) < len(bad) else ("?", {})
        msg = (
            f"tool call {call[0]}({_args(call[1])}) crashed the instance ({failure.kind}: "
            f"{failure.message[:200]}). Likely cause: arguments used without checking their type or "
            "presence. Fix: validate arguments and return an error message as text (agents send wrong "
            "arguments)."
        )
        return [finding(FindingCode.TOOL_ARGS_CRASH, "tools", msg)], ev
    outputs, failure = ev.play.call_tools(seed, good)
    if failure is not None:
        msg = f"a well-typed tool call crashed the instance ({failure.kind}: {failure.message[:200]})."
        return [
            finding(FindingCode.TOOL_ARGS_CRASH, "tools", msg + " Fix: return error text, never raise.")
        ], ev
    return tooling.mismatch_findings(good, outputs), ev


def _args(args: dict[str, object]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in args.items())
    return text if len(text) < 80 else text[:77] + "..."


def _feasibility(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    def solve(solution: list[str] | str) -> list[str]:
        return feasibility.solution_actions(solution)[0]

    seeds = [ctx.seed() for _ in range(ctx.cfg.feasibility_seeds)]
    solved = tuple(ev.play.play_all([Job("solution", s, None, _SCRIPT_CAP, solve) for s in seeds]))
    played = [e for e in solved if e.steps and e.solution is not None]
    explicit = any(feasibility.solution_actions(e.solution)[1] for e in played if e.solution is not None)
    plan_won = any(ctx.won(e) for e in played)  # a prose plan bound to the instance that won is evidence too
    hinted: list[Episode] = []
    if ctx.policy is not None and not (played and (explicit or plan_won)):
        hinted = [
            ev.play.play("hinted", s, ctx.policy, max_steps=_SCRIPT_CAP) for s in seeds
        ]  # may be stateful
    found, stats = feasibility.feasibility_findings(
        list(solved), explicit, hinted, won=ctx.won, min_rate=ctx.cfg.min_solution_win_rate,
        reward_range=ctx.reward_range, return_mode=ctx.rule.return_mode,
    )  # fmt: skip
    stats |= turns.turn_stats([e for e in (*solved, *hinted) if ctx.won(e)])
    return found, replace(ev, solved=solved, hinted=tuple(hinted)).with_stats(stats)


def _reuse(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    plan = reuse.plan(
        ev.solved,
        ctx.seed,
        tool_names=ev.tool_names,
        script_cap=_SCRIPT_CAP,
        random_cap=ctx.cfg.termination_turns,
    )
    series = ev.play.play_series(plan.series)
    return reuse.reuse_findings(series, ev.play.play_all(plan.fresh)), ev


def _turns(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    winners = [e for e in (*ev.solved, *ev.hinted) if ctx.won(e)]
    crossed = ev.play.play_all(turns.cross_jobs(winners)) if turns.min_turns(winners) == 1 else []
    probed = [*ev.randoms, *ev.idle]
    return turns.turn_findings(winners, crossed, probed, ctx.won, reject=ctx.cfg.reject_one_reply), ev


def _exploit_jobs(ctx: _Context, ev: Evidence, winners: list[Episode]) -> list[Job]:
    cfg = ctx.cfg
    extra = [normalised_answer(e.steps[0].action) for e in winners]
    first_obs = ev.first.first_obs if ev.first else ""
    constants = probes.constant_candidates(ctx.rng, first_obs, ev.tool_env, list(dict.fromkeys(extra)))
    jobs: list[Job] = []
    for i in range(cfg.exploit_episodes):
        kind = _EXPLOIT_ROTA[i % len(_EXPLOIT_ROTA)]
        if kind == "constant":
            action = constants[sum(j.label.startswith("constant") for j in jobs) % len(constants)]
            jobs.append(
                Job(f"constant {action[:30]!r}", ctx.seed(), probes.constant(action), cfg.termination_turns)
            )
        else:
            policy = probes.degenerate(kind, random.Random(ctx.seed()), cfg.long_action_chars, ev.tool_env)
            jobs.append(Job(kind, ctx.seed(), policy, cfg.termination_turns))
    multi = [e for e in winners if len(e.steps) > 1]
    if multi:
        script = [s.action for s in multi[0].steps]
        jobs += [Job("replay", ctx.seed(), probes.scripted(script), len(script)) for _ in range(2)]
    if not ev.tool_env:
        guess = [probes.number_guess(random.Random(ctx.seed())) for _ in range(cfg.guess_episodes)]
        jobs += [Job("guess", ctx.seed(), policy, cfg.termination_turns) for policy in guess]
    return jobs


def _exploit(ctx: _Context, ev: Evidence) -> tuple[list[Finding], Evidence]:
    cfg = ctx.cfg
    winners = [e for e in ev.solved if ctx.won(e)]
    jobs = _exploit_jobs(ctx, ev, winners)
    slot = feasibility.leak_slot(winners)
    if slot is not None:
        jobs.append(Job("copy-slot", ctx.seed(), feasibility.copy_policy(slot), cfg.termination_turns))
    played = ev.play.play_all(jobs)
    groups: dict[str, list[Episode]] = {"random": list(ev.randoms), "empty": list(ev.idle), "constant": []}
    for ep in played:
        groups.setdefault(ep.policy.split()[0], []).append(ep)
    copied = groups.pop("copy-slot", [])
    for group, ep in _confirm(ctx, ev, groups):
        groups[group].append(ep)
    for group in ("random",) if ev.tool_env else ("random", "guess"):  # the rate-judged probes
        groups[group] = _top_up(ctx, ev, group, groups.get(group, []))
    played = [e for g in groups.values() for e in g]
    broken = first_failure(played, "exploit") or dynamic.reward_findings(played, ctx.reward_range, "exploit")
    if broken:
        return broken, ev
    found, stats = feasibility.exploit_findings(
        groups, won=ctx.won, max_success=cfg.exploit_max_success, min_wins=cfg.exploit_min_wins,
        confidence=cfg.exploit_confidence,
    )  # fmt: skip
    if slot is not None and copied:
        found += feasibility.leak_findings(slot, copied[0], ctx.won)
    seeds, share = dynamic.seed_findings([a for a, _ in ev.pairs], ev.solved, cfg.min_distinct_instances)
    return found + seeds, ev.with_stats(stats | share)


def _top_up(ctx: _Context, ev: Evidence, group: str, episodes: list[Episode]) -> list[Episode]:
    """Random play or number guessing (``group``) played on while its win rate's interval holds the limit."""
    cfg = ctx.cfg

    def more(n: int) -> list[Episode]:
        def policy() -> Policy:
            rng = random.Random(ctx.seed())
            return probes.number_guess(rng) if group == "guess" else RandomActions(rng, list(ev.tool_names))

        return ev.play.play_all([Job(group, ctx.seed(), policy(), cfg.termination_turns) for _ in range(n)])

    return rates.top_up(
        episodes, more, won=ctx.won, limit=cfg.exploit_max_success, confidence=cfg.exploit_confidence,
        cap=cfg.exploit_max_episodes, batch=cfg.guess_episodes,
    )  # fmt: skip


def _confirm(ctx: _Context, ev: Evidence, groups: dict[str, list[Episode]]) -> list[tuple[str, Episode]]:
    """Replay each policy that won once (a constant: the same string) on fresh seeds."""
    cfg = ctx.cfg
    jobs: list[tuple[str, Job]] = []
    found = feasibility.unconfirmed(
        groups, won=ctx.won, max_success=cfg.exploit_max_success, min_wins=cfg.exploit_min_wins
    )
    for group, winner in found:
        for _ in range(cfg.exploit_confirm_episodes):
            if group == "constant":
                policy = probes.constant(winner.steps[0].action)
            else:
                policy = probes.degenerate(
                    group, random.Random(ctx.seed()), cfg.long_action_chars, ev.tool_env
                )
            jobs.append((group, Job(winner.policy, ctx.seed(), policy, cfg.termination_turns)))
    played = ev.play.play_all([job for _, job in jobs])
    return [(group, ep) for (group, _), ep in zip(jobs, played, strict=True)]


RUNGS: tuple[tuple[Stage, Rung], ...] = (
    ("parse", _parse), ("static", _static), ("load", _load), ("determinism", _determinism), ("steps", _steps),
    ("termination", _termination), ("tools", _tools), ("feasibility", _feasibility), ("reuse", _reuse),
    ("turns", _turns),
    ("exploit", _exploit),
)  # fmt: skip
"""The ladder: each rung checks the evidence so far and returns its findings and the evidence it added."""

STAGES: tuple[Stage, ...] = tuple(stage for stage, _ in RUNGS)
"""The stages the ladder runs, in order (derived from :data:`RUNGS`)."""


@dataclass(frozen=True, slots=True)
class Checker:
    """The validation ladder with a run's settings, built once (a training run builds it from ``checker.*``
    and ``play.*``, so play and checker agree on when an episode is won)."""

    config: CheckerConfig = CheckerConfig()  # noqa: RUF009 - frozen, so one shared default is safe
    """Episode counts, thresholds and the import allow-list."""
    win: WinRule = WinRule()  # noqa: RUF009 - frozen, so one shared default is safe
    """When an episode is won, and the level it is played at."""

    def check(
        self,
        source: str,
        sandbox: EnvRunner,
        *,
        seed: int | None = None,
        policy: Policy | None = None,
        filename: str = "<env>",
    ) -> CheckReport:
        """Run the ladder on ``source`` (environment code, or a model reply holding it).

        Args:
            source: the environment's code, or a reply from which :func:`extract_code` takes it.
            sandbox: the runner that executes it (:class:`spade.sandbox.Sandbox` for untrusted code).
            seed: seeds every probe action and environment seed; None draws one (recorded in the report).
            policy: optional hint-following policy ``(observation, turn) -> action`` for feasibility when the
                environment has no playable ``solution()``.
            filename: shown in error messages.

        Returns:
            A report whose ``ok`` is False when any finding is fatal.
        """
        if seed is None:
            seed = random.SystemRandom().randrange(2**63)
        cfg = self.config
        workers = cfg.parallel_episodes if sandbox.layers.get("process") else 1
        ctx = _Context(source, sandbox, cfg, self.win, random.Random(seed), policy, filename, workers)
        findings, timings, ev = _climb(ctx)
        stats = dict(ev.stats)
        if ev.prober is not None and ev.prober.episodes:
            stats.update(episodes=float(ev.prober.episodes), steps=float(ev.prober.steps))
        return CheckReport(
            ok=not any(f.fatal for f in findings),
            findings=tuple(findings),
            timings_s=timings,
            stats=stats,
            seed=seed,
            source_sha256=hashlib.sha256((ev.code or source).encode()).hexdigest(),
            is_tool_env=ev.tool_env,
            official_format=bool(ev.info and ev.info.official_format),
        )


def check_env(
    source: str,
    sandbox: EnvRunner,
    config: CheckerConfig | None = None,
    *,
    seed: int | None = None,
    policy: Policy | None = None,
    filename: str = "<env>",
    win: WinRule | None = None,
) -> CheckReport:
    """:meth:`Checker.check` with ``config`` (default :class:`~spade.config.CheckerConfig`) and ``win`` (pass
    ``cfg.play`` in a training run; default :class:`~spade.config.WinRule`)."""
    checker = Checker(config or CheckerConfig(), win or WinRule())
    return checker.check(source, sandbox, seed=seed, policy=policy, filename=filename)


def _climb(ctx: _Context) -> tuple[list[Finding], dict[str, float], Evidence]:
    """Run the rungs in order until one finds a fatal problem: the findings, each rung's seconds, the
    evidence gathered."""
    ev = Evidence()
    findings: list[Finding] = []
    timings: dict[str, float] = {}
    for stage, rung in RUNGS:
        start = time.perf_counter()
        found, ev = rung(ctx, ev)
        timings[stage] = time.perf_counter() - start
        findings += found
        if any(f.fatal for f in found):
            break
    return findings, timings, ev


async def acheck_env(
    source: str,
    sandbox: EnvRunner,
    config: CheckerConfig | None = None,
    *,
    seed: int | None = None,
    policy: Policy | None = None,
    filename: str = "<env>",
    win: WinRule | None = None,
) -> CheckReport:
    """:func:`check_env` in a worker thread, so an event loop keeps serving other work meanwhile."""
    return await asyncio.to_thread(
        check_env, source, sandbox, config, seed=seed, policy=policy, filename=filename, win=win
    )
