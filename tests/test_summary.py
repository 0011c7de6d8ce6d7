"""The end-of-run summary and the memory metric."""

from __future__ import annotations

import subprocess
import sys

from spade import resources
from spade.cli.summary import run_summary


def test_summary_compares_first_and_last_third() -> None:
    rows = [
        {"step": 0, "agent/win_rate": 0.1, "agent/return_mean": 0.2, "designer/envs": 4.0,
         "designer/valid_rate": 0.5, "speed/sampled_tokens_per_s": 100.0, "resources/peak_rss_gb": 2.5,
         "agent/constant_group_share": 0.5},
        {"step": 1, "agent/win_rate": 0.2, "agent/return_mean": 0.3, "designer/credited": 4.0,
         "designer/samples_kept": 3.0, "designer/regret_mean": 0.25, "designer/regret_measured": 2.0,
         "designer/regret_min": -0.25, "designer/regret_max": 0.75, "agent/win_rate_hint": 0.4},
        {"step": 2, "agent/win_rate": 0.6, "agent/return_mean": 0.7, "resources/peak_rss_gb": 3.0,
         "agent/constant_group_share": 0.0},
        {"step": 3, "eval/reasoning_gym/score": 0.2},  # the final evaluation's row: not a step
    ]  # fmt: skip
    rows = [{"agent/plays": 16.0, **r} if "agent/win_rate" in r else r for r in rows]
    text = "\n".join(run_summary(rows))
    assert text.startswith("Summary of 3 steps:")
    assert "2/4 designs valid (0.50)" in text
    assert "win rate 0.10 in the first third -> 0.60 in the last third" in text
    assert "samples trained per regeneration [3]" in text
    assert "mean regret +0.250 (2 environments measured, from -0.25 to +0.75)" in text
    assert "3.00 GB" in text
    assert "groups with equal returns (no gradient) 0.25" in text
    assert "environments played in both thirds" not in text  # no per-environment plays given
    plays = [("a", 0, 0.5, 4), ("b", 0, 0.0, 4), ("c", 0, 1.0, 4), ("a", 2, 1.0, 4), ("b", 2, 0.5, 4),
             ("d", 2, 0.0, 8), ("a", 1, 0.0, 4)]  # fmt: skip
    text = "\n".join(run_summary(rows, plays))  # a and b in both thirds; c and d only in one; step 1 neither
    assert "; on the 2 environments played in both thirds 0.25 -> 0.75" in text
    assert run_summary([]) == ["No step finished: nothing to summarise."]
    assert not any("held-out" in line for line in run_summary(rows))  # one evaluation: no before/after


def test_summary_gives_the_held_out_score_before_and_after() -> None:
    rows = [
        {"step": 0, "agent/plays": 16.0, "agent/win_rate": 0.1, "eval/envs/score": 0.04, "eval/envs/n": 26.0,
         "eval/envs/ci95_lo": 0.0, "eval/envs/ci95_hi": 0.12},
        {"step": 1, "agent/plays": 16.0, "agent/win_rate": 0.2},
        {"step": 2, "eval/envs/score": 0.25, "eval/envs/n": 26.0, "eval/envs/ci95_lo": 0.1, "eval/envs/ci95_hi": 0.4},
    ]  # fmt: skip
    text = "\n".join(run_summary(rows))
    assert (
        "held-out envs (26 episodes): 0.040 [0.000, 0.120] at step 0 -> 0.250 [0.100, 0.400] after 2 steps"
        in text
    )


def test_an_agent_only_summary_has_no_designer_line_and_no_hinted_win_rate() -> None:
    rows = [
        {"step": s, "agent/plays": 8.0, "agent/win_rate": 0.5, "agent/return_mean": 0.5} for s in range(3)
    ]
    for mode in ("fixed_pool", "procedural"):
        lines = run_summary(rows, mode=mode)
        assert lines[1].startswith("  agent: win rate 0.50 in the first third -> 0.50 in the last third")
        assert not any("designer" in line or "with hint" in line for line in lines)
    assert run_summary(rows)[1].startswith("  designer: 0/0 designs valid")  # self-play says it designed none


def test_counts_of_one_read_in_the_singular() -> None:
    rows = [
        {
            "step": 0,
            "agent/plays": 8.0,
            "agent/win_rate": 0.5,
            "designer/envs": 2.0,
            "designer/valid_rate": 0.5,
        }
    ]
    text = "\n".join(run_summary(rows, [("a", 0, 0.5, 8)]))
    assert text.startswith("Summary of 1 step:")
    assert "over 1 regeneration;" in text
    assert "on the 1 environment played in both thirds" in text


def test_peak_rss_counts_live_children() -> None:
    alone = resources.peak_rss_gb()
    assert alone > 0.005
    child = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(200 * 2**20); import time; b[::4096] = b'x' * len(b[::4096]); "
         "print('ok', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ok"
        assert child.pid in resources.process_tree()
        assert resources.peak_rss_gb() >= alone + 0.15
        assert resources.metrics()["resources/rss_gb"] > 0.15
    finally:
        child.kill()
        child.wait()
