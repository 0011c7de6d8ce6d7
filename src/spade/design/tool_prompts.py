"""The multi-turn tool-use designer contract (``designer.tool_contract='multi_turn'``, the authors' recipe).

The authors' tool-use runs ask the designer for environments in which a simulated user gives 3-5 atomic
instructions one at a time, each checked by one criterion on the state, and the episode is won by answering
``done`` once all are complete. Each request fixes one of ten realistic domains (drawn per slot) and one
task type from a weighted rotation (execute x3, read-then-write x2, missing parameter x1, irrelevant tools
x1); the grounding document only adds optional flavour. The native form uses the protocol built into
:class:`spade.env.ToolEnv` (``instructions`` / ``criteria`` / ``instructions_done``). Unlike the authors'
texts, these never name evaluation benchmarks.
"""

from __future__ import annotations

import random
from typing import Literal

TaskType = Literal["execute", "read_then_write", "miss_param", "irrelevant"]
"""What the instructions of one multi-turn tool environment exercise (see :data:`TASK_TYPES`)."""

DOMAINS: dict[str, str] = {
    "retail": "a retail store: products, stock levels, orders, returns and refunds",
    "travel": "flight and hotel bookings: itineraries, seats, rooms, changes and cancellations",
    "telecom": "a telecom provider: customer lines, plans, data add-ons, bills and service tickets",
    "banking": "a bank: accounts, balances, transfers, cards and payees",
    "calendar": "a team calendar: events, attendees, rooms and reschedules",
    "file_system": "a file system: folders, files, moves, renames and permissions",
    "e_commerce": "an online marketplace: carts, listings, sellers, shipping and coupons",
    "crm": "a sales CRM: contacts, companies, deals, stages and follow-up notes",
    "smart_home": "a smart home: rooms, devices, thermostats, scenes and schedules",
    "project_tracker": "a project tracker: projects, tasks, assignees, statuses and comments",
}
"""The ten realistic domains of the authors' tool-use generator (one is fixed per design request)."""

TASK_TYPES: dict[str, str] = {
    "execute": (
        "EXECUTE: every instruction asks for a concrete change that the right tool call with the right "
        "arguments carries out; the arguments are stated in the instruction or earlier tool outputs."
    ),
    "read_then_write": (
        "READ THEN WRITE: at least one instruction can only be carried out with a value the agent must first "
        "read with another tool (an id, a current amount, a name), so the output of one call feeds the next."
    ),
    "miss_param": (
        "MISSING PARAMETER: one instruction leaves out a value a tool needs; the value is never guessable "
        "but can be looked up with another tool (the instruction says where it comes from, not what it is)."
    ),
    "irrelevant": (
        "IRRELEVANT TOOLS: the tool set holds plausible tools that serve none of the instructions; calling "
        "one of them changes nothing that helps, and calling a destructive one can break a later criterion."
    ),
}

TASK_ROTATION: tuple[TaskType, ...] = (
    "execute", "read_then_write", "execute", "miss_param", "read_then_write", "execute", "irrelevant",
)  # fmt: skip
"""The weighted task-type rotation (execute x3, read_then_write x2, miss_param x1, irrelevant x1)."""


def task_type_for(index: int) -> TaskType:
    """The task type of the ``index``-th multi-turn design of a run (cycling through the rotation)."""
    return TASK_ROTATION[index % len(TASK_ROTATION)]


def draw_domain(rng: random.Random) -> str:
    """One domain key of :data:`DOMAINS`, drawn with ``rng``."""
    return rng.choice(sorted(DOMAINS))


