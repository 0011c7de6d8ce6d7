"""Designer prompts: the texts, the data a prompt is built from, and its assembly into chat messages.

A designer prompt is a system role, then one user message with the grounding document (truncated to a token
budget), the target skill and difficulty, the native interface contract of SPEC §3 (subclass ``TextEnv`` /
``ToolEnv``, ``ENV = ClassName``, ``_reset`` drawing only from ``self.rng``, ``step`` returning through
``self.end_turn``, ``solution()``, ``max_turns``, standard library only) with one complete worked example (a
seed environment), up to k memory examples with their win rate and regret, negative examples with the reason
they failed, and the instruction to create a different environment. ``edit`` mode shows a parent
environment's full code instead of the examples and asks for the complete modified file (ACCEL-style: a rule,
a constant, the win condition or the observation). The texts never name evaluation benchmarks: tool-use
environments are grounded in the document's own domain, not in a benchmark's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from spade import tool_prompts
from spade.config.types import Difficulty
from spade.skills import setting_of, skills_for
from spade.types import CorpusDoc, Message

EditFormat = Literal["file", "patch", "lines"]
"""``file``: the edit is the complete modified module; ``patch``: SEARCH/REPLACE blocks applied to the parent;
``lines``: numbered lines of the parent rewritten as ``N: text`` (see ``spade.design.edits``)."""
Mode = Literal["generate", "edit"]
"""``generate``: write an environment from scratch; ``edit``: mutate a parent environment from memory."""
ToolContract = Literal["single", "multi_turn"]
"""Tool-use environments: one task checked by the answer, or the authors' multi-turn instruction contract."""


Truncate = Callable[[str, int], str]
"""``truncate(text, n_tokens)``: the longest prefix of ``text`` within ``n_tokens`` tokens."""


@dataclass(frozen=True, slots=True)
class Exemplar:
    """An environment from memory shown to the designer (a positive example or an edit parent)."""

    env_id: str
    code: str
    skill: str
    win_rate: float | None
    """Latest agent win rate; None when it was never played (e.g. a seed environment)."""
    regret: float | None


@dataclass(frozen=True, slots=True)
class Negative:
    """An environment to avoid, with why: checker findings (``"code: message"``) or a calibration verdict."""

    env_id: str
    skill: str
    reasons: tuple[str, ...]
    code: str = ""
    """Optional code, shown as a short excerpt."""


@dataclass(frozen=True, slots=True)
class DesignRequest:
    """Everything one designer prompt is built from."""

    skill: str
    mode: Mode
    worked_example: str
    """Complete source of a seed environment of the same setting (ignored in ``edit`` mode)."""
    document: CorpusDoc | None = None
    difficulty: Difficulty = "medium"
    examples: tuple[Exemplar, ...] = ()
    negatives: tuple[Negative, ...] = ()
    parent: Exemplar | None = None
    """The environment to mutate; required in ``edit`` mode."""
    edit_format: EditFormat = "file"
    """``edit`` mode: ask for the complete modified file or for SEARCH/REPLACE blocks."""
    tool_contract: ToolContract = "single"
    """Tool-use skills: the contract asked for (``multi_turn`` needs ``domain`` and ``task_type``)."""
    domain: str = ""
    """``multi_turn``: the realistic domain (a key of ``spade.tool_prompts.DOMAINS``)."""
    task_type: str = ""
    """``multi_turn``: the task type (a key of ``spade.tool_prompts.TASK_TYPES``)."""

    def __post_init__(self) -> None:
        setting_of(self.skill)  # raises ValueError naming the known skills
        if self.mode == "edit" and self.parent is None:
            raise ValueError("edit mode needs a parent environment; pass parent= or use mode='generate'")
        if self.tool_contract == "multi_turn":
            if setting_of(self.skill) != "tool_use":
                raise ValueError("tool_contract='multi_turn' needs a tool-use skill")
            tool_prompts.task_block(self.domain, self.task_type)  # raises ValueError naming the known ones


SYSTEM_GAMES = (
    "You are an expert designer of interactive, multi-turn text environments for training reasoning agents. "
    "Each environment is a small Python program with a Gym-style reset()/step(action) interface: the agent "
    "acts, the state changes, and the observation shows what happened. You write complete, correct, "
    "self-contained code that follows the given interface exactly."
)

SYSTEM_TOOLS = (
    "You are an expert designer of multi-turn tool-use environments for training agents. Each environment "
    "is a small Python program that simulates a realistic system with a few tools (functions the agent can "
    "call) over an in-memory state, gives the agent a task that needs several dependent tool calls, and "
    "verifies the result. You write complete, correct, self-contained code that follows the given "
    "interface exactly."
)

