"""Designer: prompt assembly, skill rotation, slot planning, code extraction, an end-to-end design call."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spade import replies
from spade.config.skills import GAME_SKILLS, TOOL_SKILLS
from spade.design import designer, prompt_texts, prompts, tool_prompts
from spade.design import request as planner
from spade.design.designer import Design, apply_patch, patched_code
from spade.design.prompts import DesignRequest, Exemplar, Negative, build_design_messages
from spade.envs.loader import load_env_factory
from spade.replies import Extraction, patch_blocks
from spade.types import Completion, CorpusDoc, Message, Policy, SamplingParams

WORKED = '''"""A worked example."""

from spade.env import TextEnv


class GuessEnv(TextEnv):
    """Guess a number."""

    skill = "logical_deduction"
    max_turns = 6

    def _reset(self, options):
        self.secret = self.rng.randint(1, 20)
        return "Guess 1-20.", {}

    def step(self, action):
        return self.end_turn("higher", 0.0)

    def solution(self):
        return [str(self.secret)]


ENV = GuessEnv
'''

BENCHMARK_NAMES = (
    "bfcl", "tau2", "tau-bench", "τ", "acebench", "mcp-mark", "mcpmark", "gsm8k", "aime", "math-500", "gpqa",
    "livecodebench", "humaneval", "mmlu", "bbh", "big-bench", "swe-bench", "webshop", "alfworld", "appworld",
)  # fmt: skip


def long_code(n_methods: int = 40) -> str:
    """A syntactically valid class with many short methods (so truncation has method boundaries)."""
    methods = "\n".join(
        f"    def m{i}(self):\n        x = {i}\n        return x * 2\n" for i in range(n_methods)
    )
    return f"class Big:\n    '''Doc.'''\n\n{methods}\nENV = Big\n"


def doc(words: int = 50) -> CorpusDoc:
    return CorpusDoc("doc-7", "Photosynthesis", " ".join(f"w{i}" for i in range(words)))


def request(skill: str = "logical_deduction", **kw: Any) -> DesignRequest:
    base: dict[str, Any] = {"skill": skill, "mode": "generate", "worked_example": WORKED, "document": doc()}
    base.update(kw)
    return DesignRequest(**base)


def user_text(messages: list[Message]) -> str:
    assert [m["role"] for m in messages] == ["system", "user"]
    return str(messages[1]["content"])


# -- prompt contents -----------------------------------------------------------------------------------------


def test_generate_prompt_has_every_part() -> None:
    examples = (Exemplar("env-a", "class A:\n    pass\nENV = A\n", "logical_deduction", 0.45, 0.31),)
    negatives = (
        Negative(
            "env-b", "logical_deduction", ("determinism: reset(seed=3) gave two different observations",)
        ),
    )
    text = user_text(build_design_messages(request(examples=examples, negatives=negatives)))
    assert "<REFERENCE_DOCUMENT>" in text
    assert "Photosynthesis" in text
    assert "w49" in text
    assert "Logical Deduction" in text
    assert prompt_texts.SKILL_DESCRIPTIONS["logical_deduction"] in text
    assert prompt_texts.DIFFICULTY_RULES["medium"] in text
    contract = (
        "subclasses TextEnv", "ENV = ClassName", "_reset(self, options)", "self.rng", "self.end_turn",
        "solution(self)", "max_turns", "Import only the standard library", 'skill = "logical_deduction"',
    )  # fmt: skip
    for part in contract:
        assert part in text, part
    assert WORKED.rstrip() in text, "the worked example must be complete"
    assert "win rate 0.45" in text
    assert "regret 0.31" in text
    assert "class A:" in text
    assert "determinism: reset(seed=3) gave two different observations" in text
    assert "env-b" in text
    assert "DIFFERENT" in text
    assert "```python block" in text
    # order: document, skill, contract + example, memory, negatives, instruction
    marks = [
        "<REFERENCE_DOCUMENT>",
        "TARGET SKILL",
        "INTERFACE",
        "WORKED EXAMPLE",
        "FROM MEMORY",
        "AVOID",
        "NEW",
    ]
    positions = [text.index(m) for m in marks]
    assert positions == sorted(positions)


def test_document_is_truncated_with_the_passed_truncator_and_marked() -> None:
    calls: list[tuple[int, int]] = []

    def truncate(text: str, n: int) -> str:
        calls.append((len(text), n))
        return prompts.truncate_words(text, n)

    msgs = build_design_messages(request(document=doc(500)), truncate=truncate, doc_tokens=20)
    text = user_text(msgs)
    assert calls == [(len(doc(500).text), 20)]
    assert "w19" in text
    assert "w20" not in text
    assert "[... document truncated]" in text
    short = user_text(build_design_messages(request(document=doc(10)), doc_tokens=20))
    assert "w9" in short
    assert "document truncated" not in short


def test_no_document_gives_no_document_block() -> None:
    text = user_text(build_design_messages(request(document=None)))
    assert "REFERENCE_DOCUMENT" not in text
    assert "TARGET SKILL" in text


def test_memory_code_is_cut_at_a_line_boundary_and_says_so() -> None:
    code = long_code()
    ex = Exemplar("env-big", code, "logical_deduction", 0.5, 0.2)
    text = user_text(build_design_messages(request(examples=(ex,)), example_chars=600))
    shown = text.split("### Memory example 1")[1].split("```python\n")[1].split("\n```")[0]
    assert "truncated for this prompt" in shown
    assert len(shown) < 800
    original = set(code.splitlines())
    assert all(line in original for line in shown.splitlines()[:-1]), "a line was cut mid-way"


def test_truncate_code_prefers_method_boundaries_and_counts_omitted_lines() -> None:
    code = long_code()
    assert prompts.truncate_code(code, len(code)) == code
    cut = prompts.truncate_code(code, 500)
    body, marker = cut.rsplit("\n", 1)
    kept = body.splitlines()
    assert kept == code.splitlines()[: len(kept)]
    assert kept[-1].strip().startswith("return"), "cut should land at the end of a method"
    omitted = int(re.search(r"(\d+) more lines", marker).group(1))  # type: ignore[union-attr]
    assert len(kept) + omitted >= len(code.rstrip().splitlines())
    assert len(cut) <= 500 + len(marker) + 1


def test_negative_examples_show_findings_and_an_optional_excerpt() -> None:
    neg = Negative(
        "env-n", "optimization", ("exploit: the empty action wins 8/8 episodes", "too easy"), long_code()
    )
    text = user_text(build_design_messages(request("optimization", negatives=(neg,)), example_chars=800))
    assert "exploit: the empty action wins 8/8 episodes; too easy" in text
    assert "class Big:" in text
    assert "truncated for this prompt" in text


@pytest.mark.parametrize("skill", [*GAME_SKILLS, *TOOL_SKILLS])
@pytest.mark.parametrize("mode", ["generate", "edit"])
def test_prompts_never_name_benchmarks(skill: str, mode: str) -> None:
    parent = Exemplar("p", WORKED, skill, 0.5, 0.1)
    msgs = build_design_messages(request(skill, mode=mode, parent=parent))
    text = " ".join(str(m["content"]) for m in msgs).lower()
    for name in BENCHMARK_NAMES:
        assert not re.search(rf"(?<![a-z0-9]){re.escape(name)}(?![a-z0-9])", text), name


def test_tool_use_prompt_states_the_tool_contract() -> None:
    msgs = build_design_messages(request("data_retrieval"))
    assert msgs[0]["content"] == prompt_texts.SYSTEM_TOOLS
    text = user_text(msgs)
    for part in ("subclasses ToolEnv", "function_schema", "tool_<name>", "check_answer", "tool_call_action",
                 "answer_action", "domain from the reference document", "Data Retrieval"):  # fmt: skip
        assert part in text, part
    assert "subclasses TextEnv" not in text


def test_every_skill_has_a_description() -> None:
    assert set(prompt_texts.SKILL_DESCRIPTIONS) == set(GAME_SKILLS) | set(TOOL_SKILLS)


def test_edit_prompt_shows_the_full_parent_and_asks_for_the_whole_file() -> None:
    parent = Exemplar("env-parent", long_code(), "spatial_reasoning", 0.8, 0.05)
    req = request("spatial_reasoning", mode="edit", parent=parent)
    text = user_text(build_design_messages(req, example_chars=300))
    assert parent.code.rstrip() in text, "the parent must be shown in full, never truncated"
    assert "env-parent" in text
    assert "win rate 0.80" in text
    assert "complete modified module (not a diff)" in text
    assert "make the new one harder" in text
    assert "GuessEnv" not in text, "the worked example is replaced by the parent in edit mode"
    easy = Exemplar("env-parent", WORKED, "spatial_reasoning", 0.1, 0.0)
    hard_text = user_text(build_design_messages(request("spatial_reasoning", mode="edit", parent=easy)))
    assert "a little easier" in hard_text


def test_request_validation() -> None:
    with pytest.raises(ValueError, match="edit mode needs a parent"):
        request(mode="edit")
    with pytest.raises(ValueError, match="unknown skill"):
        request("juggling")


# -- rotation and slots --------------------------------------------------------------------------------------


def test_active_skills_windows_rotate_round_robin() -> None:
    skills = list(GAME_SKILLS)
    assert planner.active_skills(skills, 3, 0) == skills[:3]
    assert planner.active_skills(skills, 3, 1) == skills[3:]
    assert planner.active_skills(skills, 3, 2) == skills[:3]
    assert planner.active_skills(skills, 4, 1) == [skills[4], skills[5], skills[0], skills[1]]
    assert planner.active_skills(skills, 6, 5) == skills
    assert planner.active_skills(skills[:2], 3, 7) == skills[:2]
    counts = dict.fromkeys(skills, 0)
    for epoch in range(12):  # lcm(6, 4) / 4 * 4: every skill equally often
        for s in planner.active_skills(skills, 4, epoch):
            counts[s] += 1
    assert len(set(counts.values())) == 1
    with pytest.raises(ValueError, match="no skills"):
        planner.active_skills([], 3, 0)
    with pytest.raises(ValueError, match="per_regen"):
        planner.active_skills(skills, 0, 0)


def test_plan_slots_assigns_skills_round_robin_and_modes_by_seeded_rng() -> None:
    skills = list(GAME_SKILLS)
    plan = planner.plan_slots(skills, 3, 1, 7, edit_fraction=0.5, rng=random.Random(3))
    assert [s.index for s in plan] == list(range(7))
    assert [s.skill for s in plan] == [skills[3 + i % 3] for i in range(7)]
    again = planner.plan_slots(skills, 3, 1, 7, edit_fraction=0.5, rng=random.Random(3))
    assert plan == again
    assert {
        s.mode for s in planner.plan_slots(skills, 3, 0, 20, edit_fraction=0.0, rng=random.Random(0))
    } == {"generate"}
    assert {
        s.mode for s in planner.plan_slots(skills, 3, 0, 20, edit_fraction=1.0, rng=random.Random(0))
    } == {"edit"}
    many = planner.plan_slots(skills, 3, 0, 2000, edit_fraction=0.75, rng=random.Random(1))
    assert 0.7 < sum(s.mode == "edit" for s in many) / 2000 < 0.8


def test_choose_example_prefers_skill_then_budget() -> None:
    cands = [("a", "optimization", 500), ("b", "logical_deduction", 9000), ("c", "logical_deduction", 20_000)]
    rng = random.Random(0)
    assert planner.choose_example(cands, "logical_deduction", rng, 12_000) == "b"
    assert planner.choose_example(cands, "logical_deduction", rng, 1_000) == "b", "shortest when none fits"
    assert planner.choose_example(cands, "causal_inference", rng, 1_000) == "a", "other skills of the setting"
    with pytest.raises(LookupError, match="seed environment"):
        planner.choose_example([], "optimization", rng, 1_000)


@pytest.mark.parametrize(
    ("setting", "skill"), [("games", "mathematical_reasoning"), ("tool_use", "data_retrieval")]
)
def test_pick_worked_example_reads_a_seed_environment(setting: Any, skill: str) -> None:
    source = planner.pick_worked_example(setting, skill, random.Random(0))
    assert "ENV =" in source
    assert ("ToolEnv" in source) == (setting == "tool_use")


# -- extraction ----------------------------------------------------------------------------------------------

GOOD = "from spade.env import TextEnv\n\n\nclass A(TextEnv):\n    pass\n\n\nENV = A\n"


@pytest.mark.parametrize(
    ("text", "finish", "status", "contains"),
    [
        (f"Here:\n```python\n{GOOD}```\nDone.", "stop", "ok", "class A"),
        (
            f"<think>draft:\n```python\nclass Draft: pass\n```\n</think>\n```python\n{GOOD}```",
            "stop",
            "ok",
            "class A",
        ),
        (f"```python\nclass First: pass\n```\nbetter:\n```python\n{GOOD}```", "stop", "ok", "class A"),
        ("I cannot write code for that.", "stop", "no_code", None),
        ("<think>let me think about the design of a", "length", "truncated", None),
        (f"```python\n{GOOD[:40]}", "length", "truncated", None),
        (f"```python\n{GOOD}```\nNow let me explain each part of the", "length", "ok", "class A"),
        (f"```python\n{GOOD[:-8]}", "length", "truncated", None),
        (f"```python\n{GOOD}", "stop", "ok", "class A"),
        (f"{GOOD[:-8]}", "length", "truncated", None),
        ("```python\ndef broken(:\n    pass\n```", "stop", "ok", "def broken"),
    ],
    ids=[
        "plain",
        "fence-in-reasoning",
        "last-fence",
        "no-code",
        "cut-in-reasoning",
        "cut-in-code",
        "cut-after-code",
        "cut-at-a-line-that-parses",
        "unclosed-fence-but-stopped",
        "unfenced-cut",
        "syntax-error-left-to-checker",
    ],
)
def test_extract_design_code(text: str, finish: Any, status: str, contains: str | None) -> None:
    found = replies.extract_design_code(text, finish)
    assert found.status == status, found
    if contains is None:
        assert found.code is None
        assert found.detail
    else:
        assert found.code is not None
        assert contains in found.code
        assert "Draft" not in found.code
        assert "First" not in found.code


def test_extract_model_error() -> None:
    found = replies.extract_design_code("", "error", "connection refused")
    assert (found.code, found.status, found.detail) == (None, "model_error", "connection refused")


# -- end to end with a fake policy ---------------------------------------------------------------------------


class FakeTemplate:
    """Renders a conversation to one token per message (its length mod 1000) plus a generation marker."""

    def render(
        self, messages: Sequence[Message], tools: Any = None, *, add_generation_prompt: bool = True
    ) -> list[int]:
        return [len(str(m["content"])) % 1000 for m in messages] + ([7] if add_generation_prompt else [])

    def decode(self, token_ids: Sequence[int]) -> str:
        return " ".join(map(str, token_ids))


class FakePolicy:
    """Returns canned completions in order; records the prompts it saw."""

    def __init__(self, completions: list[Completion]) -> None:
        self.template = FakeTemplate()
        self.completions = completions
        self.prompts: list[list[int]] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        self.prompts += [list(p) for p in prompts]
        out, self.completions = self.completions[: len(prompts)], self.completions[len(prompts) :]
        return out

    def load_weights(self, path: Path) -> None:
        raise NotImplementedError


def completion(text: str, n: int = 3, finish: Any = "stop", logprobs: bool = True) -> Completion:
    ids = tuple(range(100, 100 + n))
    return Completion(text, ids, tuple(-0.5 for _ in ids) if logprobs else (), finish)


def test_design_end_to_end_with_a_fake_policy() -> None:
    parent = Exemplar("env-p", WORKED, "logical_deduction", 0.5, 0.2)
    reqs = [request(), request(mode="edit", parent=parent), request(document=None), request()]
    policy = FakePolicy(
        [
            completion(f"<think>plan</think>\n```python\n{GOOD}```", n=4),
            completion(f"```python\n{GOOD[:40]}", n=5, finish="length"),
            completion("sorry", n=2, logprobs=False),
            Completion("", (), (), "error", error="server down"),
        ]
    )
    assert isinstance(policy, Policy)
    designs = asyncio.run(designer.design(policy, reqs, SamplingParams(max_tokens=64)))
    assert [d.status for d in designs] == ["ok", "truncated", "no_code", "model_error"]
    first: Design = designs[0]
    assert first.code is not None
    assert "class A" in first.code
    assert first.doc_id == "doc-7"
    assert designs[2].doc_id is None
    assert first.parent_id is None
    assert designs[1].parent_id == "env-p"
    assert designs[1].mode == "edit"
    assert first.messages[1]["content"] == user_text(build_design_messages(reqs[0]))
    n_prompt = len(policy.prompts[0])
    assert first.tokens_T == (*policy.prompts[0], 100, 101, 102, 103)
    assert first.mask_T == (0,) * n_prompt + (1,) * 4
    assert first.sample_logprobs_T == (0.0,) * n_prompt + (-0.5,) * 4
    sample = first.train_sample(advantage=0.7, staleness=2)
    assert (sample.role, sample.advantage, sample.staleness, sample.tokens_T) == (
        "designer",
        0.7,
        2,
        first.tokens_T,
    )
    assert designs[1].trainable, "a truncated design is still a (penalised) training sample"
    assert not designs[2].trainable
    assert designs[2].sample_logprobs_T == ()
    assert not designs[3].trainable
    assert designs[3].detail == "server down"
    with pytest.raises(ValueError, match="no completion tokens"):
        designs[3].train_sample(1.0)
    metrics = designer.design_metrics(designs)
    assert metrics["designer/ok_rate"] == 0.25
    assert metrics["designer/edit_share"] == 0.25
    assert metrics["designer/completion_tokens_mean"] == (4 + 5 + 2 + 0) / 4


def test_design_rejects_a_policy_that_drops_completions() -> None:
    policy = FakePolicy([completion("x")])
    with pytest.raises(RuntimeError, match="1 completions for 2 prompts"):
        asyncio.run(designer.design(policy, [request(), request()], SamplingParams()))
    assert asyncio.run(designer.design(FakePolicy([]), [], SamplingParams())) == []
    assert designer.design_metrics([]) == {}


# -- memory records and the contract -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    env_id: str
    code: str
    skill: str
    win_rate: float | None
    regret: float | None


@dataclass(frozen=True, slots=True)
class NegativeItem:
    record: Record
    reasons: tuple[str, ...]


def test_memory_records_convert_and_unplayed_ones_say_so() -> None:
    played = planner.exemplar(Record("e1", WORKED, "logical_deduction", 0.4, None))
    seed = planner.exemplar(Record("seed-1", WORKED, "logical_deduction", None, None))
    text = user_text(build_design_messages(request(examples=(played, seed))))
    assert "agent win rate 0.40; regret not measured" in text
    assert "(logical_deduction; not played yet)" in text
    edit = user_text(build_design_messages(request(mode="edit", parent=seed)))
    assert "has not been played yet" in edit
    item = NegativeItem(Record("bad", WORKED, "logical_deduction", None, None), ("syntax: line 3: invalid",))
    assert planner.negative(item) == Negative(
        "bad", "logical_deduction", ("syntax: line 3: invalid",), WORKED
    )
    assert planner.negative(item, with_code=False).code == ""


CONTRACT_LITERAL = '''
from spade.env import TextEnv


class PathEnv(TextEnv):
    """Walk right to the exit."""

    max_turns = 5
    skill = "spatial_reasoning"

    def _reset(self, options):
        self.pos, self.goal = 0, self.rng.randint(2, 3)
        return f"At 0; the exit is at {self.goal}. Actions: right, left. Turns left: {self.turns_left}", {}

    def step(self, action):
        self.pos += 1 if action.strip() == "right" else -1
        if self.pos == self.goal:
            return self.end_turn("You reached the exit.", 1.0, terminated=True)
        return self.end_turn(f"You are at {self.pos}. Turns left: {self.turns_left}")

    def solution(self):
        return ["right"] * self.goal


ENV = PathEnv
'''


def test_an_environment_written_to_the_contract_loads_and_wins() -> None:
    """The contract's instructions (no __init__, class max_turns, end_turn) agree with the base class."""
    env = load_env_factory(CONTRACT_LITERAL)()
    obs, _ = env.reset(seed=1)
    assert "exit" in obs
    steps = [env.step(a) for a in env.solution()]
    assert steps[-1][1:3] == (1.0, True)
    env.reset(seed=1)
    last = [env.step("left") for _ in range(5)][-1]
    assert last[3] is True, "max_turns from the class attribute ends the episode"


