"""The tool-use seed environments: each one's core mechanic, and the mistakes it must not reward.

The registry-wide contract (determinism, solution wins, random play loses) is in test_envs_contract.py;
these tests check what is specific to each environment: the state the verdict inspects, the errors an agent
has to recover from, and the shortcuts that must fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from spade import envs
from spade.env import StepResult, ToolEnv, answer_action, tool_call_action


def make(name: str) -> Any:
    env = envs.make(name)
    assert isinstance(env, ToolEnv)
    return env


def play(env: ToolEnv, actions: list[str]) -> StepResult:
    result: StepResult | None = None
    for action in actions:
        result = env.step(action)
    assert result is not None
    return result


def first_seed(name: str, level: int, wanted: Callable[[Any], bool]) -> Any:
    """A fresh environment reset to the first seed whose instance satisfies ``wanted``."""
    for seed in range(200):
        env = make(name)
        env.reset(seed=seed, options={"difficulty": level})
        if wanted(env):
            return env
    raise AssertionError(f"no seed of {name} at level {level} has the wanted property")


def won(result: StepResult) -> bool:
    return result[1] == 1.0 and result[2]


# -- every tool environment ---------------------------------------------------------------------------------
def test_the_right_answer_alone_never_wins() -> None:
    for name in envs.names("tool_use"):
        for level in range(3):
            env = make(name)
            env.reset(seed=level, options={"difficulty": level})
            final = env.solution()[-1]
            assert not won(env.step(final)), f"{name} d{level}: answering without acting won"


def test_first_observation_states_task_tools_and_answer_format() -> None:
    for name in envs.names("tool_use"):
        env = make(name)
        obs, _ = env.reset(seed=0)
        assert all(tool in obs for tool in env.tool_names()), name
        assert "<tool_call>" in obs, name
        assert "<answer>" in obs, name
        answer = re.search(r"<answer>(.*?)</answer>", env.solution()[-1])
        assert answer
        assert answer.group(1) not in obs, f"{name}: the answer leaks into the first observation"


# -- freight_booking (api orchestration) --------------------------------------------------------------------
def test_freight_a_feasible_but_dearer_booking_fails_until_rebooked() -> None:
    def feasible(e: Any) -> list[tuple[float, int, str, str]]:
        return [o for o in e._options() if o[1] <= e.orders[e.order_id]["deadline_days"]]

    env = first_seed("freight_booking", 1, lambda e: len(feasible(e)) > 1)
    _, _, best_wid, best_service = env.best
    cost, _, wid, service = next(o for o in feasible(env) if o[2:] != env.best[2:])
    assert cost > env.best[0]
    booked = env.call_tool(
        "book_shipment", {"order_id": env.order_id, "warehouse_id": wid, "service": service}
    )
    tracking = booked.split("Tracking number ")[1].rstrip(".")
    assert not env.check_answer(tracking)
    rebook = {"order_id": env.order_id, "warehouse_id": best_wid, "service": best_service}
    assert "already booked" in env.call_tool("book_shipment", rebook)
    assert "Cancelled" in env.call_tool("cancel_shipment", {"tracking_number": tracking})
    booked = env.call_tool("book_shipment", rebook)
    assert won(env.step(answer_action(booked.split("Tracking number ")[1].rstrip("."))))


# -- company_directory (data retrieval) ---------------------------------------------------------------------
def test_directory_namesake_in_another_department_is_the_wrong_person() -> None:
    env = first_seed("company_directory", 2, lambda e: e.chain[0][0] == "search_employees")
    search, _, boss_lookup = env.chain
    hits = env.call_tool("search_employees", {"query": search[2]})
    assert len(hits.splitlines()) >= 2
    right = boss_lookup[2]
    twin = next(e for e, r in env.emps.items() if r["name"] == search[2] and e != env.chain[1][2])
    twin_boss = env.emps[twin]["manager"]
    env.call_tool("get_employee", {"employee_id": twin_boss})
    assert twin_boss != right
    assert not env.check_answer(env.emps[twin_boss]["email"])


def test_directory_extension_is_accepted_with_or_without_the_x() -> None:
    env = first_seed("company_directory", 0, lambda e: e.field == "ext")
    play(env, env.solution()[:-1])
    assert env.check_answer(env.expected)
    assert env.check_answer(env.expected.lstrip("x"))


# -- inventory_count (state modification) -------------------------------------------------------------------
def test_inventory_right_quantities_with_the_wrong_reason_fail() -> None:
    env = make("inventory_count")
    env.reset(seed=2, options={"difficulty": 0})
    actions = [a.replace('"cycle_count"', '"received"') for a in env.solution()]
    assert actions != env.solution()
    result = play(env, actions)
    assert not won(result)
    assert all(env.parts[p]["qty"] == target for p, (target, _) in env.targets.items())


def test_inventory_touching_an_uncounted_part_fails_and_zero_deltas_are_refused() -> None:
    env = make("inventory_count")
    env.reset(seed=3, options={"difficulty": 1})
    other = next(p for p in env.parts if p not in env.targets and env.parts[p]["qty"] > 0)
    plan = env.solution()
    assert "non-zero" in env.call_tool(
        "adjust_stock", {"part_number": other, "delta": 0, "reason": "damaged"}
    )
    env.call_tool("adjust_stock", {"part_number": other, "delta": -1, "reason": "damaged"})
    assert not won(play(env, plan))


# -- payment_batch (error recovery) -------------------------------------------------------------------------
def _ambiguous_batch() -> Any:
    return first_seed("payment_batch", 1, lambda e: any("504-done" in f for f in e.faults.values()))


def test_payments_blind_retry_after_a_timeout_pays_twice_and_loses() -> None:
    env = _ambiguous_batch()
    blind = [a for a in env.solution() if "list_payments" not in a]
    ledger_checks = len(env.solution()) - len(blind)
    inv = next(i for i, f in env.faults.items() if "504-done" in f)
    retry = next(a for a in blind if "send_payment" in a and inv in a)
    blind.insert(blind.index(retry) + 1, retry)
    assert ledger_checks == 1
    result = play(env, [*blind[:-2], tool_call_action("get_balance")])
    balance = result[0].split(": ")[1].split()[0]
    assert not won(env.step(answer_action(balance)))
    assert sum(p["reference"] == inv and p["status"] == "executed" for p in env.payments.values()) == 2


def test_payments_voiding_the_duplicate_recovers() -> None:
    env = _ambiguous_batch()
    inv = next(i for i, f in env.faults.items() if "504-done" in f)
    plan = [a for a in env.solution() if "list_payments" not in a]
    retry = next(a for a in plan if "send_payment" in a and inv in a)
    plan.insert(plan.index(retry) + 1, retry)
    play(env, plan[:-2])
    duplicate = [pid for pid, p in env.payments.items() if p["reference"] == inv][-1]
    assert "Voided" in env.call_tool("void_payment", {"payment_id": duplicate})
    balance = env.call_tool("get_balance", {}).split(": ")[1].split()[0]
    assert won(env.step(answer_action(balance)))


def test_payments_closed_account_is_refused_without_moving_money() -> None:
    env = make("payment_batch")
    env.reset(seed=0, options={"difficulty": 2})
    (closed,) = env.closed
    before = env.balance
    out = env.call_tool("send_payment", {"to_account": closed, "amount": 10.0, "reference": env.batch[0]})
    assert out.startswith("Error 422")
    assert env.balance == before
    assert env.payments == {}


# -- greenhouse_control (tool selection) --------------------------------------------------------------------
def test_greenhouse_scheduling_instead_of_watering_now_fails() -> None:
    env = first_seed("greenhouse_control", 1, lambda e: any(f == "irrigation" for _, f in e.targets))
    actions = [
        a.replace('"irrigate_now"', '"schedule_irrigation"').replace("}}", ', "hour": 6}}')
        if "irrigate_now" in a
        else a
        for a in env.solution()
    ]
    assert not won(play(env, actions))
    assert env.schedule


def test_greenhouse_preset_side_effects_fail() -> None:
    env = make("greenhouse_control")
    env.reset(seed=4, options={"difficulty": 0})
    plan = env.solution()
    zone = env.asked[0]
    env.call_tool("apply_preset", {"zone": zone, "preset": "heatwave"})
    assert not won(play(env, plan))


# -- release_pipeline (multi-step workflows) ----------------------------------------------------------------
def test_release_steps_out_of_order_are_refused_with_the_missing_step() -> None:
    env = make("release_pipeline")
    env.reset(seed=1, options={"difficulty": 1})
    red = env.commits[0]["sha"]
    assert "run the tests first" in env.call_tool("build_artifact", {"commit": red})
    env.call_tool("run_tests", {"commit": red})
    assert "tests failed" in env.call_tool("build_artifact", {"commit": red})
    env.call_tool("run_tests", {"commit": env.candidate})
    built = env.call_tool("build_artifact", {"commit": env.candidate})
    artifact = built.split()[2]
    assert "smoke test" in env.call_tool("deploy", {"artifact_id": artifact, "environment": "production"})


def test_release_with_the_wrong_version_bump_cannot_win() -> None:
    env = make("release_pipeline")
    env.reset(seed=6, options={"difficulty": 1})
    major, minor, patch = (int(x) for x in env.latest[1:].split("."))
    bumps = {
        "major": f"v{major + 1}.0.0",
        "minor": f"v{major}.{minor + 1}.0",
        "patch": f"v{major}.{minor}.{patch + 1}",
    }
    assert bumps[env.bump_part] == env.version
    wrong = next(v for part, v in bumps.items() if part != env.bump_part)
    actions = [a.replace(env.version, wrong) for a in env.solution()]
    assert not won(play(env, actions))
