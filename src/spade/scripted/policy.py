"""A scripted policy and trainer: deterministic test doubles that drive the whole loop without a model.

The scripted policy recognises the three kinds of request the loop makes (design, hint, play) and answers:

* design: a quiz environment (a chain of arithmetic questions, parameters varied per request) for a games
  skill, a stock register in the multi-turn tool contract (3-5 instructions, answer ``done``) for a tool
  skill, or, by its ``behaviour``, broken code (syntax errors, rewards out of range, no termination) or
  hostile code (loops, ``os._exit``, memory bombs, sockets); asked for a ``lines`` edit (cpu-tiny's
  designer), the parent's level table rewritten (:mod:`spade.scripted.lines`);
* hint: a strategy hint;
* review: ACCEPT for quizzes of up to 4 questions (registers of up to 3 instructions), REJECT otherwise;
* play: the right answer to the last question (or the right tool call for the last instruction, then
  ``<answer>done</answer>``) when a hint is in the conversation, otherwise the right one with probability
  ``skill`` (which grows with each ``load_weights``), else a wrong one (for a tool instruction: a wrong
  count or, half the time, a premature ``done``).

Every output is a pure function of the prompt and the policy's skill, so runs are reproducible whatever
the request order. Tokens are UTF-8 bytes under a tiny chat template.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from spade.config.skills import GAME_SKILLS
from spade.design import prompt_texts
from spade.design.edits import LINES_SYSTEM
from spade.envs import rg_tasks
from spade.pyast import parse_expression
from spade.scripted.lines import line_edit_reply
from spade.types import Completion, Message, SamplingParams, ToolSchema

if TYPE_CHECKING:
    from spade.config import ModelConfig

Behaviour = Literal["valid", "broken", "hostile", "mixed"]

_DESIGN_MARKERS = (prompt_texts.SYSTEM_GAMES[:60], prompt_texts.SYSTEM_TOOLS[:60])
_REVIEW_MARKERS = (prompt_texts.REVIEW_SYSTEM[:50], prompt_texts.REVIEW_SYSTEM_TOOLS[:50])
_HINT_MARKERS = tuple(
    t[:40]
    for t in (
        prompt_texts.HINT_SYSTEM_GAMES,
        prompt_texts.HINT_SYSTEM_TOOLS,
        prompt_texts.HINT_SYSTEM_GAMES_CODE,
        prompt_texts.HINT_SYSTEM_TOOLS_CODE,
    )
)
_SKILL = re.compile(r"TARGET SKILL: [^(]*\(`([a-z_]+)`\)")
_QUESTION = re.compile(r"What is (-?\d+) ([+\-*]) (-?\d+)\?")
_EXPRESSION = re.compile(r"-?\d+(?:\s*[-+*]\s*-?\d+)+")
"""An integer chain such as Reasoning-Gym's ``8 - -4 + 3 =`` or ``7 * 6`` (procedural mode's tasks)."""
_INSTRUCTION = re.compile(r"Set the stock of ([a-z]+) to (\d+) units\.")
_ALL_DONE = "[ALL STEPS COMPLETE]"


class ByteTemplate:
    """A chat template over UTF-8 bytes: ``<|role|>content`` then the end-of-turn token (id 256) per message."""

    end_of_turn_id: int | None = 256
    thinking: bool = False
    """``model.thinking`` (set by :func:`spade.backends.make_policy`): turns prompted from a render of the
    conversation and trained one by one; the scripted replies hold no reasoning to leave out."""

    def encode(self, text: str) -> list[int]:
        """Byte token ids of plain text."""
        return list(text.encode())

    def _messages(self, messages: Sequence[Message], tools: Sequence[ToolSchema] | None) -> list[int]:
        ids: list[int] = []
        if tools:
            ids += [*self.encode(f"<|tools|>{json.dumps(list(tools))}"), 256, 10]
        for m in messages:
            ids += [*self.encode(f"<|{m['role']}|>{m.get('content') or ''}"), 256, 10]
        return ids

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """Token ids of a conversation."""
        ids = self._messages(messages, tools)
        return ids + self.encode("<|assistant|>") if add_generation_prompt else ids

    def render_suffix(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """The closing of a sampled reply, then ``messages`` and the generation prompt."""
        return [256, 10, *self.render(messages, None, add_generation_prompt=add_generation_prompt)]

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of byte token ids (special tokens dropped)."""
        return bytes(t for t in token_ids if 0 <= t < 256).decode(errors="replace")


