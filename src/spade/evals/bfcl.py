"""``bfcl``: the Berkeley Function Calling Leaderboard v4, from the installed ``bfcl-eval`` package's data.

Categories are the package's data files (``BFCL_v4_<category>.json``; :data:`bfcl_data.KNOWN`): the
single-turn Python AST categories (``simple_python`` — BFCL v4's name for ``simple`` —, ``multiple``,
``parallel``, ``parallel_multiple``, ``irrelevance`` and the ``live_*`` ones) and the multi-turn ones
(``multi_turn_base``, ``_miss_func``, ``_miss_param``, ``_long_context``). Java, JavaScript, memory and
web-search categories are refused with the reason (:data:`bfcl_data.UNSUPPORTED`). How the package is used
without its optional dependencies is in :mod:`spade.evals.bfcl_data`; the ported prompts and decoders are in
:mod:`spade.evals.bfcl_decode`.

Selection: ``opts.tasks`` names categories; empty selects :data:`bfcl_data.DEFAULT` (five single-turn
categories and ``multi_turn_base``) with at most ``params["default_limit"]`` (20) items each, a small set
that runs in minutes on a CPU. ``opts.limit`` keeps the first N entries (file order) of every category.

Two ways to ask (``params["mode"]``), as BFCL evaluates open models:

- ``prompt``: BFCL's default system prompt lists the functions as JSON and asks for
  ``[func(arg=value), ...]``; the reply is decoded as BFCL's prompting handlers do;
- ``fc``: the functions are passed as tools to the policy's chat template (BFCL's open-model conversion)
  and the reply's ``<tool_call>`` blocks are parsed (:func:`spade.replies.extract_tool_calls`);
- ``auto`` (default): ``fc`` when the chat template renders tools, else ``prompt`` (SmolLM2's template, for
  one, ignores tools).

Scoring, as BFCL's ``eval_runner``: AST categories decode the reply and run the package's ``ast_checker``;
``irrelevance`` / ``live_irrelevance`` pass when no function call decodes, ``live_relevance`` when one does.
Multi-turn entries run BFCL's inference loop (per user turn, up to ``params["max_steps"]`` (BFCL's 20)
model steps; a step whose reply decodes to no call ends the turn; more steps force-quit the entry), with
every call executed by the package's simulated API classes in a sandbox instance
(:mod:`spade.evals.bfcl_host`); at the end the package's ``multi_turn_checker`` runs in the same instance
(state and response checks against the ground truth's execution). Few-shot prompting is not part of BFCL
and is refused. Differences from BFCL: miss-function turns also add the held-out functions to the tools in
``fc`` mode; the ``excluded_function`` field of multi-turn entries is unused by the package and here.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from spade.config import EvalOptions
from spade.evals import bfcl_data, bfcl_decode
from spade.evals.base import EvalError, ItemResult, Progress, Workload
from spade.replies import extract_tool_calls, strip_reasoning
from spade.sandbox import EnvHandle, Limits, Sandbox, SandboxError
from spade.types import ChatTemplate, Message, Policy, SamplingParams, ToolSchema

SUITE = "bfcl"
MAX_STEPS = 20
"""BFCL's ``MAXIMUM_STEP_LIMIT``: model steps per user turn before the entry is force-quit."""
DEFAULT_LIMIT = 20
_KNOWN_PARAMS = frozenset({"mode", "max_steps", "default_limit"})
_PROBE_TOOL: ToolSchema = {
    "type": "function",
    "function": {"name": "spade_probe", "description": "probe", "parameters": {"type": "object"}},
}

CallFormat = Literal["prompt", "fc"]


@dataclass(frozen=True, slots=True)
class BFCLParams:
    """The suite's own settings (from ``EvalOptions.params``)."""

    mode: Literal["auto", "prompt", "fc"] = "auto"
    max_steps: int = MAX_STEPS
    default_limit: int = DEFAULT_LIMIT


