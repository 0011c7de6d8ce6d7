"""Company directory: answer a help-desk question by chaining ticket, employee and department lookups.

Each record points at others by id only (a ticket names its reporter and assignee, an employee names their
department and manager, a department names its head), so the contact detail the user wants sits at the end of
a chain of two to five lookups. Harder levels add longer chains and a name search with namesakes in other
departments. The answer must match the target record, and that record must have been retrieved in this
episode (an answer the agent could not have read is not accepted).
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

_FIRST = (
    "Amara", "Bjorn", "Carmen", "Dev", "Esther", "Farid", "Gianna", "Hiro", "Ines", "Jonas", "Keiko", "Luca",
    "Maya", "Nikolai", "Olu", "Priya", "Quentin", "Rosa", "Samir", "Tamsin", "Umar", "Vera", "Wen", "Yusuf",
)  # fmt: skip
_LAST = (
    "Abara", "Brandt", "Castillo", "Dlamini", "Eriksen", "Fischer", "Gupta", "Horvat", "Ivanova", "Jensen",
    "Kamau", "Laurent", "Mendes", "Nakamura", "Osei", "Petrov", "Quinn", "Rossi", "Silva", "Tran",
)  # fmt: skip
_DEPTS = ("Finance", "Platform Engineering", "Customer Support", "Legal", "Facilities", "Data Science")
_ISSUES = (
    "VPN drops every hour", "Expense report rejected", "Laptop battery swelling", "Badge fails at door 3",
    "Payroll shows wrong tax code", "Dashboard times out", "Need access to the data lake", "Printer jams",
    "Contract template outdated", "Meeting room display dead", "Email quota exceeded", "Invoice stuck",
)  # fmt: skip


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip()


class CompanyDirectoryEnv(ToolEnv):
    """Find a colleague's contact detail or cost centre by chaining ticket, employee and department lookups.

    Level 0 needs two lookups (ticket, then person); level 1 three to four (a manager or the department);
    level 2 four to five (a department head, a skip-level manager, or a namesake to disambiguate).
    """

    skill = "data_retrieval"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 16
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("get_ticket", "Read a help-desk ticket: summary, status, reporter and assignee ids.",
                        ticket_id=("string", "Ticket id, e.g. T-4821")),
        function_schema("get_employee", "Read an employee record: title, department id, manager id and "
                        "contact details.", employee_id=("string", "Employee id, e.g. E1042")),
        function_schema("get_department", "Read a department: name, head's employee id, cost centre, site.",
                        department_id=("string", "Department id, e.g. D-30")),
        function_schema("search_employees", "Find employees whose name contains the text (ids, titles, "
                        "departments; no contact details).", query=("string", "Full or partial name")),
        function_schema("list_department", "List the members of a department (ids, names and titles).",
                        department_id=("string", "Department id")),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self._build_org()
        self.viewed: set[str] = set()
        templates = (
            (self._q_assignee_contact, self._q_reporter_contact),
            (self._q_assignee_manager, self._q_reporter_cost_centre),
            (self._q_assignee_dept_head, self._q_skip_level, self._q_namesake_manager),
        )[self.difficulty]
        question = self.rng.choice(templates)()
        return self._intro(question), {"difficulty": self.difficulty}

    def _build_org(self) -> None:
        rng = self.rng
        ids = [f"E{n}" for n in rng.sample(range(1000, 9999), 40)]
        exts = rng.sample(range(2000, 8999), 40)
        self.emps: dict[str, dict[str, Any]] = {}
        self.depts: dict[str, dict[str, Any]] = {}
        names = [(f, la) for f in _FIRST for la in _LAST]
        rng.shuffle(names)
        ceo = self._add(ids.pop(), names.pop(), "Chief Executive Officer", ("D-00", None), exts.pop())
        self.depts["D-00"] = {"name": "Executive Office", "head": ceo, "cc": "CC-1000", "site": "HQ floor 9"}
        for i, dname in enumerate(_DEPTS):
            did = f"D-{(i + 1) * 10}"
            head = self._add(ids.pop(), names.pop(), f"Head of {dname}", (did, ceo), exts.pop())
            self.depts[did] = {
                "name": dname,
                "head": head,
                "cc": f"CC-{rng.randrange(1100, 9999)}",
                "site": f"{rng.choice(('HQ', 'Annex', 'Dock'))} floor {rng.randint(1, 8)}",
            }
            for _ in range(rng.randint(1, 2)):
                lead = self._add(ids.pop(), names.pop(), f"{dname} Team Lead", (did, head), exts.pop())
                for _ in range(rng.randint(1, 2)):
                    self._add(ids.pop(), names.pop(), f"{dname} Specialist", (did, lead), exts.pop())
        staff = list(self.emps)
        self.tickets: dict[str, dict[str, Any]] = {}
        for _ in range(14):
            reporter, assignee = rng.sample(staff[1:], 2)
            self.tickets[f"T-{rng.randrange(1000, 9999)}"] = {
                "summary": rng.choice(_ISSUES),
                "status": rng.choice(("open", "in progress", "waiting")),
                "reporter": reporter,
                "assignee": assignee,
            }

    def _add(
        self, eid: str, name: tuple[str, str], title: str, where: tuple[str, str | None], ext: int
    ) -> str:
        first, last = name
        dept, manager = where
        email = f"{first}.{last}@northwind.example".lower()
        self.emps[eid] = {
            "name": f"{first} {last}",
            "title": title,
            "dept": dept,
            "manager": manager,
            "ext": f"x{ext}",
            "email": email,
        }
        return eid

    def _ticket_with(self, role: str, depth: int) -> tuple[str, str]:
        """A ticket whose ``role`` person sits at least ``depth`` levels below the CEO."""
        for tid, t in self.tickets.items():
            if self._depth(t[role]) >= depth:
                return tid, t[role]
        tid = next(iter(self.tickets))
        person = next(e for e in self.emps if self._depth(e) >= depth)
        self.tickets[tid][role] = person
        return tid, person

    def _depth(self, eid: str) -> int:
        manager = self.emps[eid]["manager"]
        return 0 if manager is None else 1 + self._depth(manager)

    def _set_target(self, record: str, field: str, chain: list[tuple[str, str, str]]) -> None:
        self.target, self.field, self.chain = record, field, chain
        table = self.depts if field == "cc" else self.emps
        self.expected: str = table[record][field]

    # -- questions: each sets the target record, field and the lookup chain that reaches it -------------
    def _q_assignee_contact(self) -> str:
        tid = self.rng.choice(list(self.tickets))
        who = self.tickets[tid]["assignee"]
        self._set_target(who, "ext", [("get_ticket", "ticket_id", tid), ("get_employee", "employee_id", who)])
        return f"I need to phone whoever is handling ticket {tid}. What is their phone extension?"

    def _q_reporter_contact(self) -> str:
        tid = self.rng.choice(list(self.tickets))
        who = self.tickets[tid]["reporter"]
        self._set_target(
            who, "email", [("get_ticket", "ticket_id", tid), ("get_employee", "employee_id", who)]
        )
        return f"Ticket {tid} is resolved; I want to email the person who reported it. What is their email?"

    def _q_assignee_manager(self) -> str:
        tid, who = self._ticket_with("assignee", 2)
        boss = self.emps[who]["manager"]
        chain = [
            ("get_ticket", "ticket_id", tid),
            ("get_employee", "employee_id", who),
            ("get_employee", "employee_id", boss),
        ]
        self._set_target(boss, "email", chain)
        return f"The assignee of ticket {tid} is on leave. Escalate to their manager: what is their email?"

    def _q_reporter_cost_centre(self) -> str:
        tid = self.rng.choice(list(self.tickets))
        who = self.tickets[tid]["reporter"]
        dept = self.emps[who]["dept"]
        chain = [
            ("get_ticket", "ticket_id", tid),
            ("get_employee", "employee_id", who),
            ("get_department", "department_id", dept),
        ]
        self._set_target(dept, "cc", chain)
        return (
            f"Ticket {tid} needs a replacement part, billed to the reporter's department. Which cost centre?"
        )

    def _q_assignee_dept_head(self) -> str:
        tid, who = self._ticket_with("assignee", 2)
        dept = self.emps[who]["dept"]
        head = self.depts[dept]["head"]
        chain = [
            ("get_ticket", "ticket_id", tid),
            ("get_employee", "employee_id", who),
            ("get_department", "department_id", dept),
            ("get_employee", "employee_id", head),
        ]
        self._set_target(head, "ext", chain)
        return (
            f"Ticket {tid} has breached its deadline: call the head of the department of the person it is "
            "assigned to. What is that head's phone extension?"
        )

    def _q_skip_level(self) -> str:
        tid, who = self._ticket_with("reporter", 3)
        boss = self.emps[who]["manager"]
        skip = self.emps[boss]["manager"]
        chain = [
            ("get_ticket", "ticket_id", tid),
            ("get_employee", "employee_id", who),
            ("get_employee", "employee_id", boss),
            ("get_employee", "employee_id", skip),
        ]
        self._set_target(skip, "ext", chain)
        return (
            f"The request in ticket {tid} needs sign-off from the reporter's manager's manager. "
            "What is that person's phone extension?"
        )

    def _q_namesake_manager(self) -> str:
        staff = [e for e in self.emps if self._depth(e) >= 2]
        who, twin = self.rng.sample(staff, 2)
        while self.emps[twin]["dept"] == self.emps[who]["dept"]:
            twin = self.rng.choice(staff)
        name = self.emps[who]["name"]
        self.emps[twin]["name"] = name  # a namesake in another department
        self.emps[twin]["email"] = self.emps[who]["email"].replace("@", "2@")
        boss = self.emps[who]["manager"]
        dept_name = self.depts[self.emps[who]["dept"]]["name"]
        chain = [
            ("search_employees", "query", name),
            ("get_employee", "employee_id", who),
            ("get_employee", "employee_id", boss),
        ]
        self._set_target(boss, "email", chain)
        return (
            f"{name} from {dept_name} asked for a budget exception, which their manager must approve. "
            "What is the manager's email address?"
        )

    def _intro(self, question: str) -> str:
        lines = [f"Help-desk request: {question}", "", "Tools:"]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn).",
            "Finish with <answer>VALUE</answer> (just the extension, email or cost centre); your first "
            "answer ends the episode.",
        ]
        return "\n".join(lines)

    # -- tools ------------------------------------------------------------------------------------------
    def tool_get_ticket(self, ticket_id: object) -> str:
        tid = _text(ticket_id, "ticket_id").upper()
        if tid not in self.tickets:
            return f"Error: no ticket {tid}."
        t = self.tickets[tid]
        return f"{tid} [{t['status']}] {t['summary']}; reporter {t['reporter']}, assignee {t['assignee']}"

    def tool_get_employee(self, employee_id: object) -> str:
        eid = _text(employee_id, "employee_id").upper()
        if eid not in self.emps:
            return f"Error: no employee {eid}."
        self.viewed.add(eid)
        e = self.emps[eid]
        manager = e["manager"] or "none"
        return (
            f"{eid}: {e['name']}, {e['title']}, department {e['dept']}, manager {manager}, "
            f"extension {e['ext']}, email {e['email']}"
        )

    def tool_get_department(self, department_id: object) -> str:
        did = _text(department_id, "department_id").upper()
        if did not in self.depts:
            return f"Error: no department {did}. Known: {', '.join(self.depts)}."
        self.viewed.add(did)
        d = self.depts[did]
        return f"{did}: {d['name']}, head {d['head']}, cost centre {d['cc']}, site {d['site']}"

    def tool_search_employees(self, query: object) -> str:
        needle = _text(query, "query").lower()
        hits = [(eid, e) for eid, e in self.emps.items() if needle in e["name"].lower()]
        if not hits:
            return f"No employee matches {needle!r}."
        rows = [f"{eid}: {e['name']}, {e['title']} ({self.depts[e['dept']]['name']})" for eid, e in hits[:8]]
        more = f"\n... {len(hits) - 8} more, refine the search" if len(hits) > 8 else ""
        return "\n".join(rows) + more

    def tool_list_department(self, department_id: object) -> str:
        did = _text(department_id, "department_id").upper()
        if did not in self.depts:
            return f"Error: no department {did}. Known: {', '.join(self.depts)}."
        rows = [f"{eid}: {e['name']}, {e['title']}" for eid, e in self.emps.items() if e["dept"] == did]
        return f"{self.depts[did]['name']} ({did}):\n" + "\n".join(rows)

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        given, expected = answer.strip().lower(), self.expected.lower()
        if self.field == "ext":
            given, expected = given.lstrip("x"), expected.lstrip("x")
        return self.target in self.viewed and given == expected

    def solution(self) -> list[str]:
        calls = [tool_call_action(tool, **{arg: value}) for tool, arg, value in self.chain]
        return [*calls, answer_action(self.expected)]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: a lookup of a random record, or a guess drawn from the directory."""
        if rng.random() < 0.15:
            e = self.emps[rng.choice(list(self.emps))]
            return answer_action(rng.choice((e["ext"], e["email"], self.depts[e["dept"]]["cc"])))
        tool, arg, pool = rng.choice(
            (
                ("get_ticket", "ticket_id", list(self.tickets)),
                ("get_employee", "employee_id", list(self.emps)),
                ("get_department", "department_id", list(self.depts)),
                ("list_department", "department_id", list(self.depts)),
                (
                    "search_employees",
                    "query",
                    [e["name"].split()[rng.randint(0, 1)] for e in self.emps.values()],
                ),
            )
        )
        return tool_call_action(tool, **{arg: rng.choice(pool)})


ENV = CompanyDirectoryEnv
