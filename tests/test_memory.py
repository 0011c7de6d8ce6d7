"""The environment archive: storage, duplicates, selection, capacity, rollback and crash safety."""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from spade import envs
from spade.config import MemoryConfig
from spade.memory.archive import (
    AddOutcome,
    EnvStatus,
    Memory,
    MemoryStoreError,
    archive_sources,
    ast_fingerprint,
    seed_sources,
    source_hash,
)
from spade.memory.select import (
    diverse,
    eviction_order,
    plr_weights,
    pool_batch,
    weighted_sample_without_replacement,
)
from spade.types import EnvSource


@dataclass(frozen=True)
class Finding:
    code: str
    message: str


def _code(k: int, doc: str = "") -> str:
    """Distinct small environments: ``k`` changes the AST, ``doc`` only a docstring."""
    docstring = doc or "An env."
    return f'class Env{k}:\n    """{docstring}"""\n\n    def step(self, a):\n        return {k}  # comment\n'


def _src(k: int, skill: str = "logical_deduction", step: int = 1, parent: str | None = None) -> EnvSource:
    return EnvSource(
        code=_code(k), skill=skill, env_id=f"e{k}", parent_id=parent, doc_id=f"d{k}", created_step=step
    )


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    return Memory.in_run_dir(
        tmp_path, MemoryConfig(capacity=50, band_low=0.1, band_high=0.9, example_pool=10)
    )


# -- fingerprints ------------------------------------------------------------------------------------------


def test_fingerprint_ignores_docstrings_comments_and_layout() -> None:
    a = "def f(x):\n    '''Doc.'''\n    return x + 1  # add one\n"
    b = "def f(x):\n\n    return (x +\n            1)\n"
    assert ast_fingerprint(a) == ast_fingerprint(b)
    assert ast_fingerprint(a) != ast_fingerprint("def f(x):\n    return x + 2\n")
    assert ast_fingerprint("def f(:\n") == "text:" + source_hash("def f(:\n")
    nested_a = 'if True:\n    class A:\n        """Doc."""\n        def m(self):\n            """Doc."""\n'
    nested_a += "            return 1\n"
    nested_b = "if True:\n    class A:\n        def m(self):\n            return 1\n"
    assert ast_fingerprint(nested_a) == ast_fingerprint(nested_b)
    # a body made only of a docstring equals an explicit pass
    assert ast_fingerprint("def g():\n    'only doc'\n") == ast_fingerprint("def g():\n    pass\n")


# -- adding ------------------------------------------------------------------------------------------------


def test_add_and_get_round_trip(mem: Memory) -> None:
    res = mem.add(_src(1, parent="seed:x"), hint="try the corners", trace_hash="t1")
    assert (res.env_id, res.outcome, res.status) == ("e1", AddOutcome.ADDED, EnvStatus.VALID)
    rec = mem.get("e1")
    assert rec.code == _code(1)
    assert rec.code_hash == source_hash(_code(1))
    assert rec.fingerprint == ast_fingerprint(_code(1))
    assert (rec.skill, rec.parent_id, rec.doc_id, rec.created_step) == (
        "logical_deduction",
        "seed:x",
        "d1",
        1,
    )
    assert (rec.hint, rec.trace_hash, rec.is_seed, rec.findings) == ("try the corners", "t1", False, ())
    assert (rec.win_rate, rec.regret, rec.last_step) == (None, None, None)
    with pytest.raises(KeyError, match="no environment 'nope'"):
        mem.get("nope")


def test_rejected_sources_are_kept_with_findings(mem: Memory) -> None:
    mem.add(_src(2), status=EnvStatus.REJECTED, findings=[Finding("no_win", "no policy reaches reward 1")])
    rec = mem.get("e2")
    assert rec.status is EnvStatus.REJECTED
    assert [(f.code, f.message) for f in rec.findings] == [("no_win", "no policy reaches reward 1")]


