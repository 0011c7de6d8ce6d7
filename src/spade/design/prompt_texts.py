"""The texts of the designer's, reviewer's and hinter's prompts (assembled by :mod:`spade.design.prompts`).

The designer's texts state the native interface contract of SPEC §3, the target skills and difficulties, and
the closing instructions; the reviewer's and hinter's are system roles. The texts never name evaluation
benchmarks: tool-use environments are grounded in the document's own domain, not in a benchmark's.
"""

from __future__ import annotations

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

GAMES_SKETCH = '''from spade.env import TextEnv


class GridKeysEnv(TextEnv):
    """One line: what the agent must achieve and how an action reads."""

    max_turns = 12
    skill = "spatial_reasoning"

    def _reset(self, options):
        # build the hidden instance from self.rng only; keep every piece of state on self
        self.target = ...
        self.progress = 0
        return self._observe("Goal: ... Actions: ..."), {}

    def step(self, action):
        # parse the command; answer a garbled one with an explanation, never raise
        ...
        if goal_reached:
            return self.end_turn(self._observe("Solved."), 1.0, True)
        return self.end_turn(self._observe("..."), 0.0, False)

    def solution(self):
        # the winning actions of this instance, computed from the state _reset made
        return [...]

    def _observe(self, text):
        return f"{text}\\nTurns left: {self.turns_left}"


ENV = GridKeysEnv'''
"""The released prompt's kind of interface guide (``designer.example='sketch'``): the class outline with
elided bodies, 12 turns in the example, in this implementation's contract."""