# -- edits as SEARCH/REPLACE patches -------------------------------------------------------------------------

PARENT = "class A:\n    size = 4\n    turns = 8\n\n    def step(self):\n        return self.size\n"


def test_patch_replaces_exactly_one_occurrence() -> None:
    reply = (
        "<think>bigger</think>Sure.\n<<<<<<< SEARCH\n    size = 4\n=======\n    size = 6\n>>>>>>> REPLACE\n"
    )
    code, why = apply_patch(PARENT, patch_blocks(reply))
    assert why == ""
    assert code is not None
    assert "size = 6" in code
    assert "size = 4" not in code
    assert "turns = 8" in code


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("no blocks here", "no SEARCH/REPLACE block"),
        ("<<<<<<< SEARCH\n    size = 5\n=======\n    size = 6\n>>>>>>> REPLACE", "not found"),
        ("<<<<<<< SEARCH\n    size = 4\n=======\n    size = 4\n>>>>>>> REPLACE", "changes nothing"),
        ("<<<<<<< SEARCH\n=======\n    x = 1\n>>>>>>> REPLACE", "not found"),
    ],
)
def test_bad_patches_say_why(reply: str, why: str) -> None:
    code, reason = apply_patch(PARENT, patch_blocks(reply))
    assert code is None
    assert why in reason