CONTRACT_TOOLS_MULTI_TURN = """INTERFACE (follow exactly):
- Write one Python module. Import only the standard library plus
  `from spade.env import ToolEnv, answer_action, function_schema, tool_call_action`.
- Define exactly one environment class that subclasses ToolEnv, and end the module with `ENV = ClassName`.
- Class attributes: `max_turns = N` (about three turns per instruction), `skill = "{skill}"` and
  `tools = [function_schema("name", "what it does", param=("string", "meaning")), ...]`: 4-7 tools, one
  or two of them distractors that serve no instruction. State allowed values of a parameter in its
  description (e.g. "one of: todo, doing, done"). Do not define __init__ and do not override step or
  call_tool.
- One method `tool_<name>(self, ...)` per tool, parameters named exactly as in its schema, returning text.
  Raise ValueError or KeyError for bad arguments (the agent sees the message as the tool result).
- `_reset(self, options)`: build a simulated in-memory system (10-50 realistic records) from `self.rng` only
  (never the global `random`, time or hash()). Then set
  `self.instructions = [...]`: 3-5 ATOMIC user instructions in natural language, each asking for one thing,
  written as a user would (what to achieve, not which tool to call); and
  `self.criteria = [...]`: one zero-argument function per instruction (a lambda or bound method) that is
  True once the state satisfies that instruction. Return `(self.instructions[0], {{}})`.
- The base class does the rest: after every tool call it checks the current criterion and, when it holds,
  appends the next instruction to the tool's output; after the last one it asks for <answer>done</answer>.
- `check_answer(self, answer)`: `return answer.strip().lower() == "done" and self.instructions_done`.
- `solution(self)`: the winning actions for this instance, computed from the state (never hard-coded):
  `tool_call_action(name, **args)` for each needed call, in order, then `answer_action("done")`.
SOLVABILITY AND CRITERION CORRECTNESS (check each before writing):
- Every criterion is False right after `_reset` and becomes True through tool calls the agent can make.
- Each criterion tests exactly what its instruction asks, with the types the tools store (an int stays
  an int), and every value it needs can be derived from the instruction and the tool outputs.
- Trace `solution()` from `_reset`: each call succeeds and makes the current criterion true."""