def _unit(text: str) -> float:
    """A deterministic number in [0, 1) from text."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


QUIZ_TEMPLATE = '''"""Arithmetic quiz chain ({n} questions): each right answer reveals the next question."""

from spade.env import TextEnv


class Quiz{tag}Env(TextEnv):
    """Answer {n} arithmetic questions in a row; one wrong answer ends the game."""

    skill = "{skill}"
    max_turns = {turns}

    def _reset(self, options):
        self.questions = [
            (self.rng.randint(1, {hi}), self.rng.choice({ops!r}), self.rng.randint(1, {hi})) for _ in range({n})
        ]
        self.index = 0
        return self._ask("Answer each question with \\\\boxed{{number}}."), {{}}

    def _ask(self, prefix):
        a, op, b = self.questions[self.index]
        return f"{{prefix}} Question {{self.index + 1}}/{n}: What is {{a}} {{op}} {{b}}?"

    def _value(self, a, op, b):
        return a + b if op == "+" else a - b if op == "-" else a * b

    def step(self, action):
        text = action.strip().removeprefix("\\\\boxed{{").removesuffix("}}").strip()
        if not text.lstrip("-").isdigit():
            return self.end_turn("Please answer with a whole number.")
        if int(text) != self._value(*self.questions[self.index]):
            return self.end_turn("Wrong answer. Game over.", 0.0, terminated=True)
        self.index += 1
        if self.index == len(self.questions):
            return self.end_turn("All correct. You win!", 1.0, terminated=True)
        return self.end_turn(self._ask("Correct."))

    def solution(self):
        return [str(self._value(*q)) for q in self.questions]


ENV = Quiz{tag}Env
'''

TOOL_TEMPLATE = '''"""Stock register ({n} instructions): the user asks for stock corrections one at a time."""

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

ITEMS = ("bolts", "nuts", "gears", "springs", "valves", "pipes", "rivets")


def _item(value):
    if not isinstance(value, str) or value not in ITEMS:
        raise KeyError(f"unknown item {{value!r}}; items: {{', '.join(ITEMS)}}")
    return value


class Register{tag}Env(ToolEnv):
    """Correct the stock register as the user asks, one instruction at a time."""

    skill = "{skill}"
    max_turns = {turns}
    tools = [
        function_schema("get_count", "Show the units in stock of an item.", item=("string", "Item name")),
        function_schema("set_count", "Set the units in stock of an item.", item=("string", "Item name"),
                        count=("integer", "New number of units")),
        function_schema("delete_item", "Remove an item from the register.", item=("string", "Item name")),
    ]

    def _reset(self, options):
        self.stock = {{item: self.rng.randint(1, {hi}) for item in ITEMS}}
        picks = self.rng.sample(ITEMS, {n})
        self.targets = [(item, self.stock[item] + self.rng.randint(1, 9)) for item in picks]
        self.instructions = [f"Set the stock of {{item}} to {{count}} units." for item, count in self.targets]
        self.criteria = [(lambda item=item, count=count: self.stock.get(item) == count) for item, count in self.targets]
        return self.instructions[0], {{}}

    def tool_get_count(self, item):
        return f"{{item}}: {{self.stock[_item(item)]}} units"

    def tool_set_count(self, item, count):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("count must be a non-negative integer")
        self.stock[_item(item)] = count
        return f"{{item}} set to {{count}} units"

    def tool_delete_item(self, item):
        del self.stock[_item(item)]
        return f"{{item}} deleted"

    def check_answer(self, answer):
        return answer.strip().lower() == "done" and self.instructions_done

    def solution(self):
        calls = [tool_call_action("set_count", item=item, count=count) for item, count in self.targets]
        return [*calls, answer_action("done")]


ENV = Register{tag}Env
'''

BROKEN = {
    "syntax": "class Broken(TextEnv)\n    pass\n",
    "no_termination": QUIZ_TEMPLATE.replace("return self.end_turn(\"Wrong answer. Game over.\", 0.0, terminated=True)",
                                            "return (\"Wrong, try again.\", 0.0, False, False, {{}})")
                                   .replace("return self.end_turn(\"Please answer with a whole number.\")",
                                            "return (\"Please answer with a whole number.\", 0.0, False, False, {{}})"),
    "reward_range": QUIZ_TEMPLATE.replace("\"All correct. You win!\", 1.0", "\"All correct. You win!\", 7.5"),
    "no_env": "from spade.env import TextEnv\n\nclass Helper:\n    pass\n",
}  # fmt: skip
_STEP = "    def step(self, action):\n"
_RESET_END = "        self.index = 0\n"
HOSTILE = {
    "socket_at_import": "import socket\nsocket.create_connection(('127.0.0.1', 9))\n",
    "loop_at_import": QUIZ_TEMPLATE + "\nwhile True:\n    pass\n",
    "loop_in_step": QUIZ_TEMPLATE.replace(_STEP, _STEP + "        while True:\n            pass\n"),
    "memory_bomb_in_reset": QUIZ_TEMPLATE.replace(
        _RESET_END, _RESET_END + "        self.blocks = [bytearray(1 << 28) for _ in range(64)]\n"
    ),
    "exit_in_reset": QUIZ_TEMPLATE.replace(_RESET_END, _RESET_END + "        raise SystemExit(3)\n"),
}


def _kind(prompt: str, behaviour: Behaviour) -> str:
    """What a design answers: ``behaviour``, or for ``mixed`` valid, broken or hostile by the prompt."""
    if behaviour != "mixed":
        return behaviour
    u = _unit("design" + prompt)
    return "valid" if u < 0.6 else "broken" if u < 0.8 else "hostile"


def design_reply(prompt: str, behaviour: Behaviour) -> str:
    """The scripted designer's reply to a design prompt."""
    u = _unit("design" + prompt)
    skill = _SKILL.search(prompt)
    fill = {
        "n": 3 + int(u * 3),
        "tag": f"{int(u * 1e6):06d}",
        "skill": skill.group(1) if skill else "mathematical_reasoning",
        "turns": 8,
        "hi": 5 + int(u * 40),
        "ops": ["+", "-", "*"][: 1 + int(u * 7) % 3],
    }
    kind = _kind(prompt, behaviour)
    if kind == "broken":
        source = list(BROKEN.values())[int(u * 1e6) % len(BROKEN)]
    elif kind == "hostile":
        source = list(HOSTILE.values())[int(u * 1e6) % len(HOSTILE)]
    elif fill["skill"] in GAME_SKILLS:
        source = QUIZ_TEMPLATE
    else:
        source = TOOL_TEMPLATE
    code = source.format(**fill) if "{" in source else source
    return f"Here is the environment.\n\n```python\n{code}```\n"