def test_exact_copy_is_merged(mem: Memory) -> None:
    mem.add(_src(1))
    copy = EnvSource(code=_code(1), skill="logical_deduction", env_id="e1-again", created_step=2)
    res = mem.add(copy)
    assert (res.env_id, res.outcome, res.status, res.matched) == (
        "e1",
        AddOutcome.MERGED,
        EnvStatus.VALID,
        "e1",
    )
    assert [r.env_id for r in mem.records()] == ["e1"]
    # a copy of rejected code merges into the rejected record, and says so
    mem.add(_src(3), status=EnvStatus.REJECTED)
    res = mem.add(EnvSource(code=_code(3), skill="logical_deduction", env_id="e3b"))
    assert (res.env_id, res.outcome, res.status) == ("e3", AddOutcome.MERGED, EnvStatus.REJECTED)


def test_same_structure_is_rejected_as_duplicate(mem: Memory) -> None:
    mem.add(_src(1))
    near = EnvSource(code=_code(1, doc="Reworded docstring."), skill="logical_deduction", env_id="e1b")
    res = mem.add(near)
    assert (res.env_id, res.outcome, res.status, res.matched) == (
        "e1b",
        AddOutcome.DUPLICATE,
        EnvStatus.REJECTED,
        "e1",
    )
    rec = mem.get("e1b")
    assert rec.duplicate_of == "e1"
    assert rec.findings[-1].code == "duplicate"
    assert mem.find_match(near.code) == (AddOutcome.MERGED, "e1b")


def test_same_behaviour_trace_is_a_duplicate(mem: Memory) -> None:
    mem.add(_src(1), trace_hash="same-trace")
    res = mem.add(_src(2), trace_hash="same-trace")
    assert (res.outcome, res.matched) == (AddOutcome.DUPLICATE, "e1")
    assert mem.add(_src(3), trace_hash=None).outcome is AddOutcome.ADDED


def test_env_id_reused_for_other_code_is_an_error(mem: Memory) -> None:
    mem.add(_src(1))
    with pytest.raises(ValueError, match="'e1' is already archived with different code"):
        mem.add(EnvSource(code=_code(9), skill="logical_deduction", env_id="e1"))


