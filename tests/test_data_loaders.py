"""QA and corpus loaders: Search-R1 / FlashRAG JSONL and parquet, plain JSONL, HF datasets."""

import json

import pytest

from inspo.data.loaders import (
    DataFormatError,
    load_corpus,
    load_hf_corpus,
    load_hf_qa,
    load_qa,
    write_corpus_jsonl,
    write_qa_jsonl,
)
from inspo.data.sources import load_corpus_source, load_qa_source
from inspo.records import Passage, Question


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_flashrag_jsonl(tmp_path):
    path = write_jsonl(tmp_path / "nq.jsonl", [
        {"id": "test_0", "question": " who wrote hamlet? ", "golden_answers": ["Shakespeare", "William Shakespeare"],
         "metadata": {"source": "nq"}},
        {"id": "test_1", "question": "capital of France", "golden_answers": "Paris"},
    ])
    qs = load_qa(path)
    assert qs == [
        Question("test_0", "who wrote hamlet?", ("Shakespeare", "William Shakespeare")),
        Question("test_1", "capital of France", ("Paris",)),
    ]
    assert qs[0].meta == {"source": "nq"}
    assert load_qa(path, limit=1) == qs[:1]


def test_plain_jsonl_with_answers_or_answer_and_line_number_ids(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(
        json.dumps({"question": "q0", "answers": ["a", "b"]}) + "\n\n"
        + json.dumps({"question": "q1", "answer": "c"}) + "\n"
        + json.dumps({"question": "q2", "answer": 1984}) + "\n",
        encoding="utf-8",
    )
    qs = load_qa(path)
    assert [(q.id, q.answers) for q in qs] == [("0", ("a", "b")), ("1", ("c",)), ("2", ("1984",))]


def test_search_r1_parquet_with_reward_model_target_and_prompt(tmp_path):
    prompt = "Answer the given question. ... For example, <answer> Beijing </answer>. Question: who painted the Mona Lisa?\n"
    rows = [
        {"id": None, "question": None, "golden_answers": None,  # columns absent from this row
         "data_source": "nq", "prompt": [{"role": "user", "content": prompt}], "ability": "fact-reasoning",
         "reward_model": {"style": "rule", "ground_truth": {"target": ["Leonardo da Vinci"]}},
         "extra_info": {"split": "train", "index": 7}},
        {"id": "train_1", "question": "largest planet?", "golden_answers": ["Jupiter"], "data_source": "nq",
         "prompt": [{"role": "user", "content": "x"}],
         "reward_model": {"style": "rule", "ground_truth": {"target": ["Jupiter"]}},
         "extra_info": {"split": "train", "index": 8}},
    ]
    qs = load_qa(write_parquet(tmp_path / "train.parquet", rows))
    assert qs[0] == Question("7", "who painted the Mona Lisa?", ("Leonardo da Vinci",))
    assert qs[0].meta["data_source"] == "nq"
    assert qs[1] == Question("train_1", "largest planet?", ("Jupiter",))


def test_repeated_ids_are_made_unique(tmp_path):
    # Search-R1's merged NQ + HotpotQA train set repeats FlashRAG ids such as train_0
    path = write_jsonl(tmp_path / "merged.jsonl", [
        {"id": "train_0", "question": "a?", "golden_answers": ["x"]},
        {"id": "train_0", "question": "b?", "golden_answers": ["y"]},
    ])
    ids = [q.id for q in load_qa(path)]
    assert ids == ["train_0", "train_0#2"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": 1, "question": "q"}, "qa.jsonl line 3: field 'golden_answers' is missing; expected a list of strings"),
        ({"id": 1, "question": "q", "golden_answers": []}, "qa.jsonl line 3: field 'golden_answers' has no non-empty answer"),
        ({"id": 1, "question": "q", "golden_answers": [["nested"]]}, "qa.jsonl line 3: field 'golden_answers' item 0 is a list"),
        ({"id": 1, "question": "q", "golden_answers": {"a": 1}}, "qa.jsonl line 3: field 'golden_answers' is a dict"),
        ({"id": 1, "golden_answers": ["a"]}, "qa.jsonl line 3: field 'question' is missing"),
        ({"id": 1, "question": "  ", "golden_answers": ["a"]}, "qa.jsonl line 3: field 'question' is empty"),
        ({"id": 1, "question": 5, "golden_answers": ["a"]}, "qa.jsonl line 3: field 'question' is an int"),
    ],
)
def test_bad_rows_name_file_line_and_field(tmp_path, row, message):
    good = {"question": "fine?", "golden_answers": ["ok"]}
    path = write_jsonl(tmp_path / "qa.jsonl", [good, good, row])
    with pytest.raises(DataFormatError) as err:
        load_qa(path)
    assert message in str(err.value)


