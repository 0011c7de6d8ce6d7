"""Delayed designer credit as released: matched-timing regret, window win rates, release and flush."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from spade.config import RewardConfig
from spade.scoring.credit import DueCredit, PendingCredit, add_plays, credit_rewards, release_due
from spade.scoring.stats import EnvStats

DELAY = 2


def _entry(ref: str, step: int, skill: str = "logic", **kw: object) -> PendingCredit:
    return PendingCredit(
        sample_ref=ref, env_id=f"env-{ref}", skill=skill, created_step=step, valid=True, **kw
    )  # type: ignore[arg-type]


def _run_window(cfg: RewardConfig, lp_ema: dict[str, float] | None = None) -> tuple[float, dict[str, float]]:
    """Environment 'a' is designed at step 4 (regret 0.09 measured then) and played 4 times a step.

    Step 4: 1 win of 4, returns 1, -1, 0, 0; step 5: 2 wins, returns 1, 1, 0, 0; step 6: 3 wins, returns
    1, 1, 1, -0.5. With delay 2 it is credited at step 6 on the window 4-6: 6 wins of 12 (0.5), mean
    return (0 + 2 + 2.5) / 12 = 0.375. Its creation-step win rate alone was 0.25.
    """
    plays = {4: EnvStats(4, 1, 0.0), 5: EnvStats(4, 2, 2.0), 6: EnvStats(4, 3, 2.5)}
    buffer: tuple[PendingCredit, ...] = ()
    for step in (4, 5, 6):
        new = (_entry("a", 4, regret=0.09),) if step == 4 else ()
        buffer = add_plays([*buffer, *new], {"env-a": plays[step]})
        due, buffer = release_due(buffer, step, DELAY)
        if step < 6:
            assert due == ()
    assert [(d.entry.sample_ref, d.staleness, d.entry.plays) for d in due] == [("a", 2, 12)]
    rewards, ema = credit_rewards(due, cfg, lp_ema or {})
    return rewards[0], ema


def test_blend_uses_the_window_win_rate_and_the_creation_regret() -> None:
    # plateau(0.5) = 1; regret 0.09 / 0.15 = 0.6: 0.6 * 1 + 0.4 * 0.6 = 0.84
    # (frozen at creation it would be 0.6 * plateau(0.25) + 0.24 = 0.6 * 0.4 + 0.24 = 0.48)
    assert _run_window(RewardConfig(variant="blend", delay=DELAY))[0] == pytest.approx(0.84)


def test_solve_rate_uses_the_window_win_rate() -> None:
    assert _run_window(RewardConfig(variant="solve_rate", delay=DELAY))[0] == pytest.approx(1.0)


def test_learning_potential_uses_the_window_win_rate() -> None:
    reward, ema = _run_window(
        RewardConfig(variant="learning_potential", delay=DELAY, lp_ema=0.5), {"logic": 0.2}
    )
    assert reward == pytest.approx(0.3)  # |0.5 - 0.2|
    assert ema == pytest.approx({"logic": 0.35})  # halfway from 0.2 to 0.5


def test_regret_keeps_matched_timing() -> None:
    assert _run_window(RewardConfig(variant="regret", delay=DELAY))[0] == pytest.approx(0.09)


def test_mean_return_measure_as_released() -> None:
    # blend on the window's mean return 0.375: plateau = 1 - 0.025 / 0.25 = 0.9 -> 0.54 + 0.24
    cfg = RewardConfig(variant="blend", delay=DELAY, rate_measure="mean_return")
    assert _run_window(cfg)[0] == pytest.approx(0.78)


def test_add_plays_skips_unplayed_and_rejected_entries() -> None:
    buffer = (_entry("a", 0), replace(_entry("b", 0), valid=False), _entry("c", 0))
    out = add_plays(buffer, {"env-a": EnvStats(2, 1, 0.5), "env-b": EnvStats(2, 2, 2.0)})
    assert [(e.plays, e.wins, e.return_sum) for e in out] == [(2, 1, 0.5), (0, 0, 0.0), (0, 0, 0.0)]
    assert out[0].rate("wins") == 0.5
    assert out[2].rate("wins") == 0.0  # nothing seen yet


def test_release_due_splits_by_age_and_flushes_at_the_end() -> None:
    buffer = (_entry("a", 0), _entry("b", 3), _entry("c", 4), _entry("d", 1))
    due, rest = release_due(buffer, step=5, delay=2)
    assert [(d.entry.sample_ref, d.staleness) for d in due] == [("a", 5), ("b", 2), ("d", 4)]
    assert [e.sample_ref for e in rest] == ["c"]
    flushed, left = release_due(rest, step=5, delay=2, final=True)
    assert [(d.entry.sample_ref, d.staleness) for d in flushed] == [("c", 1)]
    assert left == ()
    due0, rest0 = release_due(buffer[2:3], step=4, delay=0)
    assert due0 == (DueCredit(buffer[2], 0),)
    assert rest0 == ()
    with pytest.raises(ValueError, match="delay must be >= 0"):
        release_due(buffer, step=1, delay=-1)


def test_entries_round_trip_through_json() -> None:
    buffer = (
        _entry("a", 0, regret=0.5, plays=8, wins=3, return_sum=2.5),
        replace(_entry("b", 2), valid=False),
        replace(_entry("c", 2), valid=False, checked=True),
    )
    text = json.dumps([e.to_dict() for e in buffer])
    assert tuple(PendingCredit.from_dict(d) for d in json.loads(text)) == buffer
    older = {k: v for k, v in buffer[2].to_dict().items() if k != "checked"}  # a checkpoint of an older run
    assert PendingCredit.from_dict(older) == replace(buffer[2], checked=False)
    assert buffer[1].regret is None  # not measured stays distinct from a measured 0 across a resume


@pytest.mark.parametrize("variant", ["regret", "blend"])
def test_an_unmeasured_regret_is_rewarded_as_zero(variant: str) -> None:
    cfg = RewardConfig(variant=variant)  # type: ignore[arg-type]
    stats = {"regret": 0.0, "plays": 8, "wins": 3, "return_sum": 2.5}
    due = (DueCredit(_entry("a", 0, **{**stats, "regret": None}), 2), DueCredit(_entry("b", 0, **stats), 2))
    (unmeasured, zero), _ = credit_rewards(due, cfg, {})
    assert unmeasured == zero


def test_credit_rewards_invalid_penalty_and_lp_per_skill() -> None:
    cfg = RewardConfig(variant="learning_potential", lp_ema=0.5)
    due = (
        DueCredit(_entry("a", 0, plays=5, wins=4), 0),
        DueCredit(_entry("b", 0, plays=5, wins=1), 0),
        DueCredit(_entry("c", 0, skill="math", plays=5, wins=3), 0),
        DueCredit(replace(_entry("d", 0, plays=5, wins=5), valid=False), 0),
    )
    before = {"logic": 0.4}
    rewards, ema = credit_rewards(due, cfg, before)
    # logic against 0.4: |0.8 - 0.4|, |0.2 - 0.4|; math has no baseline yet (0): 0.6; invalid: -0.5
    assert rewards == pytest.approx((0.4, 0.2, 0.6, -0.5))
    # logic EMA moves halfway to the valid mean 0.5 -> 0.45; math from 0 halfway to 0.6 -> 0.3
    assert ema == pytest.approx({"logic": 0.45, "math": 0.3})
    assert before == {"logic": 0.4}
    blend, unchanged = credit_rewards(due[:1], RewardConfig(variant="blend"), before)
    assert blend == pytest.approx((0.12,))  # window win rate 0.8: plateau 0.2, times 0.6; regret 0
    assert unchanged == before


def test_learning_potential_released_update_scores_against_the_moved_slow_baseline() -> None:
    # As released: the slow EMA first moves 85% of the way to the batch's mean window rate, then each
    # environment is scored against the moved EMA; 'before' (this implementation's default) scores first.
    released = RewardConfig(variant="learning_potential", lp_ema=0.85, lp_baseline="updated")
    first = (DueCredit(_entry("a", 0, plays=5, wins=4), 0), DueCredit(_entry("b", 0, plays=5, wins=1), 0))
    rewards, ema = credit_rewards(first, released, {})
    assert ema == pytest.approx({"logic": 0.425})  # 0.15 * 0 + 0.85 * mean(0.8, 0.2)
    assert rewards == pytest.approx((0.375, 0.225))  # |0.8 - 0.425|, |0.2 - 0.425|
    second = (DueCredit(_entry("c", 4, plays=10, wins=9), 0),)
    rewards, ema = credit_rewards(second, released, ema)
    assert ema == pytest.approx({"logic": 0.82875})  # 0.15 * 0.425 + 0.85 * 0.9
    assert rewards == pytest.approx((0.07125,))  # |0.9 - 0.82875|
    before = replace(released, lp_baseline="before")
    rewards, moved = credit_rewards(second, before, {"logic": 0.425})
    assert rewards == pytest.approx((0.475,))  # |0.9 - 0.425|: scored before the move
    assert moved == pytest.approx(ema)  # the same EMA either way


def test_a_regeneration_whose_every_design_was_rejected_still_ranks_them_with_checked_penalty() -> None:
    rejected = (
        DueCredit(replace(_entry("no_code", 0), valid=False), 0),
        DueCredit(replace(_entry("ran", 0), valid=False, checked=True), 0),
    )
    released, _ = credit_rewards(rejected, RewardConfig(), {})
    assert released == (-0.5, -0.5)  # one penalty: a constant group, dropped from the update
    graded, _ = credit_rewards(rejected, RewardConfig(checked_penalty=-0.25), {})
    assert graded == (-0.5, -0.25)