def test_ambiguous_search_is_refused() -> None:
    code, reason = apply_patch(
        "x = 1\nx = 1\n", patch_blocks("<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE")
    )
    assert code is None
    assert "found 2 times" in reason


def test_patch_edit_falls_back_to_a_complete_module() -> None:
    found = Extraction("class B: pass\n", "ok")
    assert patched_code(PARENT, patch_blocks("```python\nclass B: pass\n```"), found) is found
    failed = patched_code(PARENT, patch_blocks("nothing"), Extraction(None, "no_code", "no block"))
    assert (failed.code, failed.status) == (None, "no_code")
    same = "<<<<<<< SEARCH\n    size = 4\n=======\n    size = 4\n>>>>>>> REPLACE"
    unchanged = patched_code(PARENT, patch_blocks(same), Extraction(None, "no_code", "no block"))
    assert (unchanged.code, unchanged.status) == (None, "unchanged")


def test_patch_format_prompt_asks_for_blocks_and_shows_the_parent() -> None:
    parent = Exemplar("p", PARENT, "logical_deduction", 0.5, 0.1)
    req = DesignRequest("logical_deduction", "edit", "", parent=parent, edit_format="patch")
    user = build_design_messages(req)[1]["content"]
    assert "<<<<<<< SEARCH" in user
    assert "size = 4" in user
    assert "not a diff" not in user


