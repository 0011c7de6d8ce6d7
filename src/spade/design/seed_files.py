"""Seed environments of one's own: ``designer.seeds`` entries that name a file or a folder of files.

An entry of ``designer.seeds`` is a library seed's name (``spade envs``) or ``PATH[:SKILL]``: an environment
file (native or official format) or a folder of them (its ``*.py``, sorted). A file's skill is ``SKILL`` when
given, else the file's own ``skill = "..."`` (a native environment's class attribute), read from the text
without running it. The files are archived as seeds beside the library's (env ids ``seed:<file stem>``), so
self-play starts from them; like every archived environment they are played in the sandbox. They are read
when the run starts; ``spade check FILE`` runs the validation ladder on one beforehand.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spade.config import ConfigError, DesignerConfig
from spade.config.skills import skills_for
from spade.memory.archive import seed_sources
from spade.pyast import parse_module
from spade.types import EnvSource

_SKILL_SUFFIX = re.compile(r"(.+):([a-z_]+)")


@dataclass(frozen=True, slots=True)
class SeedFile:
    """One environment file given as a seed, with its skill."""

    path: Path
    skill: str

    @property
    def env_id(self) -> str:
        """Its id in the archive."""
        return f"seed:{self.path.stem}"

    def source(self) -> EnvSource:
        """The file as an archive source (created at step 0)."""
        return EnvSource(code=self.path.read_text(encoding="utf-8"), skill=self.skill, env_id=self.env_id)


def is_file_entry(entry: str) -> bool:
    """Whether a ``designer.seeds`` entry that is no library seed's name names a file or folder."""
    path = _split(entry)[0]
    return "/" in path or path.endswith(".py") or Path(path).expanduser().exists()


def seed_files(entries: Sequence[str], d: DesignerConfig) -> list[SeedFile]:
    """The environment files the file entries of ``designer.seeds`` name, each with its skill.

    Raises:
        ConfigError: a path that is missing or holds no ``*.py``, a file that cannot be read or parsed, a file
            with no skill (none declared or given), a skill outside ``designer.skills`` (or the setting's
            skills), or two files of one stem (their ids would collide).
    """
    allowed = (
        list(d.skills or skills_for(d.setting)),
        "designer.skills" if d.skills else f"the {d.setting} skills",
    )
    files = [_seed_file(path, skill, entry, allowed) for entry in entries for path, skill in _paths(entry)]
    stems = [f.path.stem for f in files]
    twice = sorted({s for s in stems if stems.count(s) > 1})
    _require(
        not twice, f"designer.seeds: two files named {twice} (their archive ids would be one): rename one"
    )
    return files


def _split(entry: str) -> tuple[str, str]:
    """``PATH[:SKILL]`` as the path and the skill given ('' if none)."""
    match = _SKILL_SUFFIX.fullmatch(entry)
    return (match[1], match[2]) if match else (entry, "")


def _paths(entry: str) -> list[tuple[Path, str]]:
    text, skill = _split(entry)
    path = Path(text).expanduser()
    _require(
        path.exists(), f"designer.seeds: {path} does not exist: give an environment file or a folder of them"
    )
    if not path.is_dir():
        return [(path, skill)]
    files = sorted(path.glob("*.py"))
    _require(bool(files), f"designer.seeds: the folder {path} holds no environment files (*.py)")
    return [(f, skill) for f in files]


def _seed_file(path: Path, given: str, entry: str, allowed: tuple[list[str], str]) -> SeedFile:
    skills, which = allowed
    try:
        tree = parse_module(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"designer.seeds: cannot read {path} ({exc}): give an environment file") from None
    except SyntaxError as exc:
        raise ConfigError(
            f"designer.seeds: {path} does not parse (line {exc.lineno}: {exc.msg}): fix it (`spade check {path}` "
            "runs every check)"
        ) from None
    skill = given or declared_skill(tree)
    _require(
        bool(skill),
        f'designer.seeds: {path} declares no skill (no `skill = "..."` in it): give it as {entry}:SKILL, SKILL '
        f"one of {', '.join(skills)}",
    )
    _require(
        skill in skills,
        f"designer.seeds: {path} is a {skill!r} environment, not one of {which} ({', '.join(skills)}): give "
        f"the skill it trains as {_split(entry)[0]}:SKILL, or choose other --designer.skills",
    )
    return SeedFile(path, skill)


def declared_skill(tree: ast.Module) -> str:
    """The string of the first ``skill = "..."`` (or ``skill: str = "..."``) at module or class level."""
    bodies = [tree.body, *(n.body for n in tree.body if isinstance(n, ast.ClassDef))]
    for node in (n for body in bodies for n in body):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == "skill" for t in targets)
        if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return ""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def designer_seed_sources(d: DesignerConfig) -> list[EnvSource]:
    """The seeds the archive starts from: the library seeds ``designer.seeds`` names and its files (none
    named: every library seed of ``designer.skills``; only files: those alone)."""
    from spade import envs  # noqa: PLC0415 - imports the whole seed library; only needed for a warm start

    library = set(envs.names(d.setting))
    names = [s for s in d.seeds if s in library]
    files = seed_files([s for s in d.seeds if s not in library], d)
    chosen = seed_sources(d.setting, d.skills, names) if names or not files else []
    return [*chosen, *(f.source() for f in files)]
