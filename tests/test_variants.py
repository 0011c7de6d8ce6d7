"""The held-out family (``variants:heldout``): sizes and rule variants of seed games, each won by its solution."""

from __future__ import annotations

import collections

import pytest

from spade import envs
from spade.config import EvalOptions
from spade.envs import rule_variants, variants
from spade.envs.loader import exec_module
from spade.evals import evaluate
from spade.evals.base import EvalError
from spade.evals.policies import PolicySource

HELDOUT = variants.family("heldout")
SOURCES = dict(HELDOUT)


def _play(name: str, seed: int, moves: list[str]) -> list[str]:
    """The observations of variant ``name`` (run in this process: trusted code) answering ``moves``."""
    env = exec_module(SOURCES[name]).ENV()
    seen = [env.reset(seed=seed)[0]]
    seen += [env.step(m)[0] for m in moves]
    return seen


def test_heldout_has_150_or_more_uniquely_named_distinct_games_of_two_seed_games() -> None:
    names = [name for name, _ in HELDOUT]
    assert len(names) >= 150
    assert len(set(names)) == len(names)
    assert len(set(SOURCES.values())) == len(names)  # no two items are the same game
    counts = collections.Counter("sequences" if n.startswith("sequences_") else "lock" for n in names)
    assert counts == {"lock": 26 + 93, "sequences": 60}
    assert [n for n, _ in variants.family("combination_lock")] == names[:26]  # the size family, unchanged
    assert variants.family("heldout") == HELDOUT  # stable: the same names and sources every time
    assert {"combination_lock_d1_t12_too", "combination_lock_d3_t8_above_base0_reverse_norange",
            "sequences_arithmetic_s4_a1", "sequences_polynomial_s6_a3"} <= set(names)  # fmt: skip


def test_no_heldout_game_is_a_training_level_of_its_seed() -> None:
    lock = exec_module(envs.spec("combination_lock").source())
    seq = exec_module(envs.spec("sequences").source())
    seq_levels = {(tuple(r.__name__ for r in rules), shown, spare) for rules, shown, spare in seq.LEVELS}
    for name, source in HELDOUT:
        module = exec_module(source)
        if name.startswith("combination_lock"):
            assert not set(module.LEVELS) & set(lock.LEVELS), name
        else:
            levels = {
                (tuple(r.__name__ for r in rules), shown, spare) for rules, shown, spare in module.LEVELS
            }
            assert not levels & seq_levels, name
            assert len(levels) == 1


def test_every_heldout_game_loads_in_the_sandbox_and_its_solution_wins() -> None:
    opts = EvalOptions(episodes=2, tasks=("variants:heldout",))
    report = evaluate(["envs"], PolicySource(kind="solver"), opts=opts)[0]
    assert report.summary.total.items == len(HELDOUT)
    assert report.summary.total.score == 1.0  # every item, at two evaluation seeds each
    assert {r.category for r in report.items} == {"logical_deduction", "pattern_recognition"}
    with pytest.raises(EvalError, match="families: combination_lock, lock_rules, sequences, heldout"):
        evaluate(["envs:variants:sokoban"], PolicySource(kind="solver"))


def test_lock_rules_change_what_the_game_says_and_accepts() -> None:
    seed = _play("combination_lock_d1_t12", 3, ["0", "12"])
    assert "higher or lower" in seed[0]
    assert "from 1 to 12" in seed[0]
    too = _play("combination_lock_d1_t12_too", 3, ["1", "12"])
    assert "too low or too high" in too[0]
    assert too[1].startswith("1 is too low for dial 1") or "right" in too[1]
    updown = _play("combination_lock_d1_t12_updown_norange", 3, ["1"])
    assert "go up on dial 1" in updown[1]
    assert "from" not in updown[1]  # the range is no longer said
    above = _play("combination_lock_d2_t10_above_reverse", 5, ["1"])
    assert "Dial 2 of 2" in above[0]
    assert "Dial 2's number is above 1" in above[1]
    for seed_n in range(20):  # 0-based: the numbers are 0..top-1, and a 0 is a guess like any other
        env = exec_module(SOURCES["combination_lock_d3_t8_base0"]).ENV()
        env.reset(seed=seed_n)
        assert all(0 <= n <= 7 for n in env.code)
        assert "from 0 to 7" in env.reset(seed=seed_n)[0]
        if env.code[0] == 0:
            assert "is right" in env.step("\\boxed{0}")[0]


def test_sequences_variants_ask_for_their_own_number_of_terms_of_one_rule() -> None:
    env = exec_module(SOURCES["sequences_arithmetic_s4_a1"]).ENV()
    first, _ = env.reset(seed=1)
    assert first.split("\n")[1].count(",") == 4  # 4 terms shown, then ?
    assert "You need 1 more terms" in first
    moves = env.solution()
    assert len(moves) == 1
    _, reward, done, _, _ = env.step(moves[0])
    assert (reward, done) == (1.0, True)


def test_a_rule_whose_text_the_seed_no_longer_has_fails_loudly() -> None:
    source = envs.spec("combination_lock").source()
    with pytest.raises(ValueError, match="rule 'base0': the source has no"):
        rule_variants.apply(source.replace("self.rng.randint(1, self.top)", "self.rng.randrange(self.top)"),
                            (rule_variants.LOCK_BASE0,))  # fmt: skip
    with pytest.raises(ValueError, match="no rule 'nope'"):
        rule_variants.sequence_source(envs.spec("sequences").source(), "nope", 4, 1)
