"""``livecodebench``: LiveCodeBench code generation from a local copy (``--data PATH``), pass@1 in the sandbox.

Data: the ``code_generation_lite`` release of LiveCodeBench (its ``test.jsonl`` ... ``test6.jsonl``, one per
release version; a file or the folder of them): records with ``question_id``, ``question_title``,
``question_content``, ``platform``, ``contest_date``, ``starter_code``, ``difficulty``,
``public_test_cases`` and ``private_test_cases`` (JSON strings; the private ones often compressed) and
``metadata`` (a JSON string with ``func_name`` for LeetCode problems). Items are problems, categories their
difficulty; ``--tasks`` takes question ids or difficulties, ``--param start_date=YYYY-MM-DD`` /
``end_date=...`` keep the problems of a contest window (inclusive, as LiveCodeBench's own options).

Prompt: LiveCodeBench's generic chat prompt (its system message, then ``### Question:`` with the problem, the
starter code or the stdin instruction, ``### Answer:``). The code is the text between the reply's last two
fence lines (LiveCodeBench's extraction; no code scores 0).

Score: an episode passes when its code passes every public and private test; tests run one at a time, each
in a fresh sandbox instance (:func:`spade.sandbox.programs.run_program`) with a CPU-time limit of
``timeout_s`` (default 6 s, LiveCodeBench's), stopping at the first failure as LiveCodeBench does. An item's
score is its fraction of passing episodes, so the suite's score is pass@1. Grading follows
:mod:`spade.evals.lcb_tests`.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult, Progress, Workload
from spade.evals.lcb_tests import Case, case_program, extract_code, parse_cases
from spade.evals.localdata import Record, data_path, field_of, read_records, select, unique_ids, workload_of
from spade.sandbox import Limits, Sandbox
from spade.sandbox.programs import run_program
from spade.types import Message, Policy, SamplingParams

SUITE = "livecodebench"
SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests."
)
WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose your code "
    "within delimiters."
)
WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
    "the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python program "
    "runs, it reads the inputs, runs the algorithm and writes output to STDOUT."
)
REQUIRED = ("question_id", "question_content", "public_test_cases", "private_test_cases", "metadata")
_KNOWN_PARAMS = frozenset({"data", "timeout_s", "start_date", "end_date"})


@dataclass(frozen=True, slots=True)
class Problem:
    """One code-generation problem (private tests are decoded only when it is scored)."""

    item_id: str
    difficulty: str
    content: str
    starter: str
    func: str | None
    contest_date: date | None
    public: str
    private: Any
    title: str = ""


def prompt(problem: Problem) -> list[Message]:
    """LiveCodeBench's generic chat prompt for ``problem``."""
    text = f"### Question:\n{problem.content}\n\n"
    if problem.starter:
        text += f"### Format: {WITH_STARTER}\n```python\n{problem.starter}\n```\n\n"
    else:
        text += f"### Format: {WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    text += "### Answer: (use the provided format with backticks)\n\n"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def _params(opts: EvalOptions) -> tuple[float, date | None, date | None]:
    unknown = sorted(set(opts.params) - _KNOWN_PARAMS - {"preset"})
    if unknown:
        raise EvalError(f"unknown livecodebench parameter(s) {unknown}; accepted: {sorted(_KNOWN_PARAMS)}")
    timeout = opts.params.get("timeout_s", 6.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise EvalError(f"livecodebench parameter timeout_s must be in (0, 600] seconds, got {timeout!r}")
    return float(timeout), _date(opts.params.get("start_date")), _date(opts.params.get("end_date"))


def _date(raw: Any) -> date | None:
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(str(raw)).date()
    except ValueError:
        raise EvalError(f"livecodebench: a date is YYYY-MM-DD, got {raw!r}") from None


def _problem(k: int, item_id: str, record: Record, source: str) -> Problem:
    where = f"{source} record {k}"
    for name in REQUIRED:
        field_of(SUITE, record, (name,), where)
    try:
        metadata = (
            json.loads(record["metadata"]) if isinstance(record["metadata"], str) else record["metadata"]
        )
    except json.JSONDecodeError:
        raise EvalError(f"{SUITE}: {where} has metadata that is not JSON") from None
    raw_date = record.get("contest_date")
    return Problem(
        item_id=item_id,
        difficulty=str(record.get("difficulty") or "unknown"),
        content=str(record["question_content"]),
        starter=str(record.get("starter_code") or ""),
        func=(metadata or {}).get("func_name"),
        contest_date=_date(str(raw_date)[:10]) if raw_date else None,
        public=record["public_test_cases"],
        private=record["private_test_cases"],
        title=str(record.get("question_title") or ""),
    )


def load_problems(opts: EvalOptions) -> list[Problem]:
    """The selected problems (EvalError for a bad path, records without the fields, bad parameters)."""
    _, start, end = _params(opts)
    path = data_path(SUITE, opts)
    records = read_records(SUITE, path, (".jsonl", ".json"))
    ids = unique_ids([str(r.get("question_id", k)) for k, r in enumerate(records)])
    problems = [_problem(k, i, r, path.name) for k, (i, r) in enumerate(zip(ids, records, strict=True))]
    if start or end:
        problems = [p for p in problems if p.contest_date and _within(p.contest_date, start, end)]
    return select(SUITE, problems, opts, lambda p: (p.item_id, p.difficulty))


def _within(day: date, start: date | None, end: date | None) -> bool:
    return (start is None or start <= day) and (end is None or day <= end)


async def grade(sandbox: Sandbox, source: str, cases: list[Case], func: str | None) -> tuple[bool, str, int]:
    """Run ``cases`` one by one until one fails: (all passed, the failure, tests passed)."""
    if not source.strip():
        return False, "no code block in the reply", 0
    for k, case in enumerate(cases):
        result = await run_program(sandbox, case_program(source, case, func))
        if not result.passed:
            return False, f"test {k}: {result.error}", k
    return True, "", len(cases)


class LiveCodeBenchSuite:
    """LiveCodeBench code generation from ``--data``: pass@1 over public and private tests, sandboxed."""

    name = SUITE

    def check(self, opts: EvalOptions) -> None:
        """Read the local copy and the public tests of the selected problems (EvalError when malformed)."""
        for p in load_problems(opts):
            parse_cases(p.public, f"{p.item_id} public_test_cases")

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected problems."""
        return workload_of(len(load_problems(opts)), opts, "problem")

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Sample ``opts.episodes`` programs per problem and grade each against every test."""
        timeout, _, _ = _params(opts)
        problems = load_problems(opts)
        sampling = opts.sampling()
        limits = Limits(
            call_timeout_s=timeout,
            cpu_seconds=math.ceil(timeout) + 5,
            max_live_instances=max(1, min(opts.concurrency, 16)),
        )
        total, done = len(problems) * opts.episodes, 0
        gate = asyncio.Semaphore(max(1, opts.concurrency))

        async def episode(problem: Problem, cases: list[Case] | str) -> dict[str, Any]:
            nonlocal done
            async with gate:
                outcome = await _episode(policy, sandbox, problem, cases, sampling)
            done += 1
            progress(done, total)
            return outcome

        progress(0, total)
        with Sandbox(limits) as sandbox:
            tests = [_all_cases(p) for p in problems]
            runs = [
                [episode(p, c) for _ in range(opts.episodes)] for p, c in zip(problems, tests, strict=True)
            ]
            outcomes = await asyncio.gather(*(asyncio.gather(*r) for r in runs))
        return [_result(p, list(o), c) for p, o, c in zip(problems, outcomes, tests, strict=True)]


def _all_cases(problem: Problem) -> list[Case] | str:
    """Public then private cases, or why they cannot be read (the item then scores 0 and says so)."""
    try:
        return parse_cases(problem.public, "public_test_cases") + parse_cases(
            problem.private, "private_test_cases"
        )
    except EvalError as exc:
        return str(exc)


async def _episode(
    policy: Policy, sandbox: Sandbox, problem: Problem, cases: list[Case] | str, sampling: SamplingParams
) -> dict[str, Any]:
    if isinstance(cases, str):
        return {"passed": False, "reply": "", "error": cases, "tests_passed": 0, "broken": True}
    ids = policy.template.render(prompt(problem), add_generation_prompt=True)
    completion = (await policy.sample([ids], sampling))[0]
    if completion.finish_reason == "error":
        error = f"model: {completion.error or 'no reply'}"
        return {"passed": False, "reply": "", "error": error, "tests_passed": 0, "broken": True}
    passed, error, count = await grade(sandbox, extract_code(completion.text), cases, problem.func)
    return {
        "passed": passed,
        "reply": completion.text[:4000],
        "error": error,
        "tests_passed": count,
        "broken": False,
    }


def _result(problem: Problem, outcomes: list[dict[str, Any]], cases: list[Case] | str) -> ItemResult:
    return ItemResult(
        suite=SUITE,
        item_id=problem.item_id,
        category=problem.difficulty,
        scores=tuple(1.0 if o["passed"] else 0.0 for o in outcomes),
        detail={
            "title": problem.title,
            "mode": "functional" if problem.func else "stdin",
            "tests": len(cases) if isinstance(cases, list) else 0,
            "tests_passed": [o["tests_passed"] for o in outcomes],
            "failures": [o["error"] for o in outcomes],
            "errors": sum(1 for o in outcomes if o["broken"]),
            "replies": [o["reply"] for o in outcomes],
        },
    )