SKILL_DESCRIPTIONS: dict[str, str] = {
    "mathematical_reasoning": (
        "The agent must compute with quantities it discovers while playing: set up and carry out arithmetic, "
        "algebra, number theory or combinatorics across several turns, using each result to choose the next "
        "action, rather than recalling a single fact."
    ),
    "logical_deduction": (
        "The agent must infer hidden facts from clues and feedback: combine constraints, eliminate "
        "possibilities and keep its conclusions consistent as new evidence arrives each turn, until only one "
        "answer remains."
    ),
    "spatial_reasoning": (
        "The agent must track positions, directions, shapes or layouts that change as it acts: move through "
        "or rearrange a grid, board or map, and plan paths or placements from a mental picture of the space."
    ),
    "pattern_recognition": (
        "The agent must discover a hidden rule, sequence or transformation from examples and feedback, test "
        "hypotheses with its actions, and apply the rule it found to new cases."
    ),
    "optimization": (
        "The agent must reach a goal at the best cost under constraints: allocate limited resources, choose "
        "orders or routes, and trade off competing objectives, where greedy or random play does worse."
    ),
    "causal_inference": (
        "The agent must find out what causes what by intervening: change one factor at a time, observe the "
        "effects, separate causes from correlations and confounders, and use the causal model it built to "
        "reach a goal."
    ),
    "api_orchestration": (
        "The agent must combine several tools into one plan: call them in the right order and feed the "
        "output of one call (an id, a value, a status) into the arguments of the next."
    ),
    "data_retrieval": (
        "The agent must find specific information in a simulated system: search, filter and look up "
        "records with the right tools and arguments, narrowing down step by step, and report exactly what "
        "was asked."
    ),
    "state_modification": (
        "The agent must change the state of a simulated system correctly: create, update, move or delete "
        "records so that the final state meets every requirement of the task, without unwanted side effects."
    ),
    "error_recovery": (
        "The agent must notice and recover from failures: tool calls that return errors, missing or invalid "
        "data, or preconditions that are not met yet, and adapt its plan (fix arguments, satisfy the "
        "precondition, choose another route) instead of giving up or repeating the same call."
    ),
    "tool_selection": (
        "The agent must choose the right tool among several similar or irrelevant ones, read tool "
        "descriptions and parameter schemas carefully, and not call tools that do not serve the task."
    ),
    "multi_step_workflows": (
        "The agent must carry out a long task made of dependent steps (gather information, decide, act, "
        "verify), keeping track of what is done and what remains across many turns."
    ),
}

DIFFICULTY_RULES: dict[str, str] = {
    "easy": "easy: a careful agent wins in about 3 turns; the state is small and the rules are simple.",
    "medium": (
        "medium: winning needs about 4-8 turns of genuine reasoning; some information is hidden and is "
        "revealed only by acting; random or repeated actions lose."
    ),
    "hard": (
        "hard: winning needs a plan over 8 or more turns with several interacting rules or hidden "
        "quantities; a greedy or careless strategy usually fails."
    ),
}

CONTRACT_GAMES = """INTERFACE (follow exactly):
- Write one Python module. Import only the standard library plus `from spade.env import TextEnv`.
- Define exactly one environment class that subclasses TextEnv, and end the module with `ENV = ClassName`.
- Class attributes: `max_turns = N` (the turn budget) and `skill = "{skill}"`. Do not define __init__.
- `_reset(self, options)`: build a fresh instance and return `(first_observation, {{}})`. Draw every random
  choice from `self.rng` (a seeded random.Random): never call the global `random` functions, time or hash(),
  so the same seed always gives the same instance. Keep all state on `self`.
- `step(self, action)`: `action` is the agent's move as plain text (already taken out of \\boxed{{}}). Update
  the state and return `self.end_turn(observation, reward, terminated)`; it counts the turn and ends the
  episode when `max_turns` runs out. Never raise: answer an invalid or garbled action with an explanation.
- Reward: 1.0 with terminated=True when the goal is reached; 0.0 with terminated=True on a loss; 0.0 (or a
  small partial-progress value in [0, 1)) on every other turn.
- `solution(self)`: return the list of actions that wins the current instance, computed from the state
  made by `_reset` (never hard-coded). It is used to check that the environment can be won.
- Every observation says what happened, what the valid actions are and how many turns are left
  (`self.turns_left`), and never reveals the hidden answer. The agent answers with \\boxed{{action}}.
- The goal needs several turns of reasoning where each action changes the state; a random, empty or
  repeated action must not win."""

