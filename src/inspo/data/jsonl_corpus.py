"""A JSONL corpus read on demand: Search-R1's 21M-line ``wiki-18.jsonl`` without 21M objects.

:class:`JsonlCorpus` is a read-only :class:`~collections.abc.Sequence` of
:class:`~inspo.records.Passage`. Rules:

- Opening it memory-maps the file and makes one streaming pass over it (in
  :data:`SCAN_BLOCK`-byte blocks) to record where each row starts and how long it is: 12 bytes
  per row (about 250 MB for wiki-18) plus the file pages the OS caches. No row is parsed then
  except the first, so a file in the wrong format fails at once.
- Row ``i`` is the ``i``-th non-blank line, as in :func:`inspo.data.loaders.load_corpus`; a
  Search-R1 row is ``{"id", "contents": "\\"Title\\"\\ntext"}`` (rows as in
  :func:`~inspo.data.loaders.parse_corpus_row`; a row without ``id`` gets its row number).
- ``corpus[i]`` reads and parses that one line; a bad line raises
  :class:`~inspo.data.loaders.DataFormatError` naming the file, row and byte offset.
- Reads do not move a file position, so they are safe from several threads.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

from inspo.records import Passage

SCAN_BLOCK = 1 << 26  # bytes examined per numpy pass while looking for line ends
_WHITESPACE = (ord(" "), ord("\t"), ord("\r"), ord("\f"), ord("\v"))


class JsonlCorpus(Sequence[Passage]):
    """Passages of a JSONL file, parsed one line at a time when asked for (module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(
                f"corpus file {self.path} does not exist (expected a JSONL file with one "
                '{"id", "contents"} passage per line, e.g. Search-R1\'s wiki-18.jsonl)'
            )
        if self.path.suffix.lower() != ".jsonl":
            raise ValueError(
                f"corpus file {self.path} is not .jsonl: a prebuilt index needs its corpus as "
                "JSONL, one passage per line in index order (convert it with inspo.data.loaders."
                "load_corpus + write_corpus_jsonl)"
            )
        self._file = self.path.open("rb")
        size = self.path.stat().st_size
        self._map: Any = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._starts, self._lengths = _row_spans(self._map)
        if len(self):
            self[0]  # parse one row now: a wrong file fails here, not at the first search

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, i: int) -> Passage: ...

    @overload
    def __getitem__(self, i: slice) -> list[Passage]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {i} is outside {self.path.name}'s {n} rows")
        i %= n
        start = int(self._starts[i])
        raw = self._map[start : start + int(self._lengths[i])]
        return _parse(f"{self.path.name} row {i + 1} (byte {start})", i, raw)

    def __iter__(self) -> Iterator[Passage]:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        """Release the memory map and the file (the corpus cannot be read afterwards)."""
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._file.close()

    def __repr__(self) -> str:
        return f"JsonlCorpus({str(self.path)!r}, rows={len(self)})"


def _parse(label: str, index: int, raw: bytes) -> Passage:
    from inspo.data.loaders import DataFormatError, parse_corpus_row

    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataFormatError(f"{label}: not valid JSON ({e})") from e
    if not isinstance(row, dict):
        raise DataFormatError(f"{label}: expected a JSON object, got {type(row).__name__}")
    return parse_corpus_row(label, index, row)


def _row_spans(buffer: Any) -> tuple[Any, Any]:
    """``(starts, lengths)`` of the non-blank lines of ``buffer`` (int64 and uint32 arrays), found
    block by block so no temporary array is larger than :data:`SCAN_BLOCK`."""
    import numpy as np

    view = np.frombuffer(buffer, dtype=np.uint8)
    try:
        size = len(view)
        if size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint32)
        ends = [
            np.flatnonzero(view[a : a + SCAN_BLOCK] == ord("\n")) + a
            for a in range(0, size, SCAN_BLOCK)
        ]
        ends.append(np.array([size], dtype=np.int64))
        ends_all = np.concatenate(ends).astype(np.int64)
        del ends
        starts = np.empty_like(ends_all)
        starts[0] = 0
        starts[1:] = ends_all[:-1] + 1
        lengths = ends_all - starts
        del ends_all
        keep = lengths > 0
        # A line that starts with whitespace may be blank: only those few are looked at in Python.
        maybe_blank = np.flatnonzero(
            keep & np.isin(view[np.minimum(starts, size - 1)], _WHITESPACE)
        )
        for i in maybe_blank.tolist():
            if not bytes(view[starts[i] : starts[i] + lengths[i]]).strip():
                keep[i] = False
        return starts[keep], lengths[keep].astype(np.uint32)
    finally:
        del view  # release the buffer export so the memory map can be closed
