"""JsonlCorpus: a Search-R1 corpus file read on demand (row offsets found in one pass)."""

from __future__ import annotations

import json

import pytest

from inspo.data.jsonl_corpus import JsonlCorpus
from inspo.data.loaders import DataFormatError
from inspo.records import Passage

WIKI = [Passage("0", "Volcano", "Lava erupts here."), Passage("1", "Bank", "Deposits and loans."),
        Passage("2", "Violin", "A bowed string instrument."), Passage("3", "Glacier", "Slow ice."),
        Passage("4", "Cat", "A small feline.")]


def write_search_r1_corpus(path, passages, *, blank_lines: bool = False):
    """Search-R1's corpus format: one ``{"id", "contents"}`` per line, the title quoted on the first line."""
    lines = [json.dumps({"id": p.id, "contents": f'"{p.title}"\n{p.text}'}) for p in passages]
    if blank_lines:
        lines.insert(2, "")
        lines.insert(4, "   ")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_jsonl_corpus_skips_blank_lines_and_reads_rows_on_demand(tmp_path):
    path = write_search_r1_corpus(tmp_path / "c.jsonl", WIKI, blank_lines=True)
    with path.open("a") as f:
        f.write('{"title": "Plain", "text": "a row without id or contents"}')  # no final newline
    corpus = JsonlCorpus(path)
    assert len(corpus) == 6
    assert [p.id for p in corpus] == ["0", "1", "2", "3", "4", "5"]  # a row without id gets its row number
    assert corpus[2] == WIKI[2] and corpus[-1].title == "Plain" and corpus[1:3] == WIKI[1:3]
    with pytest.raises(IndexError, match="row 6 is outside c.jsonl's 6 rows"):
        corpus[6]
    corpus.close()


def test_jsonl_corpus_names_a_bad_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "contents": "\\"A\\"\\nfine"}\n{"id": "b", "contents": 3}\n{not json\n')
    corpus = JsonlCorpus(path)  # only the first row is parsed on opening
    with pytest.raises(DataFormatError, match=r"bad.jsonl row 2 \(byte \d+\): field 'contents'"):
        corpus[1]
    with pytest.raises(DataFormatError, match=r"bad.jsonl row 3 \(byte \d+\): not valid JSON"):
        corpus[2]
    (tmp_path / "first.jsonl").write_text("[1, 2]\n")
    with pytest.raises(DataFormatError, match="row 1 .*expected a JSON object"):
        JsonlCorpus(tmp_path / "first.jsonl")


def test_jsonl_corpus_scans_in_blocks(tmp_path, monkeypatch):
    import inspo.data.jsonl_corpus as module

    monkeypatch.setattr(module, "SCAN_BLOCK", 7)  # line ends fall on and across block edges
    passages = [Passage(str(i), f"T{i}", "x" * (i % 5)) for i in range(40)]
    corpus = JsonlCorpus(write_search_r1_corpus(tmp_path / "c.jsonl", passages))
    assert list(corpus) == passages