# -- no corpus, multi-turn tool contract ---------------------------------------------------------------------


@pytest.mark.parametrize("skill", ["logical_deduction", "api_orchestration"])
def test_without_a_document_the_prompt_never_cites_one(skill: str) -> None:
    grounded = user_text(build_design_messages(request(skill)))
    assert "reference document" in grounded
    bare = user_text(build_design_messages(request(skill, document=None)))
    assert "document" not in bare.lower()
    assert "REFERENCE" not in bare
    assert "Create a NEW environment" in bare


def multi_turn_request(**kw: Any) -> DesignRequest:
    base: dict[str, Any] = {
        "skill": "state_modification",
        "worked_example": tool_prompts.MULTI_TURN_EXAMPLE,
        "tool_contract": "multi_turn",
        "domain": "banking",
        "task_type": "miss_param",
    }
    return request(**{**base, **kw})


def test_multi_turn_tool_prompt_follows_the_authors_contract() -> None:
    text = user_text(build_design_messages(multi_turn_request()))
    flat = " ".join(text.split())
    assert "3-5 ATOMIC user instructions" in flat
    assert "self.criteria" in text
    assert 'answer_action("done")' in text
    assert "False right after `_reset`" in flat
    assert tool_prompts.DOMAINS["banking"] in text
    assert tool_prompts.TASK_TYPES["miss_param"] in text
    assert "class TaskTrackerEnv(ToolEnv)" in text  # the multi-turn worked example
    # the document is demoted to optional flavour after the fixed domain
    assert "<REFERENCE_DOCUMENT>" not in text
    assert "<REFERENCE_SNIPPET>" in text
    assert "do NOT make the task about this snippet" in text
    assert text.index("DOMAIN (fixed") < text.index("OPTIONAL FLAVOR")
    assert "w49" in text
    bare = user_text(build_design_messages(multi_turn_request(document=None)))
    assert "SNIPPET" not in bare
    assert not any(name in text.lower() for name in BENCHMARK_NAMES)


