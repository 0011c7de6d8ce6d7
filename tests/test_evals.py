"""Held-out evaluation without a model: statistics, suites with test doubles and the scripted solver, results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from spade import envs
from spade.config import ConfigError, EvalConfig, EvalOptions, TrainConfig, preset
from spade.envs import variants
from spade.evals import rg
from spade.evals.base import EVAL_SEED_BASE, EvalError, ItemResult, eval_seed
from spade.evals.chat import Verdict, chat_episode
from spade.evals.compare import compare_paths
from spade.evals.intrain import eval_options
from spade.evals.policies import PolicySource
from spade.evals.registry import SUITES, make_suite
from spade.evals.results import read_results, write_results
from spade.evals.runner import SuiteRequest, evaluate
from spade.evals.stats import bootstrap_ci, paired_diff, summarise
from spade.run.preflight import check_names
from spade.scripted.policy import ByteTemplate, ScriptedPolicy
from spade.types import Completion, SamplingParams, status_words

DATA = Path(__file__).parent / "eval_data"
FIXTURES = Path(__file__).parents[1] / "src" / "spade" / "envs" / "official_fixtures"


class Replies:
    """A policy double: replies from ``answer(prompt_text)``, byte tokens."""

    def __init__(self, answer: Any) -> None:
        self.template = ByteTemplate()
        self.answer = answer
        self.prompts: list[str] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        out = []
        for p in prompts:
            text = self.template.decode(p)
            self.prompts.append(text)
            reply = self.answer(text)
            out.append(Completion(reply, tuple(reply.encode()), (), "stop"))
        return out

    def load_weights(self, path: Path) -> None:
        raise NotImplementedError


# -- statistics ----------------------------------------------------------------------------------------------


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 0.0, 1.0]
    lo, hi = bootstrap_ci(values)
    assert lo < sum(values) / len(values) < hi
    assert lo >= 0.0
    assert hi <= 1.0
    assert bootstrap_ci(values) == (lo, hi)
    assert bootstrap_ci([0.25, 0.25]) == (0.25, 0.25)
    assert bootstrap_ci([]) == (0.0, 0.0)


def test_summary_has_categories_tasks_and_says_when_it_measures_nothing() -> None:
    items = [ItemResult("s", f"a/{i}", "math", (1.0, 0.0), {"task": "a"}) for i in range(3)] + [
        ItemResult("s", "b/0", "logic", (0.0, 0.0), {"task": "b", "errors": 1})
    ]
    summary = summarise("s", items)
    assert summary.total.n == 8
    assert summary.total.items == 4
    assert summary.total.score == pytest.approx(0.375)
    assert set(summary.by_category) == {"math", "logic"}
    assert summary.by_task["a"].score == pytest.approx(0.5)
    assert summary.errors == 1
    assert not summary.measures_nothing
    assert summarise("s", [ItemResult("s", "x", "c", (0.0,))]).measures_nothing
    as_json = summary.to_dict()
    assert {"suite", "n", "score", "ci95", "by_category"} <= set(as_json)
    assert as_json["measures"] == {}  # no item carries a secondary score


def test_a_secondary_per_episode_score_is_summarised_beside_the_primary() -> None:
    """ACEBench's process accuracy was kept per item only: the summary and --json left it out."""
    items = [
        ItemResult("s", "a", "c", (0.0, 1.0), {"process": [0.5, 1.0]}),
        ItemResult("s", "b", "c", (0.0,), {"process": [0.25]}),
        ItemResult("s", "c", "c", (1.0,)),  # not run by the measure's scorer: left out of it
    ]
    process = summarise("s", items).measures["process"]
    assert (process.n, process.items) == (3, 2)
    assert process.score == pytest.approx((0.75 + 0.25) / 2)
    assert process.ci95[0] <= process.score <= process.ci95[1]
    assert summarise("s", items).to_dict()["measures"]["process"]["items"] == 2


def test_paired_difference_uses_only_common_items() -> None:
    a = {"x": (0.0,), "y": (1.0,), "z": (0.0,), "only_a": (1.0,)}
    b = {"x": (1.0,), "y": (1.0,), "z": (1.0,), "only_b": (0.0,)}
    d = paired_diff(a, b)
    assert d.paired == 3
    assert d.diff == pytest.approx(2 / 3)
    assert d.ci95[0] <= d.diff <= d.ci95[1]