def play_reply(prompt: str, skill: float) -> str:
    """The scripted agent's reply: right when hinted or lucky, else off by one."""
    steps = list(_INSTRUCTION.finditer(prompt))
    if steps:
        return _tool_reply(prompt, steps[-1], skill)
    questions = _QUESTION.findall(prompt)
    if not questions and rg_tasks.ASK in prompt:
        return _expression_reply(prompt, skill)
    if not questions:
        return "I am not sure. \\boxed{0}"
    a, op, b = questions[-1]
    x, y = int(a), int(b)
    value = x + y if op == "+" else x - y if op == "-" else x * y
    right = "HINT:" in prompt or _unit("play" + prompt) < skill
    return f"Let me compute {a} {op} {b}. \\boxed{{{value if right else value + 1}}}"


def _expression_reply(prompt: str, skill: float) -> str:
    """The value of the last integer chain in the prompt (with probability ``skill``; else off by one)."""
    chains = _EXPRESSION.findall(prompt)
    if not chains:
        return "I am not sure. \\boxed{0}"
    try:
        value = _evaluate(parse_expression(chains[-1]))
    except SyntaxError:  # e.g. a leading zero
        value = 0
    right = "HINT:" in prompt or _unit("play" + prompt) < skill
    return f"Let me compute {chains[-1]}. \\boxed{{{value if right else value + 1}}}"