CONTRACT_TOOLS = """INTERFACE (follow exactly):
- Write one Python module. Import only the standard library plus
  `from spade.env import ToolEnv, answer_action, function_schema, tool_call_action`.
- Define exactly one environment class that subclasses ToolEnv, and end the module with `ENV = ClassName`.
- Class attributes: `max_turns = N`, `skill = "{skill}"` and
  `tools = [function_schema("name", "what it does", param=("string", "meaning")), ...]`: 3-6 tools, at
  least one of them not needed for the task. Do not define __init__ and do not override step.
- One method `tool_<name>(self, ...)` per tool, with parameters named exactly as in its schema, returning
  text. Raise ValueError or KeyError for bad arguments (the agent sees the message as the tool result).
- `_reset(self, options)`: build a simulated in-memory system (records, accounts, files, ...) from
  `self.rng` only (never the global `random`, time or hash()), pick a task, and return
  `(task_instruction, {{}})`. The instruction says what to achieve, not which tools to call.
- `check_answer(self, answer)`: return True when the final answer (given as <answer>...</answer>) and the
  final state complete the task.
- `solution(self)`: return the winning actions for this instance: `tool_call_action(name, **args)` for
  each call and `answer_action(...)` last, computed from the state (never hard-coded).
- The task needs several dependent tool calls (the output of one is an argument of the next); no single
  call solves it. Tools are deterministic and offline: no network, files or subprocesses."""

GENERATE_INSTRUCTION = """Create a NEW environment for the target skill, different from every example
above. Ground it in a concept, technique or fact from the reference document: the agent should operate or
apply that idea, not answer questions about the text, and the environment must not mention the document.
Before writing, check that solution() wins from reset and that random play does not.
Output the complete module in a single ```python block."""

TOOLS_GENERATE_INSTRUCTION = """Create a NEW environment for the target skill, different from every example
above. Take its domain from the reference document: simulate the kind of system, records and operations
that the document's subject involves, with realistic but invented data. Do not mention the document.
Before writing, check that solution() wins from reset and that a single tool call does not.
Output the complete module in a single ```python block."""

UNGROUNDED_GENERATE_INSTRUCTION = """Create a NEW environment for the target skill, different from every
example above: choose your own setting, rules and goal, so that the agent must apply the skill over several
turns rather than recall a fact.
Before writing, check that solution() wins from reset and that random play does not.
Output the complete module in a single ```python block."""

UNGROUNDED_TOOLS_GENERATE_INSTRUCTION = """Create a NEW environment for the target skill, different from
every example above: choose a realistic domain yourself and simulate the kind of system, records and
operations it involves, with realistic but invented data.
Before writing, check that solution() wins from reset and that a single tool call does not.
Output the complete module in a single ```python block."""


def generate_instruction(tools: bool, grounded: bool) -> str:
    """The closing instruction of a ``generate`` prompt; it cites the document only when one is shown."""
    if grounded:
        return TOOLS_GENERATE_INSTRUCTION if tools else GENERATE_INSTRUCTION
    return UNGROUNDED_TOOLS_GENERATE_INSTRUCTION if tools else UNGROUNDED_GENERATE_INSTRUCTION


EDIT_INSTRUCTION = """Create a NEW environment by editing the parent environment above. Make one meaningful
change: a rule, a constant (sizes, ranges, budgets), the win condition, or what the observation reveals, so
that it becomes a different challenge for the target skill at the target difficulty. {advice}
Keep the interface working and keep solution() correct under the new rules. Rename the class and update its
docstring and observations to match. Output the complete modified module (not a diff) in a single
```python block."""

EDIT_INSTRUCTION_PATCH = """Create a NEW environment by editing the parent environment above. Make one meaningful
change: a rule, a constant (sizes, ranges, budgets), the win condition, or what the observation reveals, so
that it becomes a different challenge for the target skill at the target difficulty. {advice}
Keep solution() correct under the new rules. Write only the change, as one or more blocks of this form,
where SEARCH holds lines copied exactly from the parent and REPLACE holds their new version:
<<<<<<< SEARCH
        self.size = 4
=======
        self.size = 6
>>>>>>> REPLACE"""

REVIEW_SYSTEM = """You review a training environment written as Python code. Accept it only if it is a
coherent multi-turn task for the stated skill, its observations tell the player what to do, it can be won by
reasoning (not luck), and it does not reveal the answer. Think briefly, then end with exactly \\boxed{ACCEPT}
or \\boxed{REJECT}."""