def test_episode_noise_widens_the_interval_of_few_items() -> None:
    """Two items, 8 episodes each: the interval must reflect the episodes' spread, not only the items'."""
    a = {"x": (1.0, 0.0) * 4, "y": (1.0, 0.0, 0.0, 0.0) * 2}
    b = {"x": (1.0, 1.0, 1.0, 0.0) * 2, "y": (1.0, 0.0) * 4}
    d = paired_diff(a, b)
    assert d.diff == pytest.approx(0.25)
    assert d.ci95[0] < 0.0 < d.ci95[1]  # 2 items x 8 episodes cannot show a 0.25 gain with confidence
    single = summarise("s", [ItemResult("s", k, "c", v) for k, v in a.items()]).total
    assert single.ci95[0] < 0.375 < single.ci95[1]
    assert single.ci95[1] - single.ci95[0] > 0.2


def test_evaluation_seeds_are_disjoint_from_training_seeds() -> None:
    seeds = [eval_seed(s, "suite", i, e) for s in range(3) for i in range(50) for e in range(3)]
    assert all(EVAL_SEED_BASE <= x < 2**32 for x in seeds)
    assert len(set(seeds)) == len(seeds)


# -- registry ------------------------------------------------------------------------------------------------


def test_registry_names_every_suite_and_rejects_unknown_ones() -> None:
    assert SUITES["bfcl"] == "spade.evals.bfcl:BFCLSuite"
    assert SUITES["code"] == "spade.evals.code:HumanEvalSuite"
    assert {"envs", "reasoning_gym", "math"} <= set(SUITES)
    with pytest.raises(EvalError, match="unknown suite 'nope'; choose from: envs"):
        make_suite("nope")


