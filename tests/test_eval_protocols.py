"""``spade eval --protocol``: the table's values per suite, command-line options over them, the docs' table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
import tyro

from spade.cli.eval import EvalArgs, options, run_eval, suite_options, suite_selections
from spade.config import EvalOptions
from spade.evals.protocols import PROTOCOLS, ProtocolName, explicit_options, table
from spade.evals.registry import SUITES

ROOT = Path(__file__).resolve().parent.parent
AIME = ROOT / "tests" / "fixtures" / "benchdata" / "aime.jsonl"
PAPER_SUITES = ("aime", "gpqa_diamond", "livecodebench", "reasoning_gym", "tau2_bench", "bfcl", "math")


def suites_of(*argv: str) -> dict[str, EvalOptions]:
    """Each suite's options as `spade eval ARGV` would run them."""
    args = tyro.cli(EvalArgs, args=list(argv))
    opts, given = options(args), explicit_options(argv)
    return dict(suite_options(s, opts, args, given) for s in suite_selections(args.suites, opts.tasks))


def sampling(o: EvalOptions) -> tuple[object, ...]:
    return (o.episodes, o.temperature, o.top_p, o.top_k, o.max_tokens, o.max_turns, o.params.get("preset"))


def test_paper_protocol_sets_each_suites_values() -> None:
    got = {name: sampling(o) for name, o in suites_of(*PAPER_SUITES, "--protocol", "paper").items()}
    assert got == {
        "aime": (64, 1.0, 0.95, 0, 32768, 2, None),
        "gpqa_diamond": (8, 0.7, 1.0, 0, 512, 2, None),
        "livecodebench": (1, 0.2, 1.0, 0, 512, 2, None),
        "reasoning_gym": (8, 0.6, 1.0, 0, 8192, 2, "hard"),
        "tau2_bench": (4, 0.0, 1.0, 0, 512, 2, None),
        "bfcl": (1, 0.0, 1.0, 0, 512, 2, None),
        "math": (1, 0.0, 1.0, 0, 512, 2, None),  # not in the table: the command line's options
    }


def test_default_protocol_and_no_protocol_keep_todays_options() -> None:
    plain = suites_of(*PAPER_SUITES, "--temperature", "0.3")
    assert suites_of(*PAPER_SUITES, "--temperature", "0.3", "--protocol", "default") == plain
    assert {sampling(o) for o in plain.values()} == {(1, 0.3, 1.0, 0, 512, 2, None)}


@pytest.mark.parametrize(
    ("argv", "suite", "expected"),
    [
        (("--temperature", "0.5"), "aime", (64, 0.5, 0.95, 0, 32768, 2, None)),
        (("--max-tokens=4096", "--top-k", "20"), "aime", (64, 1.0, 0.95, 20, 4096, 2, None)),
        (("--episodes", "2"), "gpqa_diamond", (2, 0.7, 1.0, 0, 512, 2, None)),
        (("--temperature", "0.0"), "gpqa_diamond", (8, 0.0, 1.0, 0, 512, 2, None)),  # a default, but given
        (("--preset", "easy"), "reasoning_gym", (8, 0.6, 1.0, 0, 8192, 2, "easy")),
        (("--param", "preset=default"), "reasoning_gym", (8, 0.6, 1.0, 0, 8192, 2, "default")),
        (("--max_turns", "1"), "reasoning_gym", (8, 0.6, 1.0, 0, 8192, 1, "hard")),
    ],
)
def test_an_option_on_the_command_line_overrides_the_protocol(
    argv: tuple[str, ...], suite: str, expected: tuple[object, ...]
) -> None:
    assert sampling(suites_of(suite, "--protocol", "paper", *argv)[suite]) == expected


def test_the_table_is_the_one_help_and_docs_show() -> None:
    assert get_args(ProtocolName) == tuple(PROTOCOLS)
    assert all(suite in SUITES for protocol in PROTOCOLS.values() for suite in protocol)
    docs = (ROOT / "docs" / "eval.md").read_text()
    assert "\n".join(table("paper")) in docs, "docs/eval.md's table differs from spade.evals.protocols.table"
    with pytest.raises(SystemExit):
        tyro.cli(EvalArgs, args=["aime", "--protocol", "nope"])


def test_spade_eval_runs_a_suite_under_the_protocol(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["aime", "--data", str(AIME), "--protocol", "paper", "--episodes", "2", "--max-tokens", "64"]
    code = run_eval([*argv, "--model.backend", "scripted", "--json", "--out", str(tmp_path / "r")])
    assert code == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (last["suite"], last["n"]) == ("aime", 8)  # 4 problems x the 2 episodes given
    o = last["options"]
    assert (o["episodes"], o["temperature"], o["top_p"], o["max_tokens"]) == (2, 1.0, 0.95, 64)