REVIEW_SYSTEM_TOOLS = """You audit a tool-use training environment written as Python code for solvability. Trace
each instruction's criterion to the tool calls that make it true. Reject it only for a fatal defect: a
criterion that needs state no tool can produce, a type mismatch between what a tool stores and what a
criterion tests, a hidden value the agent cannot derive from the instructions and tool outputs, a required
tool that always fails, or most criteria already true at reset. Do not reject for difficulty. Think briefly,
then end with exactly \\boxed{ACCEPT} or \\boxed{REJECT}."""


def review_system(setting: str) -> str:
    """The reviewer's system prompt: the solvability audit for tool use, the coherence review for games."""
    return REVIEW_SYSTEM_TOOLS if setting == "tool_use" else REVIEW_SYSTEM


HINT_SYSTEM_GAMES_CODE = """You read the code of a text environment and write a short hint for a player who
cannot see the code. Each episode is a new random instance of this code, so the hint must hold for every
instance: give the key insight or strategy and the expected action format, in 1-3 sentences and at most
{max_words} words. Never state answers, hidden values or winning moves, and do not mention the code,
variable names or seeds. Reply with the hint only."""

HINT_SYSTEM_TOOLS_CODE = """You read the code of a tool-use environment and write a short hint for an agent who
cannot see the code. Each episode is a new random instance of this code, so the hint must hold for every
instance: give a value-free plan (which kinds of tools to use in which order, what to check before
finishing, and to submit <answer>done</answer> only after all steps when the task comes as several
instructions), with placeholders instead of concrete ids, names or values. At most {max_words} words.
Never state the final answer or the exact calls. Reply with the hint only."""

HINT_SYSTEM_GAMES = """You read the code of a text environment and its first observation, and write a short
hint for a player who cannot see the code. Give the key insight or strategy and the expected action format, in
1-3 sentences and at most {max_words} words. Never state the answer, hidden values or the sequence of winning
moves, and do not mention the code, variable names or seeds. Reply with the hint only."""

HINT_SYSTEM_TOOLS = """You read the code of a tool-use environment and its task, and write a short hint for an
agent who cannot see the code. Give a value-free plan: which kinds of tools to use in which order and what to
check before finishing, using placeholders instead of concrete ids, names or values. At most {max_words}
words. Never state the final answer or the exact calls. Reply with the hint only."""


# -- prompt assembly -----------------------------------------------------------------------------------------


def truncate_words(text: str, n_words: int) -> str:
    """A whitespace-word truncator (the fallback :data:`Truncate` when no tokenizer is at hand)."""
    words = text.split()
    return text if len(words) <= n_words else " ".join(words[:n_words])


def truncate_code(code: str, max_chars: int) -> str:
    """``code`` cut to whole lines within ``max_chars``, preferring a method boundary, with a visible marker.

    The cut never splits a line; it backs off to the last blank line or ``def``/``class`` line when that keeps
    at least half the budget, and ends with a comment saying how many lines were left out.
    """
    if len(code) <= max_chars:
        return code
    lines = code.splitlines()
    kept, size = 0, 0
    while kept < len(lines) and size + len(lines[kept]) + 1 <= max_chars:
        size += len(lines[kept]) + 1
        kept += 1
    boundary = kept  # lines[boundary] is the first line left out; cut just before a blank or def line
    while 0 < boundary < len(lines) and not _is_boundary(lines[boundary]):
        boundary -= 1
    if sum(len(ln) + 1 for ln in lines[:boundary]) >= max_chars // 2:
        kept = boundary
    body = "\n".join(lines[:kept]).rstrip()
    omitted = len(lines) - len(body.splitlines())
    return f"{body}\n# ... [truncated for this prompt: {omitted} more lines not shown; the file is complete]"