def test_a_failed_write_leaves_nothing_behind(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(step: int) -> None:
        raise RuntimeError("crash inside the transaction")

    monkeypatch.setattr(mem, "_enforce_capacity", boom)
    with pytest.raises(RuntimeError, match="crash inside"):
        mem.add(_src(1))
    assert mem.records() == []


# -- statistics --------------------------------------------------------------------------------------------


def test_history_and_latest_statistics(mem: Memory) -> None:
    mem.add(_src(1))
    mem.record_stats("e1", step=1, win_rate=0.25, regret=0.5, plays=8)
    mem.record_stats("e1", step=2, win_rate=0.5, plays=8)  # replay step: no regret measured
    rec = mem.get("e1")
    assert (rec.win_rate, rec.regret, rec.last_step) == (0.5, 0.5, 2)
    mem.record_stats("e1", step=2, win_rate=0.75, regret=0.125, plays=4)  # a redone step overwrites
    assert [(h.step, h.win_rate, h.regret, h.plays) for h in mem.history("e1")] == [
        (1, 0.25, 0.5, 8),
        (2, 0.75, 0.125, 4),
    ]
    assert mem.played() == [("e1", 1, 0.25, 8), ("e1", 2, 0.75, 4)]  # every environment, by step
    with pytest.raises(KeyError, match="add it before recording"):
        mem.record_stats("ghost", step=1, win_rate=0.0)
    mem.set_hint("e1", "new hint")
    assert mem.get("e1").hint == "new hint"
    with pytest.raises(KeyError):
        mem.set_hint("ghost", "x")


# -- selection ---------------------------------------------------------------------------------------------


def _populate(mem: Memory, rows: list[tuple[int, float, float, str | None]]) -> None:
    for k, wr, regret, parent in rows:
        mem.add(_src(k, parent=parent))
        mem.record_stats(f"e{k}", step=1, win_rate=wr, regret=regret, plays=8)


def test_examples_are_in_band_ranked_by_regret(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(example_pool=0))
    _populate(
        mem,
        [
            (1, 0.5, 0.1, None),
            (2, 0.5, 0.6, None),
            (3, 0.95, 0.9, None),
            (4, 0.0, 0.9, None),
            (5, 0.3, 0.3, None),
        ],
    )
    mem.add(_src(6, skill="optimization"))
    mem.record_stats("e6", step=1, win_rate=0.5, regret=1.0)
    got = mem.examples("logical_deduction", 2, seed=0)
    assert [r.env_id for r in got] == ["e2", "e5"]  # e3 too easy, e4 too hard, e6 another skill
    assert [r.env_id for r in mem.examples("logical_deduction", 2, seed=0, exclude={"e2"})] == ["e5", "e1"]


def test_examples_are_seeded_and_drawn_from_the_top_pool(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(example_pool=3))
    _populate(mem, [(k, 0.5, k / 10, None) for k in range(1, 7)])
    draws = {tuple(r.env_id for r in mem.examples("logical_deduction", 2, seed=s)) for s in range(30)}
    assert mem.examples("logical_deduction", 2, seed=4) == mem.examples("logical_deduction", 2, seed=4)
    assert len(draws) > 1
    for draw in draws:
        assert set(draw) <= {"e6", "e5", "e4"}  # the top 3 by regret
        regrets = [int(d[1:]) for d in draw]
        assert regrets == sorted(regrets, reverse=True)


def test_examples_prefer_different_parents(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(example_pool=0))
    _populate(mem, [(1, 0.5, 0.9, "p"), (2, 0.5, 0.8, "p"), (3, 0.5, 0.1, "q")])
    assert [r.env_id for r in mem.examples("logical_deduction", 2, seed=0)] == ["e1", "e3"]
    assert [r.env_id for r in mem.examples("logical_deduction", 3, seed=0)] == [
        "e1",
        "e2",
        "e3",
    ]  # best regret first


def test_unplayed_records_fill_missing_examples(mem: Memory) -> None:
    mem.warm_start([EnvSource(code=_code(50), skill="logical_deduction", env_id="seed:a")])
    _populate(mem, [(1, 0.5, 0.2, None)])
    got = [r.env_id for r in mem.examples("logical_deduction", 3, seed=1)]
    assert got == ["e1", "seed:a"]


def test_negatives_rejected_first_then_badly_calibrated(mem: Memory) -> None:
    mem.add(_src(1), status=EnvStatus.REJECTED, findings=[Finding("crash", "step raised KeyError")])
    mem.add(_src(2), status=EnvStatus.REJECTED)
    _populate(mem, [(3, 1.0, 0.0, None), (4, 0.5, 0.0, None)])
    mem.add(
        EnvSource(code=_code(3, doc="dup"), skill="logical_deduction", env_id="dup")
    )  # duplicates are no lesson
    negs = mem.negatives("logical_deduction", 3, seed=0)
    assert sorted(n.record.env_id for n in negs[:2]) == ["e1", "e2"]
    reasons = {n.record.env_id: n.reasons for n in negs}
    assert reasons["e1"] == ("crash: step raised KeyError",)
    assert reasons["e2"] == ("rejected",)
    assert reasons["e3"] == ("too easy: the agent already wins 100% of plays",)
    assert len(mem.negatives("logical_deduction", 1, seed=0)) == 1


def test_replay_draws_played_environments_plr_style(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(replay_temperature=0.1, replay_staleness=0.0))
    _populate(mem, [(1, 0.5, 0.1, None), (2, 0.5, 0.9, None), (3, 0.5, 0.4, None)])
    mem.add(_src(4))  # never played: not replayable
    assert [r.env_id for r in mem.replay(2, step=5, seed=0)] == ["e2", "e3"]  # (1/2)^10 vs (1/3)^10
    assert {r.env_id for r in mem.replay(10, step=5, seed=0)} == {"e1", "e2", "e3"}
    assert mem.replay(1, step=5, seed=0, skill="optimization") == []


def test_plr_weights_worked_example() -> None:
    w = plr_weights([0.5, 0.1, 0.3], [1, 3, 0], temperature=1.0, rho=0.5)
    # ranks 1, 3, 2 -> h = 1, 1/3, 1/2 (sum 11/6) -> P_S = 6/11, 2/11, 3/11; P_C = 1/4, 3/4, 0
    assert w == pytest.approx([0.5 * 6 / 11 + 0.125, 0.5 * 2 / 11 + 0.375, 0.5 * 3 / 11])
    assert sum(w) == pytest.approx(1.0)
    assert plr_weights([1.0, 1.0], [0, 0], temperature=1.0, rho=1.0) == pytest.approx([0.5, 0.5])
    assert plr_weights([], [], 1.0, 0.5) == []
    with pytest.raises(ValueError, match="temperature > 0"):
        plr_weights([1.0], [1], temperature=0.0, rho=0.5)


def test_weighted_sampling_without_replacement() -> None:
    rng = random.Random(0)
    got = weighted_sample_without_replacement([0.0, 1.0, 0.0, 1.0], 4, rng)
    assert sorted(got[:2]) == [1, 3]
    assert sorted(got) == [0, 1, 2, 3]
    assert weighted_sample_without_replacement([1.0, 2.0], 5, random.Random(1)) in ([0, 1], [1, 0])
    counts = [0, 0]
    for s in range(2000):
        counts[weighted_sample_without_replacement([1.0, 3.0], 1, random.Random(s))[0]] += 1
    assert 0.2 < counts[0] / 2000 < 0.3


def test_diverse_never_repeats_a_fingerprint() -> None:
    @dataclass(frozen=True)
    class C:
        env_id: str
        parent_id: str | None
        fingerprint: str
        win_rate: float | None = None
        regret: float | None = None
        last_step: int | None = None

    cands = [C("a", None, "f1"), C("b", None, "f1"), C("c", "a", "f2"), C("d", None, "f3")]
    assert [c.env_id for c in diverse(cands, 3)] == ["a", "d", "c"]
    assert [c.env_id for c in diverse(cands, 5)] == ["a", "d", "c"]


def test_eviction_order_worked_example() -> None:
    keys = [(0.5, 0.2, 1), (None, None, 2), (0.95, 0.4, 3), (0.5, 0.1, 4), (0.0, 0.4, 1), (0.5, 0.1, 2)]
    # out of band (2, 4; equal regret: older first), in band by regret then age (5, 3, 0), never played (1)
    assert eviction_order(keys, (0.1, 0.9)) == [4, 2, 5, 3, 0, 1]


# -- capacity, resume, rollback ----------------------------------------------------------------------------


def test_capacity_evicts_lowest_score_non_seed(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(capacity=2))
    mem.warm_start([EnvSource(code=_code(100), skill="logical_deduction", env_id="seed:a")])
    _populate(mem, [(1, 0.5, 0.3, None), (2, 0.5, 0.1, None)])
    res = mem.add(_src(3, step=2))
    assert res.status is EnvStatus.VALID
    assert mem.get("e2").status is EnvStatus.EVICTED
    assert {r.env_id for r in mem.records(status=EnvStatus.VALID)} == {"seed:a", "e1", "e3"}
    m = mem.metrics()
    assert (m["memory/valid"], m["memory/evicted"], m["memory/seeds"], m["memory/in_band"]) == (
        3.0,
        1.0,
        1.0,
        1.0,
    )
    # an evicted environment still blocks near-duplicates
    assert mem.find_match(_code(2, doc="other words")) == (AddOutcome.DUPLICATE, "e2")


def test_rollback_forgets_later_steps_and_undoes_evictions(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.sqlite", MemoryConfig(capacity=2))
    _populate(mem, [(1, 0.5, 0.3, None), (2, 0.5, 0.1, None)])
    mem.add(_src(3, step=2))
    mem.record_stats("e1", step=2, win_rate=0.75)
    mem.record_stats("e3", step=2, win_rate=0.25, regret=0.4)
    assert mem.get("e2").status is EnvStatus.EVICTED
    mem.rollback_to(1)
    assert [(r.env_id, r.status) for r in mem.records()] == [("e1", EnvStatus.VALID), ("e2", EnvStatus.VALID)]
    assert [h.step for h in mem.history("e1")] == [1]
    # redoing step 2 gives the same archive as before
    mem.add(_src(3, step=2))
    assert mem.get("e2").status is EnvStatus.EVICTED


def test_reopening_resumes(tmp_path: Path) -> None:
    with Memory.in_run_dir(tmp_path) as mem:
        _populate(mem, [(1, 0.5, 0.3, None)])
    with Memory.in_run_dir(tmp_path) as again:
        assert again.get("e1").regret == 0.3
        assert again.add(_src(1)).outcome is AddOutcome.MERGED


def test_a_file_of_another_schema_is_refused(tmp_path: Path) -> None:
    Memory.in_run_dir(tmp_path).close()
    with sqlite3.connect(tmp_path / "memory.sqlite") as db:
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    db.close()
    with pytest.raises(MemoryStoreError, match="schema 999"):
        Memory.in_run_dir(tmp_path)


_WRITER = textwrap.dedent(
    """
    import sys
    from spade.config import MemoryConfig
    from spade.memory.archive import Memory
    from spade.types import EnvSource

    mem = Memory(sys.argv[1], MemoryConfig(capacity=5))
    for k in range(100_000):
        code = f"def f():\\n    return {k}\\n"
        mem.add(EnvSource(code=code, skill="optimization", env_id=f"e{k}", created_step=k))
        mem.record_stats(f"e{k}", step=k, win_rate=(k % 10) / 10, regret=(k % 7) / 7, plays=8)
        if k == 20:
            print("ready", flush=True)
    """
)


def test_sigkill_mid_write_leaves_a_consistent_archive(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # let it run on so the kill lands among many more writes
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        orphans = db.execute("SELECT COUNT(*) FROM history WHERE env_id NOT IN (SELECT env_id FROM envs)")
        assert orphans.fetchone()[0] == 0
    db.close()
    with Memory(path, MemoryConfig(capacity=5)) as mem:
        assert len(mem.records(status=EnvStatus.VALID)) <= 5
        n = len(mem.records())
        assert n > 20
        mem.add(
            EnvSource(code="def g():\n    return -1\n", skill="optimization", env_id="after", created_step=n)
        )
        assert mem.get("after").status is EnvStatus.VALID


# -- warm start --------------------------------------------------------------------------------------------


def test_warm_start_is_idempotent(mem: Memory) -> None:
    seeds = [EnvSource(code=_code(k), skill="optimization", env_id=f"seed:{k}") for k in range(3)]
    assert mem.warm_start(seeds) == 3
    assert mem.warm_start(seeds) == 0
    assert all(r.is_seed and r.created_step == 0 for r in mem.records())


def test_warm_start_from_the_seed_library(mem: Memory) -> None:
    sources = seed_sources("games")
    names = envs.names("games")
    assert [s.env_id for s in sources] == [f"seed:{n}" for n in names if envs.spec(n).source_path is not None]
    assert all(envs.spec(n).setting == "games" for n in names)
    added = mem.warm_start(sources)
    assert added == len(mem.records(status=EnvStatus.VALID)) == len(sources)


def test_warm_start_takes_only_the_seeds_of_the_trained_skills() -> None:
    sources = seed_sources("games", ("logical_deduction",))
    assert {s.env_id for s in sources} == {"seed:combination_lock", "seed:seating"}
    assert {s.skill for s in sources} == {"logical_deduction"}
    assert [s.env_id for s in seed_sources("games", ("logical_deduction",), ("seating",))] == ["seed:seating"]


# -- fixed pools -------------------------------------------------------------------------------------------


def _epochs(seed: int) -> Callable[[int], random.Random]:
    return lambda epoch: random.Random(f"{seed}/{epoch}")


def test_pool_batches_play_the_whole_pool_epoch_after_epoch() -> None:
    ids = [f"p{i:03d}" for i in range(100)]
    batches = [pool_batch(ids, 24, k, _epochs(0)) for k in range(10)]
    assert all(len(b) == len(set(b)) == 24 for b in batches)
    seen = set().union(*batches[: math.ceil(100 / 24)])
    assert seen == set(ids)  # the whole pool within ceil(100 / 24) regenerations
    assert len(set().union(*batches[:4])) == 96  # no environment twice before the pool is exhausted
    stream = [x for b in batches for x in b]  # 240 plays: every id 2 or 3 times, never 1 or 4
    assert {stream.count(x) for x in ids} <= {2, 3}
    assert pool_batch(ids, 24, 7, _epochs(0)) == batches[7]  # a pure function of its arguments
    assert batches[:5] != [pool_batch(ids, 24, k, _epochs(1)) for k in range(5)]  # seeded


def test_pool_batches_defer_a_repeat_across_the_epoch_boundary() -> None:
    ids = ["a", "b", "c"]
    orders = {0: ["a", "b", "c"], 1: ["c", "a", "b"], 2: ["b", "c", "a"]}

    class Fixed(random.Random):
        def __init__(self, epoch: int) -> None:
            super().__init__(0)
            self.epoch = epoch

        def shuffle(self, x: list[str]) -> None:  # type: ignore[override]
            x[:] = orders[self.epoch]

    got = [pool_batch(ids, 2, k, Fixed) for k in range(4)]
    # stream a b | c, then epoch 1's c repeats it (deferred), a | c b | epoch 2: b c
    assert got == [["a", "b"], ["c", "a"], ["c", "b"], ["b", "c"]]
    assert pool_batch(ids, 5, 0, Fixed) == ["a", "b", "c"]  # a batch is at most the pool
    assert pool_batch([], 5, 3, Fixed) == []


def test_archive_sources_reads_another_runs_valid_environments(tmp_path: Path) -> None:
    with Memory.in_run_dir(tmp_path / "other") as other:
        other.add(_src(1))
        other.add(_src(2, parent="e1"))
        other.add(_src(3), status=EnvStatus.REJECTED)
    before = (tmp_path / "other" / "memory.sqlite").read_bytes()
    sources = archive_sources(tmp_path / "other")
    assert [(s.env_id, s.parent_id, s.skill, s.created_step) for s in sources] == [
        ("pool_e1", None, "logical_deduction", 0),
        ("pool_e2", "pool_e1", "logical_deduction", 0),
    ]
    assert sources[0].code == _code(1)
    assert (tmp_path / "other" / "memory.sqlite").read_bytes() == before  # opened read-only


def test_archive_sources_refuses_what_is_not_an_archive(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="does not exist"):
        archive_sources(tmp_path)
    (tmp_path / "memory.sqlite").write_text("not a database")
    with pytest.raises(MemoryStoreError, match="cannot read the archive"):
        archive_sources(tmp_path)
    other = tmp_path / "old"
    Memory.in_run_dir(other).close()
    with sqlite3.connect(other / "memory.sqlite") as db:
        db.execute("UPDATE meta SET value = '999' WHERE key = 'schema'")
    db.close()
    with pytest.raises(MemoryStoreError, match="schema 999"):
        archive_sources(other)
