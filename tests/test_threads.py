"""torch's thread count: ``--model.threads``, or the cores that are free (spade.backends.threads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade.backends import threads
from spade.backends.threads import ThreadChoice, choose, usable_cores
from spade.config import CPU_TINY, ModelConfig, TrainConfig
from spade.run import components


@pytest.mark.parametrize(
    ("load", "want"),
    [
        (0.1, ThreadChoice(2, 2, 0, "free cores")),  # a quiet machine: torch's old default, one per core
        (1.2, ThreadChoice(1, 2, 1, "free cores")),  # one busy process: its core is left to it
        (7.9, ThreadChoice(1, 2, 2, "free cores")),  # every core busy: still one thread
        (None, ThreadChoice(1, 2, 0, "no load reading")),
    ],
)
def test_the_threads_are_the_cores_left_free(load: float | None, want: ThreadChoice) -> None:
    assert choose(0, cores=2, load=load) == want


def test_a_count_the_user_gave_is_taken_as_it_is() -> None:
    assert choose(3, cores=2, load=1.9, omp="1") == ThreadChoice(3, 2, 0, "--model.threads")
    assert choose(0, cores=2, load=1.9, omp="2") == ThreadChoice(2, 2, 0, "OMP_NUM_THREADS")
    assert choose(0, cores=2, load=1.9, omp="").source == "free cores"  # set but empty: not a count


def test_the_console_line_says_what_the_choice_came_from() -> None:
    assert choose(0, cores=2, load=1.0).line() == "torch threads: 1 (2 cores, 1 busy)"
    assert choose(1, cores=2, load=None).line() == "torch threads: 1 (--model.threads)"


def test_the_ranks_of_a_launch_share_this_nodes_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    alone = usable_cores()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert usable_cores() == max(1, alone // 2)


def _no_model(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("no model here")


def test_a_run_says_its_thread_count_before_the_model_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The choice is made once per process and printed first; the model's start is the next line."""
    import torch  # noqa: PLC0415

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "_CHOSEN", [])
    monkeypatch.setattr(threads, "load_average", lambda: 99.0)  # every core busy
    monkeypatch.setattr(components, "make_policy", _no_model)
    before = torch.get_num_threads()
    seen: list[str] = []
    cfg = TrainConfig(runs_dir=tmp_path, model=ModelConfig(backend="hf"), designer=CPU_TINY.designer)
    try:
        starting = components.make_components(cfg, None, None, progress=seen.append)  # type: ignore[arg-type]
        with pytest.raises(RuntimeError, match="no model here"):
            starting.__enter__()
        assert seen[0] == f"torch threads: 1 ({usable_cores()} cores, {usable_cores()} busy)"
        assert seen[1].startswith("starting the model (hf engine, embedded)")
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