def test_multi_turn_requests_are_validated() -> None:
    with pytest.raises(ValueError, match="tool-use skill"):
        multi_turn_request(skill="logical_deduction")
    with pytest.raises(ValueError, match="domains: retail"):
        multi_turn_request(domain="casino")
    with pytest.raises(ValueError, match="task types: execute"):
        multi_turn_request(task_type="chat")


def test_task_type_rotation_has_the_authors_weights() -> None:
    week = [tool_prompts.task_type_for(i) for i in range(7)]
    assert {t: week.count(t) for t in tool_prompts.TASK_TYPES} == {
        "execute": 3,
        "read_then_write": 2,
        "miss_param": 1,
        "irrelevant": 1,
    }
    assert [tool_prompts.task_type_for(i + 7) for i in range(7)] == week
    assert len(tool_prompts.DOMAINS) == 10
    rng = random.Random(3)
    assert {tool_prompts.draw_domain(rng) for _ in range(200)} == set(tool_prompts.DOMAINS)


def _play_actions(env: Any, actions: Sequence[str]) -> list[tuple[str, float, bool]]:
    out = []
    for action in actions:
        obs, reward, terminated, _, _ = env.step(action)
        out.append((obs, reward, terminated))
    return out


def test_multi_turn_worked_example_reveals_one_instruction_at_a_time() -> None:
    env = load_env_factory(tool_prompts.MULTI_TURN_EXAMPLE)()
    obs, _ = env.reset(seed=11)
    assert obs == env.instructions[0]
    assert not any(c() for c in env.criteria)  # every criterion is false at reset
    solution = env.solution()
    steps = _play_actions(env, solution[:2])
    assert env.instructions[1] in steps[0][0]  # revealed by the first call, not before
    assert env.instructions[2] in steps[1][0]
    assert env.instructions[3] not in steps[1][0]
    early = load_env_factory(tool_prompts.MULTI_TURN_EXAMPLE)()
    early.reset(seed=11)
    assert _play_actions(early, ["<answer>done</answer>"]) == [("Incorrect.", 0.0, True)]
    final = _play_actions(env, solution[2:])
    assert "[ALL STEPS COMPLETE]" in final[-2][0]
    assert final[-1][1:] == (1.0, True)


@pytest.mark.parametrize("source", ["example", "scripted"])
def test_multi_turn_tool_environments_pass_the_checker(source: str) -> None:
    from spade.checker import check_env  # noqa: PLC0415
    from spade.replies import extract_code  # noqa: PLC0415
    from spade.sandbox.inprocess import InProcessSandbox  # noqa: PLC0415
    from spade.scripted.policy import design_reply  # noqa: PLC0415

    if source == "example":
        code = tool_prompts.MULTI_TURN_EXAMPLE
    else:
        code = extract_code(design_reply("TARGET SKILL: Data Retrieval (`data_retrieval`)", "valid")) or ""
        assert "self.instructions" in code
    report = check_env(code, InProcessSandbox(), seed=21)
    assert report.ok, [f.message for f in report.findings]


def test_tool_use_review_is_the_solvability_audit() -> None:
    assert prompt_texts.review_system("games") == prompt_texts.REVIEW_SYSTEM
    audit = " ".join(prompt_texts.review_system("tool_use").split())
    assert "Do not reject for difficulty" in audit
    assert "criterion" in audit
    assert audit.endswith("\\boxed{ACCEPT} or \\boxed{REJECT}.")
