"""Where the vllm engine's OpenMP threads run: the binding is set for the engine's start only."""

from __future__ import annotations

import os

import pytest

from spade.backends.vllm_start import BIND_VAR, cpu_binding


@pytest.fixture(autouse=True)
def _no_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BIND_VAR, raising=False)


def test_all_binds_every_core_this_process_may_use_during_the_start_only() -> None:
    cores = sorted(os.sched_getaffinity(0))
    with cpu_binding("all"):
        assert [int(c) for c in os.environ[BIND_VAR].split(",")] == cores
    assert BIND_VAR not in os.environ


def test_a_core_list_is_passed_as_given_and_the_users_own_binding_comes_back() -> None:
    os.environ[BIND_VAR] = "1"
    with cpu_binding("0-3"):
        assert os.environ[BIND_VAR] == "0-3"
    assert os.environ[BIND_VAR] == "1"


def test_auto_leaves_the_environment_alone() -> None:
    os.environ[BIND_VAR] = "nobind"
    with cpu_binding("auto"):
        assert os.environ[BIND_VAR] == "nobind"
    assert os.environ[BIND_VAR] == "nobind"


def test_the_binding_is_restored_when_the_start_fails() -> None:
    with pytest.raises(RuntimeError), cpu_binding("all"):
        raise RuntimeError("engine failed to start")
    assert BIND_VAR not in os.environ
