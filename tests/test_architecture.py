"""The package keeps the shape docs/architecture.md describes: scripts/architecture.py's targets hold."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["architecture"] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_every_layout_target_holds_in_a_traced_step() -> None:
    """No import cycle, a config layer at the bottom, one reader of cfg.mode and one reply parser, short files
    and functions, a short loop, and a step (and its design phase) that hands config to few files."""
    arch = _script()
    walks = arch.traced_step()
    out = arch.figures(arch.static(), walks)
    assert arch.unmet(out) == []
    assert out["files the config walks in the design phase"] > 0  # the design window was entered
    assert "spade/run/loop.py" in walks["step"].section_files


def test_a_missed_target_is_reported() -> None:
    arch = _script()
    out = dict.fromkeys(arch.TARGETS, 0)
    out["modules reading cfg.mode"] = out["modules parsing model replies"] = 1
    assert arch.unmet(out) == []
    out["files the config walks in one step"] = 13
    out["modules parsing model replies"] = 0
    assert arch.unmet(out) == [
        "modules parsing model replies: 0 (target 1)",
        "files the config walks in one step: 13 (target <= 12)",
    ]


def test_imports_keep_the_layer_order_type_only_ones_included() -> None:
    """Every import goes to its own layer or one below, but the named exceptions (docs/architecture.md)."""
    arch = _script()
    typed = arch.imports(arch.modules(), type_only=True)
    breaks = {line.split(" (")[0] for line in arch.layer_breaks(typed)}
    assert breaks == {f"{a} -> {b}" for a, b in arch.UP_ALLOWED}


def test_an_import_up_the_order_is_found_under_type_checking_too(tmp_path: Path) -> None:
    arch = _script()
    low, high = tmp_path / "low.py", tmp_path / "high.py"
    low.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from spade.run.loop import train\n"
    )
    high.write_text("")
    mods = {"spade.config.low": low, "spade.run.loop": high}
    assert arch.imports(mods) == []  # not run: no import cycle can come of it
    typed = arch.imports(mods, type_only=True)
    assert arch.layer_breaks(typed) == ["config -> run (spade.config.low:4 imports spade.run.loop)"]
    assert arch.package_cycles(typed) == []


def test_a_package_outside_the_layer_order_is_refused() -> None:
    arch = _script()
    new = arch.Import("spade.newpkg.thing", "spade.config", 1, False)
    with pytest.raises(SystemExit, match=r"newpkg: not in architecture\.LAYERS"):
        arch.layer_breaks([new])
