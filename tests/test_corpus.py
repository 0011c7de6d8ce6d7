"""Corpus loading, truncation and resumable sampling."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spade.design.corpus import (
    TRUNCATION_MARKER,
    Corpus,
    CorpusError,
    CorpusSampler,
    SamplerState,
    TokenizerBudget,
    WhitespaceBudget,
    load_corpus,
    load_default,
    truncate,
    truncate_doc,
)
from spade.types import CorpusDoc


def _write_jsonl(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _small(n: int) -> Corpus:
    return Corpus(tuple(CorpusDoc(f"d{i}", "", f"text {i}") for i in range(n)), "test")


# -- loading -----------------------------------------------------------------------------------------------


def test_jsonl_skips_and_counts_bad_lines(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "c.jsonl",
        [
            json.dumps({"text": "alpha", "title": "A"}),
            "{not json",
            json.dumps({"body": "no text key"}),
            json.dumps({"text": "   "}),
            json.dumps({"text": 42}),
            "",
            json.dumps(["a list"]),
            json.dumps({"text": "plain", "orig_doc": "preferred"}),
        ],
    )
    corpus = load_corpus(path)
    assert [(d.doc_id, d.title, d.text) for d in corpus.docs] == [
        ("c.jsonl:1", "A", "alpha"),
        ("c.jsonl:8", "", "preferred"),
    ]
    assert dict(corpus.skipped) == {"bad_json": 1, "missing_text": 2, "empty_text": 1, "not_str": 1}
    m = corpus.metrics()
    assert m["corpus/docs"] == 2.0
    assert m["corpus/skipped_lines"] == 5.0
    assert m["corpus/skipped/bad_json"] == 1.0


def test_orig_doc_null_falls_back_to_text(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "c.jsonl", [json.dumps({"orig_doc": None, "text": "fallback"})])
    assert load_corpus(path).docs[0].text == "fallback"


def test_empty_corpus_is_a_clear_error(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "bad.jsonl", ["{oops", json.dumps({"text": ""})])
    message = (
        f"no usable documents in {path} (2 records skipped: bad.jsonl:1 is not a JSON object on one line; "
        "bad.jsonl:2: text is empty); each record needs a non-empty string in its orig_doc or text field"
    )
    with pytest.raises(CorpusError, match=re.escape(message)):
        load_corpus(path)
    _write_jsonl(path, [json.dumps({"body": "x"}), json.dumps({"orig_doc": 3, "text": "not read"})])
    with pytest.raises(
        CorpusError,
        match=re.escape("bad.jsonl:1 has no orig_doc or text field; bad.jsonl:2: orig_doc is not a string"),
    ):
        load_corpus(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no records"):
        load_corpus(tmp_path / "empty")


def test_bad_paths_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "x.csv").write_text("text\nhello\n")
    with pytest.raises(CorpusError, match=r"unsupported corpus file x\.csv"):
        load_corpus(tmp_path / "x.csv")


def test_parquet_text_column_with_nulls(tmp_path: Path) -> None:
    table = pa.table({"text": ["one", None, "", "two"], "title": ["T1", "T2", "T3", None], "n": [1, 2, 3, 4]})
    pq.write_table(table, tmp_path / "c.parquet")
    corpus = load_corpus(tmp_path / "c.parquet")
    assert [(d.doc_id, d.title, d.text) for d in corpus.docs] == [
        ("c.parquet:0", "T1", "one"),
        ("c.parquet:3", "", "two"),
    ]
    assert dict(corpus.skipped) == {"missing_text": 1, "empty_text": 1}


def test_parquet_without_text_column(tmp_path: Path) -> None:
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "c.parquet")
    with pytest.raises(CorpusError, match="no orig_doc or text column"):
        load_corpus(tmp_path / "c.parquet")


def test_arrow_stream_file(tmp_path: Path) -> None:
    table = pa.table({"orig_doc": ["spice doc"]})
    with (
        pa.OSFile(str(tmp_path / "data.arrow"), "wb") as sink,
        pa.ipc.new_stream(sink, table.schema) as writer,
    ):
        writer.write_table(table)
    assert load_corpus(tmp_path / "data.arrow").docs[0].text == "spice doc"


def test_folder_of_text_and_record_files(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.md").write_text("# Bee\nbuzz\n")
    (tmp_path / "sub" / "a.txt").write_text("ant")
    (tmp_path / "empty.txt").write_text("\n")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    _write_jsonl(tmp_path / "more.jsonl", [json.dumps({"text": "line doc"})])
    corpus = load_corpus(tmp_path)
    assert [(d.doc_id, d.title) for d in corpus.docs] == [
        ("b.md", "b"),
        ("more.jsonl:1", ""),
        ("sub/a.txt", "a"),
    ]
    assert dict(corpus.skipped) == {"empty_text": 1}


def test_default_corpus_is_the_shipped_wikipedia_summaries() -> None:
    corpus = load_default()
    assert 9_000 < len(corpus) < 11_000
    assert all(d.doc_id.startswith("wiki:") and d.text.strip() for d in corpus.docs[:100])
    assert load_corpus("").digest() == corpus.digest()
    assert corpus.metrics()["corpus/skipped_lines"] == 0.0


# -- truncation --------------------------------------------------------------------------------------------


def test_whitespace_budget_keeps_original_spacing() -> None:
    ws = WhitespaceBudget()
    assert ws.count("a  b\n\nc d") == 4
    assert ws.head("a  b\n\nc d", 3) == "a  b\n\nc"
    assert ws.head("a b", 5) == "a b"
    assert ws.head("a b", 0) == ""


def test_truncate_fits_the_marker_inside_the_budget() -> None:
    text = " ".join(f"w{i}" for i in range(20))
    assert truncate(text, 20) == (text, False)
    cut, was_cut = truncate(text, 10)
    assert was_cut
    assert cut == "w0 w1 w2 w3 w4 w5 w6 w7" + TRUNCATION_MARKER
    assert WhitespaceBudget().count(cut) == 10
    # a budget smaller than the marker keeps a plain prefix
    assert truncate(text, 2) == ("w0 w1", True)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        truncate(text, 0)


class _CharTokenizer:
    """One token per character: easy to reason about."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return ([0] if add_special_tokens else []) + [ord(c) for c in text]

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in token_ids)


