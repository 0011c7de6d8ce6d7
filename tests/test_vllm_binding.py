"""Where the vllm engine's OpenMP threads run: the binding is set for the engine's start only."""

from __future__ import annotations

import os

import pytest

from spade.backends.vllm_engine import _BIND_VAR, _cpu_binding


@pytest.fixture(autouse=True)
def _no_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_BIND_VAR, raising=False)


def test_all_binds_every_core_this_process_may_use_during_the_start_only() -> None:
    cores = sorted(os.sched_getaffinity(0))
    with _cpu_binding("all"):
        assert [int(c) for c in os.environ[_BIND_VAR].split(",")] == cores
    assert _BIND_VAR not in os.environ


def test_a_core_list_is_passed_as_given_and_the_users_own_binding_comes_back() -> None:
    os.environ[_BIND_VAR] = "1"
    with _cpu_binding("0-3"):
        assert os.environ[_BIND_VAR] == "0-3"
    assert os.environ[_BIND_VAR] == "1"


def test_auto_leaves_the_environment_alone() -> None:
    os.environ[_BIND_VAR] = "nobind"
    with _cpu_binding("auto"):
        assert os.environ[_BIND_VAR] == "nobind"
    assert os.environ[_BIND_VAR] == "nobind"


def test_the_binding_is_restored_when_the_start_fails() -> None:
    with pytest.raises(RuntimeError), _cpu_binding("all"):
        raise RuntimeError("engine failed to start")
    assert _BIND_VAR not in os.environ