def _evaluate(node: ast.expr) -> int:
    """An integer chain of +, - and * (with Python's precedence); anything else is 0."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp):
        a, b = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
    return 0


def _tool_reply(prompt: str, last: re.Match[str], skill: float) -> str:
    """A tool call for the latest instruction, or ``done`` once every step is complete."""
    if prompt.rfind(_ALL_DONE) > last.end():
        return "All steps are complete. <answer>done</answer>"
    item, count = last.group(1), int(last.group(2))
    right = "HINT:" in prompt or _unit("play" + prompt) < skill
    if (
        not right and _unit("early" + prompt) < 0.5
    ):  # tool calls cost no turn: a loss needs a premature answer
        return "That should be everything. <answer>done</answer>"
    call = {"name": "set_count", "arguments": {"item": item, "count": count if right else count + 1}}
    return f"<tool_call>{json.dumps(call)}</tool_call>"


class ScriptedPolicy:
    """A deterministic Policy for tests and harness benchmarks (no model)."""

    def __init__(self, behaviour: Behaviour = "mixed", skill: float = 0.5) -> None:
        self.template = ByteTemplate()
        self.behaviour = behaviour
        self.base_skill = skill
        self.skill = skill
        self.requests = 0
        self.policy_version = 0
        """Weight loads applied (stamped on every completion)."""

    @classmethod
    def from_config(cls, cfg: ModelConfig, *, seed: int = 0) -> ScriptedPolicy:
        """A policy with ``cfg.scripted``'s behaviour (deterministic: ``seed`` is unused)."""
        del seed
        return cls(behaviour=cfg.scripted.behaviour)

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One scripted completion per prompt (text bytes, logprob -1 per token)."""
        return [self._complete(self.template.decode(p), params) for p in prompts]

    def _complete(self, prompt: str, params: SamplingParams) -> Completion:
        self.requests += 1
        if any(
            m in prompt for m in _REVIEW_MARKERS
        ):  # accepts short quizzes only, so reviews both accept and reject
            longest = any(f"({n})" in prompt for n in ("5 questions", "4 instructions", "5 instructions"))
            text = "\\boxed{REJECT}" if longest else "Coherent and winnable. \\boxed{ACCEPT}"
        elif LINES_SYSTEM[:50] in prompt:
            text = line_edit_reply(prompt, _kind(prompt, self.behaviour), _unit("lines" + prompt))
        elif any(m in prompt for m in _DESIGN_MARKERS):
            text = design_reply(prompt, self.behaviour)
        elif any(m in prompt for m in _HINT_MARKERS):
            text = "Work each question out exactly before answering; one mistake ends the game."
        else:
            text = play_reply(prompt, self.skill)
        ids = [*text.encode(), 256]
        finish: Literal["stop", "length"] = "stop"
        if len(ids) > params.max_tokens:
            ids, finish = ids[: params.max_tokens], "length"
        return Completion(
            text=self.template.decode(ids),
            token_ids_T=tuple(ids),
            logprobs_T=tuple(-1.0 for _ in ids),
            finish_reason=finish,
            prompt_tokens=len(prompt.encode()),
            policy_version=self.policy_version,
        )

    def load_weights(self, path: Path) -> None:
        """Read the skill written by :class:`ScriptedTrainer`."""
        state = json.loads((path / "scripted_policy.json").read_text())
        self.skill = float(state["skill"])
        self.policy_version += 1