def test_truncate_with_a_tokenizer() -> None:
    budget = TokenizerBudget(_CharTokenizer())
    assert budget.count("hello") == 5
    cut, was_cut = truncate("x" * 100, 30, budget)
    assert was_cut
    assert len(cut) == 30
    assert cut.endswith(TRUNCATION_MARKER)
    doc = CorpusDoc("d", "t", "short")
    assert truncate_doc(doc, 30, budget) is doc
    assert (
        truncate_doc(CorpusDoc("d", "t", "y" * 50), 30, budget).text == "y" * 9 + TRUNCATION_MARKER
    )  # 30 - len(marker) = 9


# -- sampling ----------------------------------------------------------------------------------------------


def test_sampler_draws_without_replacement_within_a_pass() -> None:
    corpus = _small(7)
    sampler = CorpusSampler(corpus, seed=3)
    first = [d.doc_id for d in sampler.sample_n(7)]
    second = [d.doc_id for d in sampler.sample_n(7)]
    assert sorted(first) == sorted(second) == sorted(d.doc_id for d in corpus.docs)
    assert first != second  # each pass has its own permutation
    assert sampler.state.epoch == 1
    assert sampler.state.cursor == 7


def test_sampler_is_seeded() -> None:
    corpus = _small(50)
    a = [d.doc_id for d in CorpusSampler(corpus, seed=1).sample_n(20)]
    b = [d.doc_id for d in CorpusSampler(corpus, seed=1).sample_n(20)]
    c = [d.doc_id for d in CorpusSampler(corpus, seed=2).sample_n(20)]
    assert a == b
    assert a != c


def test_sampler_resumes_exactly_from_a_json_state() -> None:
    corpus = _small(5)
    straight = CorpusSampler(corpus, seed=9)
    expected = [d.doc_id for d in straight.sample_n(13)]
    first = CorpusSampler(corpus, seed=9)
    got = [d.doc_id for d in first.sample_n(4)]
    saved = json.loads(json.dumps(first.state.to_dict()))
    resumed = CorpusSampler(corpus, state=SamplerState.from_dict(saved))
    got += [d.doc_id for d in resumed.sample_n(9)]
    assert got == expected


def test_sampler_refuses_a_state_from_another_corpus() -> None:
    state = CorpusSampler(_small(5), seed=0).state
    with pytest.raises(CorpusError, match="another corpus"):
        CorpusSampler(_small(6), state=state)
    other = Corpus(tuple(CorpusDoc(f"e{i}", "", "t") for i in range(5)), "other")
    with pytest.raises(CorpusError, match=r"resume with the same corpus\.path"):
        CorpusSampler(other, state=state)


def test_sampler_rejects_an_empty_corpus() -> None:
    with pytest.raises(CorpusError, match="empty"):
        CorpusSampler(Corpus((), "nothing"))