def parse_params(params: dict[str, Any]) -> BFCLParams:
    """Validate ``params``; raises EvalError naming the bad key and what is accepted."""
    unknown = sorted(set(params) - _KNOWN_PARAMS)
    if unknown:
        raise EvalError(f"unknown bfcl parameter(s) {unknown}; accepted: {sorted(_KNOWN_PARAMS)}")
    mode = params.get("mode", "auto")
    if mode not in ("auto", "prompt", "fc"):
        raise EvalError(f"bfcl parameter mode must be 'auto', 'prompt' or 'fc', got {mode!r}")
    for key in ("max_steps", "default_limit"):
        value = params.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EvalError(f"bfcl parameter {key} must be a positive int, got {value!r}")
    return BFCLParams(
        mode=mode,
        max_steps=int(params.get("max_steps", MAX_STEPS)),
        default_limit=int(params.get("default_limit", DEFAULT_LIMIT)),
    )


def select(opts: EvalOptions, params: BFCLParams) -> list[bfcl_data.Item]:
    """The entries ``opts.tasks`` and ``opts.limit`` select (see module docstring)."""
    categories = bfcl_data.check_categories(opts.tasks) if opts.tasks else bfcl_data.DEFAULT
    limit = opts.limit if opts.limit is not None else (None if opts.tasks else params.default_limit)
    return [item for c in categories for item in bfcl_data.load_category(c)[:limit]]


def renders_tools(template: ChatTemplate) -> bool:
    """Whether the chat template shows tools to the model (a template that ignores them cannot do ``fc``)."""
    probe: list[Message] = [{"role": "user", "content": "hi"}]
    with_tools = template.render(probe, [_PROBE_TOOL], add_generation_prompt=True)
    return with_tools != template.render(probe, None, add_generation_prompt=True)


def host_source() -> str:
    """The text of :mod:`spade.evals.bfcl_host`, loaded into a sandbox instance per multi-turn episode."""
    return resources.files("spade.evals").joinpath("bfcl_host.py").read_text(encoding="utf-8")


# -- single turn ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """One episode's outcome."""

    valid: bool
    error_type: str = ""
    error: str = ""
    replies: tuple[str, ...] = ()
    decoded: str = ""


def decode(text: str, mode: CallFormat, tools: list[ToolSchema] | None) -> list[dict[str, dict[str, Any]]]:
    """A reply's function calls as ``[{name: {arg: value}}]``; DecodeError when it holds none."""
    body = strip_reasoning(text)
    if mode == "prompt":
        return bfcl_decode.decode_ast_prompting(body)
    return bfcl_decode.decode_ast_fc(extract_tool_calls(body, tools).calls)


