"""Loaders for QA sets and corpora in the formats the search-agent literature ships.

QA sets (:func:`load_qa`) -> list of :class:`~inspo.records.Question`:

- FlashRAG / Search-R1 JSONL: ``{"id", "question", "golden_answers": [...], "metadata"?}``;
- Search-R1 parquet (``scripts/data_process/*.py`` output): the same columns plus
  ``reward_model.ground_truth.target`` (used when ``golden_answers`` is absent) and ``prompt``
  (the question is taken after the last ``Question:`` of the user message when the row has no
  ``question`` column) and ``extra_info.index``;
- plain JSONL / JSON list with ``answers`` (list or string) or ``answer`` (string).

Rules for one QA row:

- ``question``: a non-empty string (surrounding whitespace stripped);
- gold answers: the first of ``golden_answers``, ``answers``, ``answer``,
  ``reward_model.ground_truth.target`` present; a string becomes a one-element list; numbers are
  turned into strings; an empty list is an error;
- ``id``: the row's ``id`` (any scalar, made a string), else ``extra_info.index``, else the row
  number (0-based). Ids must be unique: a repeated id gets ``#<line>`` appended (and a warning
  is logged), so a merged file (e.g. Search-R1's NQ+HotpotQA train set) stays usable;
- ``metadata`` / ``meta`` (a dict) lands in ``Question.meta``; ``data_source`` too.

Corpora (:func:`load_corpus`) -> list of :class:`~inspo.records.Passage`: Search-R1 rows
``{"id", "contents": "\\"Title\\"\\ntext"}`` (JSONL or parquet) or plain ``{"id"?, "title",
"text"}``; a missing ``id`` becomes the 0-based row number. Passage ids must be unique: a repeated
one is refused (:class:`DataFormatError` naming the id and both rows), since hits and indexes
name passages by id.

A bad row raises :class:`DataFormatError` naming the file, the line (row for parquet / datasets)
and the field (or the byte offset of a line that is not UTF-8), e.g. ``qa.jsonl line 7: field
'golden_answers' is missing; expected a list of strings``.

Hugging Face datasets (:func:`load_hf_qa`, :func:`load_hf_corpus`) go through
``datasets.load_dataset`` (or ``datasets.load_from_disk`` for a directory written by
``save_to_disk``); nothing here downloads anything the caller did not ask for.

Heavy imports (``pyarrow``, ``datasets``) are lazy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from inspo.records import Passage, Question

log = logging.getLogger(__name__)

ANSWER_FIELDS = ("golden_answers", "answers", "answer")
QA_SUFFIXES = (".jsonl", ".json", ".parquet")


class DataFormatError(ValueError):
    """A file or row that does not have the expected shape; the message says where and why."""


# --------------------------------------------------------------------------------------------
# Row sources: (location label, row dict) pairs from files and datasets
# --------------------------------------------------------------------------------------------


def iter_rows(path: str | Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Yield ``(label, index, row)`` for each record of a JSONL, JSON-list or parquet file.

    ``label`` is ``"<file> line N"`` (1-based, JSONL), ``"<file> item N"`` (JSON list) or
    ``"<file> row N"`` (parquet, 1-based); ``index`` is the 0-based record number.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    name = path.name
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{name} row {i + 1}", i, row
    elif suffix == ".json":
        try:
            data = json.loads(path.read_bytes().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataFormatError(
                f"{name}: not UTF-8 at byte offset {e.start} ({e.reason}); save the file as UTF-8"
            ) from e
        except json.JSONDecodeError as e:
            raise DataFormatError(
                f"{name}: not valid JSON ({e}); expected a list of objects"
            ) from e
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise DataFormatError(f"{name}: expected a JSON list of objects (or use .jsonl)")
        for i, row in enumerate(data):
            label = f"{name} item {i + 1}"
            if not isinstance(row, dict):
                raise DataFormatError(f"{label}: expected a JSON object, got {_a(row)}")
            yield label, i, row
    elif suffix == ".jsonl":
        index = 0
        with path.open(
            "rb"
        ) as f:  # bytes, so that a line that is not UTF-8 is reported with its number
            for lineno, raw in enumerate(f, start=1):
                label = f"{name} line {lineno}"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise DataFormatError(
                        f"{label}: not UTF-8 at byte offset {e.start} of the line ({e.reason}); "
                        "save the file as UTF-8"
                    ) from e
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataFormatError(f"{label}: not valid JSON ({e.msg})") from e
                if not isinstance(row, dict):
                    raise DataFormatError(f"{label}: expected a JSON object, got {_a(row)}")
                yield label, index, row
                index += 1
    else:
        raise DataFormatError(
            f"{path}: unknown file type {suffix!r}; expected one of .jsonl, .json, .parquet"
        )


def _hf_dataset(name: str, *, split: str, config: str | None, data_files: Any, **kwargs: Any):
    import datasets

    local = Path(name)
    if local.is_dir() and (
        (local / "dataset_info.json").exists()
        or (local / "state.json").exists()
        or (local / "dataset_dict.json").exists()
    ):
        ds = datasets.load_from_disk(str(local))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise DataFormatError(f"{name}: no split {split!r}; splits are {sorted(ds)}")
            ds = ds[split]
        return ds
    return datasets.load_dataset(name, config, split=split, data_files=data_files, **kwargs)


def _hf_rows(name: str, ds) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for i, row in enumerate(ds):
        yield f"{name} row {i + 1}", i, dict(row)


# --------------------------------------------------------------------------------------------
# Row parsers
# --------------------------------------------------------------------------------------------


def _nested(row: dict[str, Any], *keys: str) -> Any:
    cur: Any = row
    for key in keys:
        if not isinstance(cur, dict) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _a(value: Any) -> str:
    name = type(value).__name__
    return ("an " if name[0] in "aeiou" else "a ") + name


def _answers(label: str, field: str, value: Any) -> tuple[str, ...]:
    expected = "expected a list of strings"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        value = [value]
    elif hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()  # numpy arrays from pandas-backed parquet readers
    if not isinstance(value, (list, tuple)):
        raise DataFormatError(f"{label}: field {field!r} is {_a(value)}; {expected}")
    out = []
    for j, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise DataFormatError(f"{label}: field {field!r} item {j} is {_a(item)}; {expected}")
        text = str(item).strip()
        if text:
            out.append(text)
    if not out:
        raise DataFormatError(f"{label}: field {field!r} has no non-empty answer; {expected}")
    return tuple(out)


def _question_text(label: str, row: dict[str, Any]) -> str:
    q = row.get("question")
    if q is None:
        q = _question_from_prompt(row.get("prompt"))
        if q is None:
            raise DataFormatError(
                f"{label}: field 'question' is missing; expected a non-empty string"
            )
    if not isinstance(q, str):
        raise DataFormatError(f"{label}: field 'question' is {_a(q)}; expected a string")
    q = q.strip()
    if not q:
        raise DataFormatError(f"{label}: field 'question' is empty; expected a non-empty string")
    return q


def _question_from_prompt(prompt: Any) -> str | None:
    """Search-R1 parquet rows keep the question inside the chat prompt after ``Question:``."""
    if hasattr(prompt, "tolist") and not isinstance(prompt, list):
        prompt = prompt.tolist()
    if not isinstance(prompt, list):
        return None
    for message in reversed(prompt):
        if isinstance(message, dict) and message.get("role") == "user":
            content = str(message.get("content", ""))
            head, sep, tail = content.rpartition("Question:")
            return (tail if sep else content).strip() or None
    return None


def parse_qa_row(label: str, index: int, row: dict[str, Any]) -> Question:
    """One QA row -> :class:`Question` (rules in the module docstring)."""
    question = _question_text(label, row)
    answers = None
    for field in ANSWER_FIELDS:
        if field in row and row[field] is not None:
            answers = _answers(label, field, row[field])
            break
    if answers is None:
        target = _nested(row, "reward_model", "ground_truth", "target")
        if target is None:
            target = _nested(row, "reward_model", "ground_truth")
            target = target if isinstance(target, (str, list)) else None
        if target is None:
            raise DataFormatError(
                f"{label}: field 'golden_answers' is missing; expected a list of strings "
                "(also accepted: 'answers', 'answer', 'reward_model.ground_truth.target')"
            )
        answers = _answers(label, "reward_model.ground_truth.target", target)
    qid = row.get("id")
    if qid is None:
        qid = _nested(row, "extra_info", "index")
    if qid is None:
        qid = index
    if isinstance(qid, (dict, list)):
        raise DataFormatError(f"{label}: field 'id' is {_a(qid)}; expected a string")
    meta: dict[str, Any] = {}
    for key in ("metadata", "meta"):
        if isinstance(row.get(key), dict):
            meta.update(row[key])
    if isinstance(row.get("data_source"), str):
        meta["data_source"] = row["data_source"]
    return Question(id=str(qid), question=question, answers=answers, meta=meta)


def parse_corpus_row(label: str, index: int, row: dict[str, Any]) -> Passage:
    """One corpus row -> :class:`Passage` (Search-R1 ``contents`` or plain ``title``/``text``)."""
    pid = row.get("id", row.get("doc_id", row.get("_id")))
    pid = str(index) if pid is None else str(pid)
    contents = row.get("contents")
    if contents is not None:
        if not isinstance(contents, str):
            raise DataFormatError(
                f"{label}: field 'contents' is {_a(contents)}; expected a string '\"Title\"\\ntext'"
            )
        return Passage.from_contents(pid, contents)
    text = row.get("text")
    if text is None:
        raise DataFormatError(
            f"{label}: field 'contents' is missing; expected Search-R1's "
            '{"id", "contents": "\\"Title\\"\\ntext"} or {"title", "text"}'
        )
    title = row.get("title", "")
    for field, value in (("text", text), ("title", title)):
        if not isinstance(value, str):
            raise DataFormatError(f"{label}: field {field!r} is {_a(value)}; expected a string")
    return Passage(id=pid, title=title.strip(), text=text.strip())


def _unique_ids(questions: list[Question], labels: list[str]) -> list[Question]:
    seen: set[str] = set()
    out = []
    renamed = 0
    for q, label in zip(questions, labels, strict=True):
        if q.id in seen:
            new_id = f"{q.id}#{label.rsplit(' ', 1)[-1]}"
            while new_id in seen:
                new_id += "'"
            q = Question(id=new_id, question=q.question, answers=q.answers, meta=q.meta)
            renamed += 1
        seen.add(q.id)
        out.append(q)
    if renamed:
        log.warning("%d repeated question ids were made unique by appending '#<line>'", renamed)
    return out


def _take(rows: Iterable[tuple[str, int, dict[str, Any]]], limit: int | None):
    for n, item in enumerate(rows):
        if limit is not None and n >= limit:
            return
        yield item


def _questions(rows, limit: int | None) -> list[Question]:
    questions, labels = [], []
    for label, index, row in _take(rows, limit):
        questions.append(parse_qa_row(label, index, row))
        labels.append(label)
    return _unique_ids(questions, labels)


def _passages(rows, limit: int | None) -> list[Passage]:
    passages, first_seen = [], {}
    for label, index, row in _take(rows, limit):
        passage = parse_corpus_row(label, index, row)
        first = first_seen.setdefault(passage.id, label)
        if first is not label:
            raise DataFormatError(
                f"{label}: passage id {passage.id!r} is already the id of {first}; corpus ids must "
                "be unique (a search result names its passage by id): give each passage its own "
                "id, or drop the id field to number the rows"
            )
        passages.append(passage)
    return passages


# --------------------------------------------------------------------------------------------
# Public loaders and writers
# --------------------------------------------------------------------------------------------


def load_qa(path: str | Path, *, limit: int | None = None) -> list[Question]:
    """Load a QA file (``.jsonl``, ``.json`` list, or ``.parquet``); first ``limit`` rows only."""
    return _questions(iter_rows(path), limit)


def load_corpus(path: str | Path, *, limit: int | None = None) -> list[Passage]:
    """Load a corpus file (``.jsonl``, ``.json`` list or ``.parquet``) as passages."""
    return _passages(iter_rows(path), limit)


def load_hf_qa(
    name: str,
    *,
    split: str = "train",
    config: str | None = None,
    data_files: Any = None,
    limit: int | None = None,
    **load_kwargs: Any,
) -> list[Question]:
    """Load a QA split from a Hugging Face dataset
    (``datasets.load_dataset(name, config, split=...)``).

    ``name`` may also be a directory written by ``Dataset.save_to_disk``. Examples:
    ``load_hf_qa("RUC-NLPIR/FlashRAG_datasets", config="nq", split="test")`` (needs the hub or a
    cache), ``load_hf_qa("json", data_files="qa.jsonl")`` (local file).
    """
    ds = _hf_dataset(name, split=split, config=config, data_files=data_files, **load_kwargs)
    return _questions(_hf_rows(f"{name}[{split}]", ds), limit)


def load_hf_corpus(
    name: str,
    *,
    split: str = "train",
    config: str | None = None,
    data_files: Any = None,
    limit: int | None = None,
    **load_kwargs: Any,
) -> list[Passage]:
    """Load a corpus split from a Hugging Face dataset (rows as in :func:`parse_corpus_row`)."""
    ds = _hf_dataset(name, split=split, config=config, data_files=data_files, **load_kwargs)
    return _passages(_hf_rows(f"{name}[{split}]", ds), limit)


def write_corpus_jsonl(path: str | Path, passages: Iterable[Passage]) -> Path:
    """Write passages in Search-R1 corpus format: one ``{"id", "contents"}`` per line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for p in passages:
            f.write(json.dumps({"id": p.id, "contents": p.contents}, ensure_ascii=False) + "\n")
    return path


def write_qa_jsonl(path: str | Path, questions: Iterable[Question]) -> Path:
    """Write questions in FlashRAG / Search-R1 format: ``{"id", "question", "golden_answers",
    "metadata"}`` per line (readable back with :func:`load_qa`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for q in questions:
            row = {
                "id": q.id,
                "question": q.question,
                "golden_answers": list(q.answers),
                "metadata": q.meta,
            }
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