def _is_boundary(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(("def ", "class ", "@"))


def _document_block(doc: CorpusDoc | None, truncate: Truncate, doc_tokens: int) -> str:
    if doc is None or not doc.text.strip():
        return ""
    text = truncate(doc.text, doc_tokens)
    if len(text) < len(doc.text.rstrip()):
        text = text.rstrip() + "\n[... document truncated]"
    title = f"Title: {doc.title}\n" if doc.title else ""
    return f"<REFERENCE_DOCUMENT>\n{title}{text}\n</REFERENCE_DOCUMENT>"


def _target_block(skill: str, difficulty: Difficulty) -> str:
    name = skills_for(setting_of(skill))[skill]
    return (
        f"TARGET SKILL: {name} (`{skill}`). {SKILL_DESCRIPTIONS[skill]}\n"
        f"DIFFICULTY: {DIFFICULTY_RULES[difficulty]}"
    )


def _examples_block(examples: Sequence[Exemplar], example_chars: int) -> str:
    if not examples:
        return ""
    parts = [
        "ENVIRONMENTS FROM MEMORY (well calibrated for the current agent; take inspiration, "
        "but create a DIFFERENT environment):"
    ]
    for i, ex in enumerate(examples, 1):
        header = f"### Memory example {i} ({_stats(ex)})"
        parts.append(f"{header}\n```python\n{truncate_code(ex.code, example_chars)}\n```")
    return "\n\n".join(parts)


def _negatives_block(negatives: Sequence[Negative], example_chars: int) -> str:
    if not negatives:
        return ""
    parts = ["AVOID environments like these (they were rejected or badly calibrated):"]
    for neg in negatives:
        reasons = "; ".join(neg.reasons) or "rejected"
        part = f"- {neg.env_id} ({neg.skill}): {reasons}"
        if neg.code:
            part += f"\n```python\n{truncate_code(neg.code, max(200, example_chars // 4))}\n```"
        parts.append(part)
    return "\n".join(parts)


def _stats(ex: Exemplar) -> str:
    if ex.win_rate is None:
        return f"{ex.skill}; not played yet"
    regret = "not measured" if ex.regret is None else f"{ex.regret:.2f}"
    return f"{ex.skill}; agent win rate {ex.win_rate:.2f}; regret {regret}"


def _edit_advice(win_rate: float | None) -> str:
    if win_rate is None:
        return "The parent has not been played yet: keep the difficulty, change the challenge."
    if win_rate > 0.6:
        return f"The agent wins {win_rate:.0%} of the parent's episodes: make the new one harder."
    if win_rate < 0.3:
        return f"The agent wins {win_rate:.0%} of the parent's episodes: make the new one a little easier."
    return (
        f"The agent wins {win_rate:.0%} of the parent's episodes: keep the difficulty, change the challenge."
    )


def build_design_messages(
    req: DesignRequest,
    *,
    truncate: Truncate = truncate_words,
    doc_tokens: int = 1024,
    example_chars: int = 3000,
) -> list[Message]:
    """The chat messages of one designer prompt (see the module docstring for the layout).

    With the multi-turn tool contract the fixed domain and task type come first and the document (if any)
    follows as optional flavour; without a document the closing instruction does not cite one.
    """
    tools = setting_of(req.skill) == "tool_use"
    multi = tools and req.tool_contract == "multi_turn"
    document = _document_block(req.document, truncate, doc_tokens)
    target = _target_block(req.skill, req.difficulty)
    if multi:
        contract = tool_prompts.CONTRACT_TOOLS_MULTI_TURN.format(skill=req.skill)
        head = [target, tool_prompts.task_block(req.domain, req.task_type)]
        flavour = tool_prompts.flavour_block(document)
        closing = tool_prompts.MULTI_TURN_INSTRUCTION
    else:
        contract = (CONTRACT_TOOLS if tools else CONTRACT_GAMES).format(skill=req.skill)
        head, flavour = [document, target], ""
        closing = generate_instruction(tools, grounded=bool(document))
    if req.mode == "edit":
        body = _edit_blocks(req, contract, example_chars)
        closing = (EDIT_INSTRUCTION_PATCH if req.edit_format == "patch" else EDIT_INSTRUCTION).format(
            advice=_edit_advice(req.parent.win_rate if req.parent is not None else None)
        )
    else:
        body = [
            f"{contract}\n\nA COMPLETE WORKED EXAMPLE of this interface:\n"
            f"```python\n{req.worked_example.rstrip()}\n```",
            _examples_block(req.examples, example_chars),
            _negatives_block(req.negatives, example_chars),
        ]
    system = SYSTEM_TOOLS if tools else SYSTEM_GAMES
    user = "\n\n".join(b for b in [*head, *body, flavour, closing] if b)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _edit_blocks(req: DesignRequest, contract: str, example_chars: int) -> list[str]:
    parent = req.parent
    if parent is None:
        raise ValueError("edit mode needs a parent environment; pass parent= or use mode='generate'")
    # A patch only needs the lines it changes, so a long parent is shown cut (at a line boundary).
    patch = req.edit_format == "patch"
    shown = truncate_code(parent.code, example_chars) if patch else parent.code
    return [
        contract,
        f"PARENT ENVIRONMENT `{parent.env_id}` ({_stats(parent)}), "
        + ("code (edit only lines shown here):" if patch and shown != parent.code else "complete code:")
        + f"\n```python\n{shown.rstrip()}\n```",
        _negatives_block(req.negatives, example_chars),
    ]