MULTI_TURN_EXAMPLE = '''"""Project tracker: a user asks for a few changes to one task, one instruction at a time."""

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

TITLES = (
    "fix login bug", "write release notes", "update logo", "migrate database", "add dark mode",
    "clean up tests", "translate docs", "review budget", "plan offsite", "rotate api keys",
)
PEOPLE = ("ana", "bo", "chidi", "dev", "eun", "farah")
STATUSES = ("todo", "doing", "review", "done")


def _text(value, name):
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip()


class TaskTrackerEnv(ToolEnv):
    """Reassign, advance and comment on a task in a project tracker, as the user asks step by step."""

    skill = "state_modification"
    max_turns = 12
    tools = [
        function_schema("list_tasks", "List a project's tasks: id, title, assignee, status.",
                        project=("string", "Project name")),
        function_schema("assign_task", "Give a task to a team member.",
                        task_id=("string", "Task id, e.g. T-41"), person=("string", "Team member")),
        function_schema("set_status", "Change a task's status.", task_id=("string", "Task id"),
                        status=("string", "One of: todo, doing, review, done")),
        function_schema("add_comment", "Add a comment to a task.", task_id=("string", "Task id"),
                        text=("string", "Comment text")),
        function_schema("archive_project", "Archive a whole project.", project=("string", "Project name")),
    ]

    def _reset(self, options):
        projects = self.rng.sample(["apollo", "birch", "comet", "delta"], 3)
        ids = self.rng.sample(range(10, 100), 9)
        titles = self.rng.sample(TITLES, 9)
        self.tasks = {}
        for i, (tid, title) in enumerate(zip(ids, titles)):
            self.tasks[f"T-{tid}"] = {"project": projects[i // 3], "title": title, "comments": [],
                                      "assignee": self.rng.choice(PEOPLE), "status": self.rng.choice(STATUSES[:2])}
        self.archived = set()
        self.listed = set()
        self.task_id = self.rng.choice(sorted(self.tasks))
        task = self.tasks[self.task_id]
        self.owner = self.rng.choice([p for p in PEOPLE if p != task["assignee"]])
        self.instructions = [
            f"What is on the {task['project']} board right now?",
            f"Please hand '{task['title']}' over to {self.owner.title()}.",
            "It is ready to be checked: move it to review.",
            "Finally, leave a comment on it saying: ready for review.",
        ]
        self.criteria = [
            lambda: task["project"] in self.listed,
            lambda: task["assignee"] == self.owner,
            lambda: task["status"] == "review",
            lambda: "ready for review" in [c.lower().strip(" .") for c in task["comments"]],
        ]
        return self.instructions[0], {}

    def _task(self, task_id):
        task_id = _text(task_id, "task_id")
        if task_id not in self.tasks or self.tasks[task_id]["project"] in self.archived:
            raise KeyError(f"no open task {task_id!r}")
        return self.tasks[task_id]

    def tool_list_tasks(self, project):
        project = _text(project, "project")
        rows = [f"{tid}: {t['title']} ({t['assignee']}, {t['status']})" for tid, t in sorted(self.tasks.items())
                if t["project"] == project and project not in self.archived]
        if not rows:
            raise KeyError(f"no project {project!r}")
        self.listed.add(project)
        return "\\n".join(rows)

    def tool_assign_task(self, task_id, person):
        person = _text(person, "person").lower()
        if person not in PEOPLE:
            raise ValueError(f"unknown team member {person!r}")
        self._task(task_id)["assignee"] = person
        return f"{task_id} assigned to {person}"

    def tool_set_status(self, task_id, status):
        if _text(status, "status") not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}")
        self._task(task_id)["status"] = status
        return f"{task_id} is now {status}"

    def tool_add_comment(self, task_id, text):
        self._task(task_id)["comments"].append(_text(text, "text"))
        return f"comment added to {task_id}"

    def tool_archive_project(self, project):
        self.archived.add(_text(project, "project"))
        return f"project {project} archived"

    def check_answer(self, answer):
        return answer.strip().lower() == "done" and self.instructions_done

    def solution(self):
        return [
            tool_call_action("list_tasks", project=self.tasks[self.task_id]["project"]),
            tool_call_action("assign_task", task_id=self.task_id, person=self.owner),
            tool_call_action("set_status", task_id=self.task_id, status="review"),
            tool_call_action("add_comment", task_id=self.task_id, text="ready for review"),
            answer_action("done"),
        ]


ENV = TaskTrackerEnv
'''
"""The complete worked example shown with :data:`CONTRACT_TOOLS_MULTI_TURN` (it passes the checker)."""


def task_block(domain: str, task_type: str) -> str:
    """The fixed domain and task type of one multi-turn design request."""
    if domain not in DOMAINS or task_type not in TASK_TYPES:
        raise ValueError(
            f"unknown domain {domain!r} or task type {task_type!r}; domains: {', '.join(DOMAINS)}; "
            f"task types: {', '.join(TASK_TYPES)}"
        )
    return f"DOMAIN (fixed for this environment): {DOMAINS[domain]}.\nTASK TYPE: {TASK_TYPES[task_type]}"


def flavour_block(document_block: str) -> str:
    """A grounding document demoted to optional flavour (the domain above stays fixed)."""
    if not document_block:
        return ""
    inner = document_block.replace("<REFERENCE_DOCUMENT>", "").replace("</REFERENCE_DOCUMENT>", "").strip()
    return (
        "OPTIONAL FLAVOR: you may borrow names, terms or details from this snippet, but the DOMAIN above is "
        "fixed: do NOT make the task about this snippet.\n"
        f"<REFERENCE_SNIPPET>\n{inner}\n</REFERENCE_SNIPPET>"
    )


MULTI_TURN_INSTRUCTION = """Create a NEW environment for the target skill in the domain and task type above,
different from every example. Before writing, trace solution() from reset: every criterion starts False and
becomes True after its calls, and answering done early does not win.
Output the complete module in a single ```python block."""