def test_a_missing_optional_package_is_an_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "needs_missing_pkg.py").write_text("import surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(SUITES, "needy", "needs_missing_pkg:Suite")
    with pytest.raises(EvalError, match=r"needs the package 'surely_not_installed_pkg': install"):
        make_suite("needy")


def test_train_config_checks_eval_suites_and_counts() -> None:
    assert TrainConfig(eval=EvalConfig(every=3, suites=("math:chain_sum", "envs"))).eval.every == 3
    with pytest.raises(ConfigError, match=r"eval.suites \['mystery'\] are unknown; choose from: envs"):
        check_names(TrainConfig(eval=EvalConfig(suites=("mystery",))))
    with pytest.raises(ConfigError, match=r"eval\.every must be >= 0"):
        TrainConfig(eval=EvalConfig(every=-1))


# -- Reasoning-Gym -------------------------------------------------------------------------------------------


def test_the_shipped_hard_table_is_the_papers_100_tasks() -> None:
    table = rg.hard_table()
    assert "2505.24760" in table["source"]
    cats = [v["category"] for v in table["tasks"].values()]
    assert {c: cats.count(c) for c in set(cats)} == {
        "math": 31,
        "algorithmic": 36,
        "cognition": 24,
        "logic": 9,
    }
    assert (
        rg.task_config("basic_arithmetic", {"preset": "hard"})
        == table["tasks"]["basic_arithmetic"]["hard_config"]
    )


def test_task_parameters_presets_and_overrides() -> None:
    assert rg.task_config("chain_sum", {}) == {}
    assert rg.task_config("chain_sum", {"preset": "easy"})["max_terms"] == 2
    over = rg.task_config("chain_sum", {"preset": "easy", "max_digits": 2, "leg_counting.max_animals": 9})
    assert over["max_digits"] == 2
    assert "max_animals" not in over
    assert rg.task_config("leg_counting", {"leg_counting.max_animals": 9})["max_animals"] == 9
    with pytest.raises(EvalError, match="no easy preset for task 'arc_1d'"):
        rg.task_config("arc_1d", {"preset": "easy"})
    with pytest.raises(EvalError, match="unknown preset 'medium'"):
        rg.task_config("arc_1d", {"preset": "medium"})


def test_bad_task_names_and_parameters_fail_before_any_episode() -> None:
    suite = make_suite("reasoning_gym")
    check = suite.check  # type: ignore[attr-defined]
    with pytest.raises(EvalError, match="did you mean basic_arithmetic"):
        check(EvalOptions(tasks=("basic_arithmetc",)))
    with pytest.raises(EvalError, match="rejects parameters"):
        check(EvalOptions(tasks=("chain_sum",), params={"no_such_field": 1}))
    with pytest.raises(EvalError, match="rejects parameters"):
        check(EvalOptions(tasks=("chain_sum",), params={"min_terms": 5, "max_terms": 2}))


def _oracle(tasks: Sequence[str], opts: EvalOptions, suite: str = "reasoning_gym") -> dict[str, str]:
    """question -> expected answer for the items (and few-shot examples) the suite will draw."""
    answers = {}
    for name in tasks:
        task = rg.Task(name, "", rg.task_config(name, opts.params))
        seed = eval_seed(opts.seed, suite, name)
        for s, n in ((seed, opts.limit or rg.DEFAULT_ITEMS), (seed + rg.FEWSHOT_SHIFT, opts.fewshot)):
            data = rg.make_dataset(task, s, max(n, 1))
            answers.update({data[i]["question"]: data[i]["answer"] for i in range(n)})
    return answers


def _last_question(prompt: str, answers: dict[str, str]) -> str:
    """The last known question in the prompt ('' for the runner's one-token preflight request)."""
    return max((q for q in answers if q in prompt), key=prompt.rindex, default="")


def test_reasoning_gym_suite_scores_with_the_package_scorer_and_retries_after_feedback() -> None:
    opts = EvalOptions(episodes=2, limit=3, tasks=("chain_sum", "leg_counting"), params={"preset": "easy"})
    answers = _oracle(opts.tasks, opts)

    def second_try_right(prompt: str) -> str:
        if rg.FEEDBACK_WRONG in prompt or rg.FEEDBACK_UNTAGGED in prompt:
            return f"Let me redo it. <answer>{answers.get(_last_question(prompt, answers))}</answer>"
        return "<answer>-12345</answer>"

    reports = evaluate([SuiteRequest("reasoning_gym", opts)], Replies(second_try_right))
    summary = reports[0].summary
    assert summary.total.score == 1.0
    assert summary.total.n == 12
    assert summary.total.items == 6
    assert set(summary.by_task) == {"chain_sum", "leg_counting"}
    assert set(summary.by_category) == {"math"}
    episode = reports[0].items[0].detail["episodes"][0]
    assert [t["score"] for t in episode["turns"]] == [0.0, 1.0]
    one_try = evaluate([SuiteRequest("reasoning_gym", opts.__class__(**{**_fields(opts), "max_turns": 1}))],
                       Replies(second_try_right))  # fmt: skip
    assert one_try[0].summary.total.score == 0.0
    assert one_try[0].summary.measures_nothing


def _fields(opts: EvalOptions) -> dict[str, Any]:
    return {f: getattr(opts, f) for f in opts.__dataclass_fields__}


def test_fewshot_examples_come_before_the_item_from_disjoint_seeds() -> None:
    opts = EvalOptions(limit=4, fewshot=2, tasks=("basic_arithmetic",), params={"preset": "easy"})
    answers = _oracle(opts.tasks, opts, suite="math")
    policy = Replies(lambda prompt: f"<answer>{answers.get(_last_question(prompt, answers))}</answer>")
    report = evaluate([SuiteRequest("math", opts)], policy)[0]
    assert report.summary.total.score == 1.0
    detail = report.items[0].detail
    scored = {r.detail["instance_seed"] for r in report.items}
    assert len(detail["fewshot_seeds"]) == 2
    assert not scored & set(detail["fewshot_seeds"])
    assert policy.prompts[1].count("<|user|>") == 3
    assert policy.prompts[1].count("<|assistant|><answer>") == 2
    assert report.items[0].category == "basic_arithmetic"


def test_chat_episode_records_a_model_failure_as_data() -> None:
    class Failing(Replies):
        async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
            return [Completion("", (), (), "error", error="server down")]

    episode = asyncio.run(
        chat_episode(
            Failing(str), [{"role": "user", "content": "q"}], SamplingParams(), lambda r: Verdict(0, None), 2
        )
    )
    assert episode.score == 0.0
    assert episode.error == "server down"


# -- environments --------------------------------------------------------------------------------------------


def test_scripted_solver_wins_every_seed_environment() -> None:
    report = evaluate(["envs"], PolicySource(kind="solver"), opts=EvalOptions(episodes=2))[0]
    assert report.summary.total.score == 1.0
    assert report.summary.total.items == len(envs.names())
    assert report.summary.errors == 0


def test_envs_suite_plays_files_and_official_folders_with_a_policy() -> None:
    opts = EvalOptions(episodes=4, tasks=(str(DATA), str(FIXTURES / "game_coin_weighing.py")))
    report = evaluate(["envs"], ScriptedPolicy(skill=0.5), opts=opts)[0]
    by_task = report.summary.by_task
    assert set(by_task) == {"quiz_one", "quiz_two", "game_coin_weighing"}
    assert 0.0 < by_task["quiz_one"].score <= 1.0  # the scripted agent answers right half the time
    assert by_task["game_coin_weighing"].score == 0.0  # it cannot play this game at all
    solved = evaluate(["envs"], PolicySource(kind="solver"), opts=opts)[0]
    assert solved.summary.by_task["quiz_two"].score == 1.0
    episodes = [e for item in (*report.items, *solved.items) for e in item.detail["episodes"]]
    assert {e["status"] for e in episodes} >= {"terminated"}
    for e in episodes:  # the record keeps the code and says in words how the episode ended
        assert e["ended"] == status_words(e["status"]) != e["status"]


def test_envs_suite_rejects_what_does_not_exist() -> None:
    with pytest.raises(EvalError, match="neither a registered environment"):
        evaluate(["envs:no_such_env"], PolicySource(kind="solver"))
    with pytest.raises(EvalError, match="only plays environments"):
        evaluate(["envs", "math"], PolicySource(kind="solver"))


def test_lock_variants_are_26_unseen_sizes_each_won_by_its_own_solution() -> None:
    from spade.envs.library.combination_lock import LEVELS  # noqa: PLC0415

    levels = variants.lock_levels()
    assert len(levels) == 26
    assert not set(levels) & set(LEVELS)  # held out: no level the seed game has
    assert all(
        turns == dials * top.bit_length() for dials, top, turns in levels
    )  # binary search's worst case
    opts = EvalOptions(episodes=2, tasks=("variants:combination_lock",))
    report = evaluate(["envs"], PolicySource(kind="solver"), opts=opts)[0]
    assert report.summary.total.items == 26
    assert report.summary.total.score == 1.0  # every variant loads in the sandbox and its solution wins
    source = dict(variants.family("combination_lock"))["combination_lock_d1_t6"]
    assert "LEVELS: tuple[tuple[int, int, int], ...] = ((1, 6, 3),) * 4" in source
    with pytest.raises(EvalError, match="no variants of 'sokoban'"):
        evaluate(["envs:variants:sokoban"], PolicySource(kind="solver"))


def test_in_training_envs_are_played_as_training_plays() -> None:
    cfg = preset("cpu-tiny")
    opts = eval_options(cfg.eval, "envs", ("variants:combination_lock",), cfg.play)
    assert opts.max_tokens == cfg.play.turn_tokens
    assert opts.params == {"context_tokens": cfg.play.context_tokens, "action_mode": cfg.play.action_mode,
                           "on_length": cfg.play.on_length, "demos": cfg.play.demos}  # fmt: skip
    rg_opts = eval_options(cfg.eval, "reasoning_gym", (), cfg.play)
    assert rg_opts.max_tokens == cfg.eval.max_tokens
    assert "action_mode" not in rg_opts.params


# -- results and comparisons ---------------------------------------------------------------------------------


def _items(scores: dict[str, float], suite: str = "s") -> list[ItemResult]:
    return [ItemResult(suite, k, "c" + k[-1], (v,), {"task": "t"}) for k, v in scores.items()]


def test_results_folder_round_trip_and_nothing_half_written(tmp_path: Path) -> None:
    out = tmp_path / "res"
    write_results(out, {"suites": [{"suite": "s"}]}, {"s": _items({"a1": 1.0, "b2": 0.0})}, overwrite=False)
    back = read_results(out)
    assert back.items["s"]["a1"].scores == (1.0,)
    with pytest.raises(EvalError, match="already exists"):
        write_results(out, {}, {}, overwrite=False)
    bad = [ItemResult("s", "x", "c", (1.0,), {"obj": object()})]
    with pytest.raises(TypeError):
        write_results(tmp_path / "broken", {"suites": []}, {"s": bad}, overwrite=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_compare_pairs_items_and_reports_the_difference(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_results(
        a, {"suites": [{"suite": "s"}]}, {"s": _items({"i1": 0.0, "i2": 0.0, "i3": 1.0})}, overwrite=False
    )
    write_results(
        b, {"suites": [{"suite": "s"}]}, {"s": _items({"i1": 1.0, "i2": 1.0, "i3": 1.0})}, overwrite=False
    )
    (c,) = compare_paths([a, b])
    assert c.total.paired == 3
    assert c.total.diff == pytest.approx(2 / 3)
    assert set(c.by_category) == {"c1", "c2", "c3"}
    assert json.loads(json.dumps(c.to_dict()))["suite"] == "s"
    with pytest.raises(EvalError, match="at least two"):
        compare_paths([a])
    with pytest.raises(EvalError, match="neither an evaluation results folder nor a run"):
        compare_paths([a, tmp_path / "nothing"])
