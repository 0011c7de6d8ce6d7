"""BFCL v4 data and checkers from the installed ``bfcl-eval`` package (installed with ``--no-deps``).

What imports without the package's ~90 optional dependencies (checked with bfcl-eval 2026.3.23):

- ``bfcl_eval.utils`` and ``bfcl_eval.constants.*`` (except ``model_config``): the data loading helpers
  (:func:`load_category` uses ``load_file``, ``populate_test_cases_with_predefined_functions`` and
  ``add_language_specific_hint_to_function_doc``, exactly as BFCL's ``load_dataset_entry`` does) and the
  category lists;
- ``bfcl_eval.eval_checker.multi_turn_eval`` (the multi-turn checker, its executor and the simulated API
  classes): imported only inside the sandbox (:mod:`spade.evals.bfcl_host`), never here.

What does not: ``bfcl_eval.eval_checker.ast_eval.ast_checker`` imports ``bfcl_eval.constants.model_config``,
which imports every model handler and with them tree-sitter, tenacity and the vendors' SDKs. The checker
itself uses that module for one thing: ``MODEL_CONFIG_MAPPING[model].underscore_to_dot`` (whether the model
saw ``.`` in function names replaced by ``_``). :func:`ast_checker` therefore executes the package's own
``ast_checker.py`` as a private module (never registered under its real name) with ``model_config`` stood in
for, during that import only, by a two-entry mapping for our two modes (:data:`MODEL_NAMES`). The checking
code is the package's, unchanged.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.evals.base import EvalError

INSTALL_HINT = "pip install --no-deps bfcl-eval==2026.3.23 (or `make setup`)"
MODEL_NAMES = {"fc": "spade-fc", "prompt": "spade-prompt"}
"""The model name the checkers see per mode; the ``fc`` one has ``underscore_to_dot`` set."""

SINGLE_TURN = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
"""Single-turn categories with Python function docs (BFCL v4 names ``simple`` as ``simple_python``)."""
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
KNOWN = SINGLE_TURN + MULTI_TURN
DEFAULT = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "multi_turn_base")
"""Selected when ``opts.tasks`` is empty (each capped by ``opts.limit`` or ``params['default_limit']``)."""
UNSUPPORTED = {
    "simple_java": "needs bfcl-eval's tree-sitter Java parser (an optional dependency we do not install)",
    "simple_javascript": "needs bfcl-eval's tree-sitter JavaScript parser (an optional dependency)",
    "memory_kv": "the memory categories need vector stores and prerequisite conversations",
    "memory_vector": "the memory categories need vector stores and prerequisite conversations",
    "memory_rec_sum": "the memory categories need vector stores and prerequisite conversations",
    "web_search_base": "the web-search categories need network access",
    "web_search_no_snippet": "the web-search categories need network access",
    "format_sensitivity": "format_sensitivity is not a scoring category",
}


@dataclass(frozen=True, slots=True)
class Item:
    """One BFCL entry with its ground truth (empty for the relevance categories)."""

    category: str
    entry: dict[str, Any]
    ground_truth: Any

    @property
    def id(self) -> str:
        """The entry id (``simple_python_0``), stable across runs."""
        return str(self.entry["id"])

    @property
    def multi_turn(self) -> bool:
        """Whether the entry is a multi-turn conversation executed against the simulated APIs."""
        return self.category.startswith("multi_turn")


def package(name: str) -> Any:
    """Import ``name`` from bfcl-eval; EvalError saying what to install when it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise EvalError(f"the bfcl suite needs the bfcl-eval package ({exc}): {INSTALL_HINT}") from exc


def check_categories(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` (de-duplicated, in order); EvalError for an unknown or unsupported one."""
    for name in names:
        if name in UNSUPPORTED:
            raise EvalError(f"bfcl category {name!r} is not supported: {UNSUPPORTED[name]}")
        if name not in KNOWN:
            hint = " (BFCL v4 calls it 'simple_python')" if name == "simple" else ""
            raise EvalError(f"unknown bfcl category {name!r}{hint}; known: {', '.join(KNOWN)}")
    return tuple(dict.fromkeys(names))


def load_category(category: str) -> list[Item]:
    """Every entry of ``category`` with its ground truth, prepared as BFCL's ``load_dataset_entry`` does."""
    utils = package("bfcl_eval.utils")
    entries = utils.load_file(utils.PROMPT_PATH / f"{utils.VERSION_PREFIX}_{category}.json", use_lock=False)
    entries = utils.populate_test_cases_with_predefined_functions(entries)
    entries = utils.add_language_specific_hint_to_function_doc(entries)
    if "irrelevance" in category or "relevance" in category:
        return [Item(category, e, None) for e in entries]
    answers_path = Path(utils.POSSIBLE_ANSWER_PATH) / f"{utils.VERSION_PREFIX}_{category}.json"
    answers = utils.load_file(answers_path, use_lock=False)
    if len(answers) != len(entries):
        raise EvalError(f"bfcl-eval data for {category!r} is inconsistent; reinstall: {INSTALL_HINT}")
    return [Item(category, e, a["ground_truth"]) for e, a in zip(entries, answers, strict=True)]


def package_helpers() -> Any:
    """``bfcl_eval.utils`` (``is_function_calling_format_output``, ``is_empty_output``, ...)."""
    return package("bfcl_eval.utils")


class _ModelConfig:
    def __init__(self, underscore_to_dot: bool) -> None:
        self.underscore_to_dot = underscore_to_dot


@functools.cache
def _private_ast_checker() -> types.ModuleType:
    spec = importlib.util.find_spec("bfcl_eval.eval_checker.ast_eval.ast_checker")
    if spec is None or spec.origin is None:
        raise EvalError(f"bfcl-eval's AST checker is missing: {INSTALL_HINT}")
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        MODEL_NAMES["fc"].replace("_", "/"): _ModelConfig(True),
        MODEL_NAMES["prompt"].replace("_", "/"): _ModelConfig(False),
    }
    private = importlib.util.spec_from_file_location("spade_bfcl_ast_checker", spec.origin)
    if private is None or private.loader is None:  # pragma: no cover - a file spec always has a loader
        raise EvalError(f"cannot load bfcl-eval's AST checker from {spec.origin}")
    module = importlib.util.module_from_spec(private)
    saved = sys.modules.get(stub.__name__)
    sys.modules[stub.__name__] = stub
    try:
        private.loader.exec_module(module)
    except ImportError as exc:
        raise EvalError(f"bfcl-eval's AST checker does not import ({exc}): {INSTALL_HINT}") from exc
    finally:
        if saved is None:
            sys.modules.pop(stub.__name__, None)
        else:
            sys.modules[stub.__name__] = saved
    return module


def ast_checker() -> Callable[..., dict[str, Any]]:
    """The package's ``ast_checker(func_description, model_output, possible_answer, language, category,
    model_name)`` (see module docstring for how it is imported)."""
    checker: Callable[..., dict[str, Any]] = _private_ast_checker().ast_checker
    return checker


def python_language() -> Any:
    """``bfcl_eval.constants.enums.Language.PYTHON``."""
    return package("bfcl_eval.constants.enums").Language.PYTHON