def test_bad_json_line_and_unknown_suffix(tmp_path):
    path = tmp_path / "qa.jsonl"
    path.write_text('{"question": "a", "answer": "b"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="qa.jsonl line 2: not valid JSON"):
        load_qa(path)
    (tmp_path / "x.csv").write_text("question,answer\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="unknown file type '.csv'"):
        load_qa(tmp_path / "x.csv")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_qa(tmp_path / "missing.jsonl")


def test_parquet_errors_name_the_row(tmp_path):
    path = write_parquet(tmp_path / "qa.parquet", [{"question": "a", "golden_answers": ["x"]},
                                                   {"question": "b", "golden_answers": None}])
    with pytest.raises(DataFormatError, match="qa.parquet row 2: field 'golden_answers' is missing"):
        load_qa(path)


def test_corpus_search_r1_and_plain_formats(tmp_path):
    sr1 = write_jsonl(tmp_path / "wiki.jsonl", [
        {"id": "1", "contents": '"Aaron"\nAaron is a prophet.'},
        {"id": "2", "contents": "no title line here"},
    ])
    assert load_corpus(sr1) == [Passage("1", "Aaron", "Aaron is a prophet."), Passage("2", "", "no title line here")]
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"title": "T", "text": "body"}, {"id": 9, "text": "b2"}])
    assert load_corpus(plain) == [Passage("0", "T", "body"), Passage("9", "", "b2")]
    pq_path = write_parquet(tmp_path / "corpus.parquet", [{"id": "a", "contents": '"X"\ny'}])
    assert load_corpus(pq_path) == [Passage("a", "X", "y")]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"id": "1", "title": "no text"}])
    with pytest.raises(DataFormatError, match="bad.jsonl line 1: field 'contents' is missing"):
        load_corpus(bad)


def test_writers_round_trip(tmp_path):
    passages = [Passage("p1", "Title", "Text with \"quotes\"\nand lines"), Passage("p2", "", "untitled")]
    assert load_corpus(write_corpus_jsonl(tmp_path / "c.jsonl", passages)) == passages
    questions = [Question("q1", "who?", ("me", "you"), meta={"hops": 2})]
    loaded = load_qa(write_qa_jsonl(tmp_path / "q.jsonl", questions))
    assert loaded == questions and loaded[0].meta == {"hops": 2}


def test_hf_datasets_loader_on_local_files(tmp_path):
    path = write_jsonl(tmp_path / "hf.jsonl", [
        {"id": "a", "question": "q1", "golden_answers": ["x"]},
        {"id": "b", "question": "q2", "golden_answers": ["y", "z"]},
    ])
    qs = load_hf_qa("json", data_files=str(path), split="train")
    assert qs == [Question("a", "q1", ("x",)), Question("b", "q2", ("y", "z"))]
    corpus_path = write_jsonl(tmp_path / "hfc.jsonl", [{"id": "d", "contents": '"T"\nbody'}])
    assert load_hf_corpus("json", data_files=str(corpus_path)) == [Passage("d", "T", "body")]


def test_hf_datasets_saved_to_disk_and_bad_row(tmp_path):
    import datasets

    ds = datasets.DatasetDict({
        "test": datasets.Dataset.from_list([{"question": "q", "answer": "a"}, {"question": "r", "answer": ""}]),
    })
    ds.save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(DataFormatError, match=r"\[test\] row 2: field 'answer' has no non-empty answer"):
        load_hf_qa(str(tmp_path / "saved"), split="test")
    assert load_hf_qa(str(tmp_path / "saved"), split="test", limit=1) == [Question("0", "q", ("a",))]
    with pytest.raises(DataFormatError, match="no split 'dev'"):
        load_hf_qa(str(tmp_path / "saved"), split="dev")


def test_sources(tmp_path):
    write_jsonl(tmp_path / "dev.jsonl", [{"question": "q", "golden_answers": ["a"]}])
    write_jsonl(tmp_path / "corpus.jsonl", [{"id": "1", "contents": '"T"\nx'}])
    assert load_qa_source(str(tmp_path), split="dev")[0].question == "q"
    assert load_corpus_source(str(tmp_path))[0].title == "T"
    assert load_qa_source(str(tmp_path / "dev.jsonl"))[0].answers == ("a",)
    assert len(load_qa_source("world:3", split="test", limit=5)) == 5
    assert load_corpus_source("world:3")[0].id.startswith("p-")
    with pytest.raises(FileNotFoundError, match="no train.jsonl"):
        load_qa_source(str(tmp_path), split="train")
    with pytest.raises(ValueError, match="unknown QA source 'nq'"):
        load_qa_source("nq")
    with pytest.raises(ValueError, match="is a corpus"):
        load_qa_source("wiki-lite")
    with pytest.raises(ValueError, match="must be an integer"):
        load_qa_source("world:abc")