def judge_single(
    item: bfcl_data.Item, text: str, mode: CallFormat, tools: list[ToolSchema] | None
) -> Verdict:
    """Score one single-turn reply as BFCL's ``eval_runner`` does for the item's category."""
    helpers = bfcl_data.package_helpers()
    try:
        decoded = decode(text, mode, tools)
    except bfcl_decode.DecodeError as exc:
        decoded, failure = None, str(exc)
    if "relevance" in item.category:
        called = decoded is not None and not helpers.is_empty_output(decoded)
        if "irrelevance" in item.category:
            return Verdict(not called, "" if not called else "irrelevance_error:decoder_success", "", (text,))
        return Verdict(called, "" if called else "relevance_error:decoder_failed", "", (text,))
    if decoded is None:
        return Verdict(False, "ast_decoder:decoder_failed", failure, (text,))
    if not helpers.is_function_calling_format_output(decoded):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", "", (text,), repr(decoded))
    checker = bfcl_data.ast_checker()
    try:
        result = checker(
            item.entry["function"],
            decoded,
            item.ground_truth,
            bfcl_data.python_language(),
            item.category,
            bfcl_data.MODEL_NAMES[mode],
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        # BFCL's checker assumes well-typed answers; a malformed one fails the item instead of the run
        return Verdict(False, "ast_checker:raised", f"{type(exc).__name__}: {exc}", (text,), repr(decoded))
    errors = "; ".join(str(e) for e in result.get("error", []))
    return Verdict(bool(result["valid"]), str(result.get("error_type", "")), errors, (text,), repr(decoded))


def _conversation(item: bfcl_data.Item, mode: CallFormat) -> tuple[list[Message], list[ToolSchema] | None]:
    messages: list[Message] = [dict(m) for m in item.entry["question"][0]]
    if mode == "prompt":
        return bfcl_decode.with_system_prompt(messages, item.entry["function"]), None
    return messages, bfcl_decode.to_tools(item.entry["function"])


async def _single(
    policy: Policy, item: bfcl_data.Item, mode: CallFormat, sampling: SamplingParams
) -> Verdict:
    messages, tools = _conversation(item, mode)
    prompt = policy.template.render(messages, tools, add_generation_prompt=True)
    completion = (await policy.sample([prompt], sampling))[0]
    if completion.finish_reason == "error":
        return Verdict(False, "model_error", completion.error or "the policy returned no reply")
    return judge_single(item, completion.text, mode, tools)


# -- multi turn ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Turns:
    """What a multi-turn episode needs besides the policy."""

    mode: CallFormat
    sampling: SamplingParams
    max_steps: int


def _decode_execute(text: str, mode: CallFormat, tools: list[ToolSchema] | None) -> list[str]:
    decoded = decode(text, mode, tools)
    if mode == "prompt":
        return bfcl_decode.execution_list(decoded)
    return bfcl_decode.convert_to_function_call(decoded)


def _turn_messages(
    item: bfcl_data.Item, turn: int, mode: CallFormat
) -> tuple[list[Message], list[dict[str, Any]]]:
    """The user messages that open ``turn`` and the functions it adds (miss_func's held-out ones)."""
    held_out = item.entry.get("missed_function", {}).get(str(turn))
    if held_out:
        text = bfcl_decode.additional_functions_prompt(held_out)
        return [{"role": "user", "content": text}], list(held_out)
    messages: list[Message] = [dict(m) for m in item.entry["question"][turn]]
    if turn == 0 and mode == "prompt":
        messages = bfcl_decode.with_system_prompt(messages, item.entry["function"])
    return messages, []


async def _multi(policy: Policy, sandbox: Sandbox, item: bfcl_data.Item, how: _Turns) -> Verdict:
    try:
        handle = await sandbox.aopen(host_source(), filename="<bfcl-host>")
    except SandboxError as exc:
        return Verdict(False, f"sandbox:{exc.kind}", exc.message)
    try:
        return await _play_turns(policy, handle, item, how)
    except SandboxError as exc:
        return Verdict(False, f"sandbox:{exc.kind}", exc.message)
    finally:
        await handle.aclose()


async def _play_turns(policy: Policy, handle: EnvHandle, item: bfcl_data.Item, how: _Turns) -> Verdict:
    entry = item.entry
    await handle.areset(options={k: entry.get(k, {}) for k in ("id", "initial_config", "involved_classes")})
    tools = bfcl_decode.to_tools(entry["function"]) if how.mode == "fc" else None
    messages: list[Message] = []
    replies: list[str] = []
    decoded_turns: list[list[list[str]]] = []
    for turn in range(len(entry["question"])):
        opening, added = _turn_messages(item, turn, how.mode)
        if added and tools is not None:
            tools = tools + bfcl_decode.to_tools(added)
        messages.extend(opening)
        steps: list[list[str]] = []
        for _ in range(how.max_steps + 1):
            prompt = policy.template.render(messages, tools, add_generation_prompt=True)
            completion = (await policy.sample([prompt], how.sampling))[0]
            if completion.finish_reason == "error":
                error = completion.error or "the policy returned no reply"
                return Verdict(False, "model_error", error, tuple(replies))
            replies.append(completion.text)
            messages.append({"role": "assistant", "content": completion.text})
            try:
                calls = _decode_execute(completion.text, how.mode, tools)
            except bfcl_decode.DecodeError:
                break  # BFCL: a reply that does not decode ends the turn
            if not calls or calls == [""]:
                break  # ``is_empty_execute_response``
            steps.append(calls)
            observation, *_ = await handle.astep(json.dumps({"op": "execute", "calls": calls}))
            results = _execution_results(observation, len(calls))
            if results is None:
                return Verdict(False, "sandbox:protocol", "the host returned malformed execution results")
            for call, result in zip(calls, results, strict=True):
                messages.append({"role": "tool", "name": call, "content": result})
        else:
            return Verdict(False, "multi_turn:force_terminated", "", tuple(replies), repr(decoded_turns))
        decoded_turns.append(steps)
    check = {"op": "check", "decoded": decoded_turns, "ground_truth": item.ground_truth}
    _, reward, _, _, info = await handle.astep(json.dumps(check))
    error = f"{info.get('error_message', '')} {info.get('details', '')}".strip()
    return Verdict(reward == 1.0, str(info.get("error_type", "")), error, tuple(replies), repr(decoded_turns))


def _execution_results(observation: str, n: int) -> list[str] | None:
    """The host's results of ``n`` calls, or None when the (untrusted) instance answered anything else."""
    try:
        results = json.loads(observation)
    except json.JSONDecodeError:
        return None
    if not isinstance(results, list) or len(results) != n or not all(isinstance(r, str) for r in results):
        return None
    return results


# -- the suite -------------------------------------------------------------------------------------------------


class BFCLSuite:
    """BFCL v4 single-turn AST and multi-turn categories (see module docstring)."""

    name = SUITE

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected entries (``--limit`` caps each category)."""
        params = parse_params(opts.params)
        items = select(opts, params)
        categories = len({i.category for i in items})
        of = f"{categories} categor{'y' if categories == 1 else 'ies'}"
        if opts.limit is not None:
            counted = f"up to --limit {opts.limit} per category × {of}"
        elif not opts.tasks:
            counted = f"up to {params.default_limit} per category (the default of --limit) × {of}"
        else:
            counted = f"all of {of}"
        return Workload.of(len(items), counted, opts)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Score every selected entry ``opts.episodes`` times; failures score 0 and say why in ``detail``."""
        params = parse_params(opts.params)
        if opts.fewshot:
            raise EvalError("bfcl has no few-shot convention: run it with fewshot 0")
        items = select(opts, params)
        mode: CallFormat = (
            params.mode if params.mode != "auto" else ("fc" if renders_tools(policy.template) else "prompt")
        )
        how = _Turns(mode, opts.sampling(), params.max_steps)
        gate = asyncio.Semaphore(max(1, opts.concurrency))
        total, done = len(items) * opts.episodes, 0
        limits = Limits(
            call_timeout_s=30.0,
            load_timeout_s=60.0,
            max_observation_chars=1_000_000,
            max_live_instances=max(1, min(opts.concurrency, 64)),
        )

        async def episode(item: bfcl_data.Item, sandbox: Sandbox) -> Verdict:
            nonlocal done
            async with gate:
                if item.multi_turn:
                    verdict = await _multi(policy, sandbox, item, how)
                else:
                    verdict = await _single(policy, item, mode, how.sampling)
            done += 1
            progress(done, total)
            return verdict

        sandbox = Sandbox(limits)  # its zygote starts with the first multi-turn episode, if any
        try:
            runs = [asyncio.gather(*(episode(i, sandbox) for _ in range(opts.episodes))) for i in items]
            verdicts = await asyncio.gather(*runs)
        finally:
            sandbox.close()
        return [_item_result(i, list(v), mode) for i, v in zip(items, verdicts, strict=True)]


def _item_result(item: bfcl_data.Item, verdicts: list[Verdict], mode: CallFormat) -> ItemResult:
    return ItemResult(
        suite=SUITE,
        item_id=item.id,
        category=item.category,
        scores=tuple(1.0 if v.valid else 0.0 for v in verdicts),
        detail={
            "mode": mode,
            "episodes": [
                {
                    "valid": v.valid,
                    "error_type": v.error_type,
                    "error": v.error[:2000],
                    "replies": list(v.replies),
                    "decoded": v.decoded[:2000],
                }
                for v in verdicts
            ],
        },
    )
