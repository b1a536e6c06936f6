"""Search-R1's agent as an environment: one batched ``search`` tool over a retriever, results in
``<information>``, exact match (or F1) on ``<answer>``, the paper's seed instruction (App. F).

:class:`SearchR1Options` is the ``env:`` config section of ``env.name: search-r1`` (the retriever,
the corpus, top-k, the reward); :func:`load_environment` builds the environment from it (the
retriever included: a wrong corpus or an unreachable server fails here, before any model loads).
:class:`SearchR1Env` is the environment itself, given any :class:`~inspo.retrieval.base.Retriever`.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from inspo.answers import exact_match, f1_score
from inspo.envs.base import settings_from
from inspo.envs.search_r1.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    NAMED_INSTRUCTIONS,
    SEARCH_R1_INSTRUCTION,
    SEARCH_R1_PROTOCOL,
    format_passages,
)
from inspo.envs.search_r1.reflector_rules import PROTOCOL_TAGS, RULES
from inspo.envs.search_r1.rewards import RewardSpec, format_ok
from inspo.envs.tagged import TaggedToolEnv
from inspo.envs.tools import Tool
from inspo.records import Passage, Question, Rollout, ToolCall

NAME = "search-r1"
RETRIEVERS = ("bm25", "dense", "http")
#: A search result is bounded by the retriever (top-k passages); the loop's token cap applies.
RESULT_CHARS = 1_000_000


@dataclass
class SearchR1Options:
    """The ``env:`` section of ``env.name: search-r1``: the search engine and the reward."""

    corpus: str = "world"
    """Corpus to index: a file/folder, 'world[:SEED]', 'world-multihop', 'world-chain', 'wiki-lite'
    or 'hf:NAME' (ignored for retriever 'http'). A built-in world also gives the environment its
    questions."""
    retriever: str = "bm25"
    """bm25, dense, or http (a Search-R1-compatible server at ``retriever_url``)."""
    retriever_url: str = ""
    """Base URL of the retrieval server when ``retriever`` is http."""
    retriever_timeout: float = 30.0
    """Seconds an http retriever request may take before it counts as failed (a frozen server)."""
    retriever_retries: int = 3
    """Retries of a failed http retriever request (connection, timeout, 5xx) before the batch
    fails."""
    retriever_model: str = ""
    """Dense retriever's sentence-transformers model: a folder or a hub name in the local cache (''
    : the packaged all-MiniLM-L6-v2)."""
    index_dir: str = ""
    """Load the index from here, or save the built one here ('' : keep it in memory)."""
    index_path: str = ""
    """Dense only: a prebuilt faiss index file whose rows are the corpus's lines, in order
    (Search-R1's e5_Flat.index beside wiki-18.jsonl), searched without re-encoding the corpus."""
    faiss_index: str = ""
    """Dense index kind: flat, sq8, pq<m>, ivf<nlist>, ivf<nlist>,sq8, ivf<nlist>,pq<m>, hnsw<M>,
    hnsw<M>,sq8 ('': flat when building, a saved or prebuilt index as it is; another kind rebuilds a
    prebuilt one)."""
    faiss_nprobe: int = 0
    """IVF lists searched per query (0: the index's own; 16 for an index inspo builds)."""
    faiss_ef_search: int = 0
    """HNSW candidates kept per query (0: the index's own; 64 for an index inspo builds)."""
    faiss_device: str = "cpu"
    """Where the dense index searches: cpu, or cuda / cuda:N (needs faiss with GPU support and a
    GPU)."""
    topk: int = 3
    """Passages per search (the paper keeps the top 3)."""
    reward: str = "em"
    """em (exact match, the paper) or f1."""
    format_weight: float = 0.0
    """Bonus for a well-formed response (tags), added to the reward (0: the paper's outcome
    reward)."""

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise ValueError(message)

        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int):
                check(
                    isinstance(value, int) and not isinstance(value, bool),
                    f"env.{f.name} must be an integer; got {value!r}",
                )
            elif f.type in ("float", float):
                check(
                    isinstance(value, (int, float)) and not isinstance(value, bool),
                    f"env.{f.name} must be a number; got {value!r}",
                )
            elif f.type in ("str", str):
                check(isinstance(value, str), f"env.{f.name} must be text; got {value!r}")
        check(
            self.retriever in RETRIEVERS,
            f"env.retriever must be bm25, dense or http; got {self.retriever!r}",
        )
        check(
            self.retriever != "http" or bool(self.retriever_url),
            "env.retriever is 'http' but env.retriever_url is empty (e.g. http://127.0.0.1:8000)",
        )
        check(
            self.retriever_timeout > 0,
            f"env.retriever_timeout must be > 0 seconds; got {self.retriever_timeout!r}",
        )
        check(
            self.retriever_retries >= 0,
            f"env.retriever_retries must be an integer >= 0; got {self.retriever_retries!r}",
        )
        check(
            not self.index_path or self.retriever == "dense",
            "env.index_path is a prebuilt faiss index: it needs env.retriever=dense; got "
            f"{self.retriever!r}",
        )
        check(
            not self.index_path or Path(self.corpus).suffix.lower() == ".jsonl",
            "env.index_path needs env.corpus=PATH.jsonl, the corpus whose lines are the index's "
            f"rows (Search-R1: wiki-18.jsonl); got {self.corpus!r}",
        )
        check(self.topk >= 1, f"env.topk must be a positive integer; got {self.topk!r}")
        check(self.reward in ("em", "f1"), f"env.reward must be em or f1; got {self.reward!r}")
        check(
            self.format_weight >= 0, f"env.format_weight must be >= 0; got {self.format_weight!r}"
        )
        try:
            self.index_options()
        except ValueError as exc:
            raise ValueError(f"env.faiss_*: {exc}") from exc

    def index_options(self) -> Any:
        """The dense retriever's :class:`~inspo.retrieval.faiss_index.IndexOptions`
        (env.faiss_*)."""
        from inspo.retrieval.faiss_index import IndexOptions

        return IndexOptions(
            kind=self.faiss_index,
            nprobe=self.faiss_nprobe,
            ef_search=self.faiss_ef_search,
            device=self.faiss_device,
        )

    def describe(self) -> str:
        """The search engine in words."""
        if self.retriever == "http":
            return f"http server at {self.retriever_url}"
        model = (
            f" ({self.retriever_model})"
            if self.retriever == "dense" and self.retriever_model
            else ""
        )
        return f"{self.retriever} over {self.corpus or '(no corpus)'}{model}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def build_retriever(self) -> Any:
        """The ready retriever (may build an index; an ``http`` one is asked ``/healthz``)."""
        from inspo.retrieval.factory import load_retriever

        index_dir = self.index_dir or None
        return load_retriever(
            self.retriever,
            corpus=self.corpus or None,
            index_dir=index_dir,
            url=self.retriever_url or None,
            model=self.retriever_model or None,
            index_path=self.index_path or None,
            index=self.index_options(),
            timeout=self.retriever_timeout,
            retries=self.retriever_retries,
        )


#: Queries whose passages :meth:`SearchR1Env.show` can name exactly (the latest ones, per
#: environment).
SHOWN_RESULTS = 1024


def search_tool(
    retriever: Any, topk: int, seen: OrderedDict[str, list[Passage]] | None = None
) -> Tool:
    """``search`` as a batched tool: every query of a turn in ONE ``retriever.search`` call, each
    result in Search-R1's ``Doc i(Title: T) text`` form (top ``topk`` passages). ``seen`` keeps
    the passages of the latest queries (for :meth:`SearchR1Env.show`)."""
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise ValueError(
            f"search-r1: topk (passages per search) must be a positive integer; got {topk!r}"
        )

    def search(queries: list[str]) -> list[str]:
        results = retriever.search(list(queries), topk)
        if len(results) != len(queries):
            raise RuntimeError(
                f"retriever returned {len(results)} results for {len(queries)} queries"
            )
        texts = []
        for query, passages in zip(queries, results, strict=True):
            kept = list(passages)[:topk]
            texts.append(format_passages(kept))
            if seen is not None:
                seen[query.strip()] = kept
                seen.move_to_end(query.strip())
                while len(seen) > SHOWN_RESULTS:
                    seen.popitem(last=False)
        return texts

    return Tool(
        "search",
        search,
        description="Search the corpus; returns the top passages.",
        batched=True,
        timeout_s=None,
        max_result_chars=RESULT_CHARS,
    )


_DOC = re.compile(r"Doc \d+\(Title: (.*?)\) (.*?)(?=\nDoc \d+\(Title: |$)", re.DOTALL)


class SearchR1Env(TaggedToolEnv):
    """Search-R1's agent over ``retriever`` (see the module docstring). ``questions``: a function
    of the split, or None (no built-in questions); ``options`` are kept for ``agent.json``."""

    def __init__(
        self,
        retriever: Any,
        *,
        topk: int = 3,
        reward: str = "em",
        format_weight: float = 0.0,
        questions: Any = None,
        options: SearchR1Options | None = None,
    ) -> None:
        self._seen: OrderedDict[str, list[Passage]] = OrderedDict()
        super().__init__(
            name=NAME,
            tools={"search": search_tool(retriever, topk, self._seen)},
            seed_instruction=SEARCH_R1_INSTRUCTION,
            questions=questions,
            result_tag="information",
            answer_tag="answer",
            instructions={k: v for k, v in NAMED_INSTRUCTIONS.items() if k != NAME},
            metric=reward,
            required_tags=("search", "answer"),
            invalid_message=INVALID_ACTION_MESSAGE,
            nudge_message=LAST_TURN_NUDGE,
            reflector_rules=RULES,
            protocol=SEARCH_R1_PROTOCOL,
        )
        self.retriever = retriever
        self.topk = topk
        self.reward_spec = RewardSpec(metric=reward, format_weight=format_weight)
        self.options = options

    def reward(self, response: str, question: Question) -> float:
        return self.reward_spec(response, question.answers)

    def metrics(self, rollout: Rollout) -> dict[str, float]:
        answer, golds = rollout.answer, rollout.question.answers
        return {
            "em": exact_match(answer, golds) if answer is not None else 0.0,
            "f1": f1_score(answer, golds) if answer is not None else 0.0,
            "format_failures": float(not format_ok(rollout.response)),
        }

    def calls_said(self, rollout: Rollout) -> str:
        searches = rollout.calls_of("search")
        return f"searched {len(searches)} time(s)" if searches else "never searched"

    def show(self, call: ToolCall, observation: str, *, detail: int = 0) -> list[str]:
        """The retrieved titles, numbered (``detail`` > 0: that many characters of each passage
        too).

        The passages of a query this environment searched lately are named exactly (what the
        retriever returned, with a last line when the policy read them cut to
        ``rl.max_obs_tokens``); others are read back from the observation's text, where a title
        holding ``") "`` is cut."""
        result = self.result_of(call, observation)
        passages = self._seen.get(call.args.strip())
        if passages is not None and format_passages(passages).strip().startswith(result.strip()):
            pairs = [(p.title, p.text) for p in passages]
            cut = len(result.strip()) < len(format_passages(passages).strip())
        else:
            pairs, cut = _DOC.findall(result), False
        out = []
        for k, (title, text) in enumerate(pairs, 1):
            extra = f" - {text[:detail].strip()}" if detail else ""
            out.append(f"{k}. {title or '(untitled)'}{extra}")
        if cut:
            out.append(
                f"(the policy read them cut to {len(result.strip())} characters: rl.max_obs_tokens)"
            )
        return out

    @property
    def protocol_tags(self) -> tuple[str, ...]:
        return PROTOCOL_TAGS


def questions_of(corpus: str) -> Any:
    """The questions a built-in world corpus comes with (``fn(split)``), or None for other
    corpora."""
    from inspo.data.sources import is_world, load_qa_source

    if not is_world(corpus):
        return None
    return lambda split: load_qa_source(corpus, split=split)


def load_environment(**options: Any) -> SearchR1Env:
    """Search-R1's environment from the ``env:`` section's settings (:class:`SearchR1Options`);
    the retriever is built here."""
    opts = options_from(options)
    return SearchR1Env(
        opts.build_retriever(),
        topk=opts.topk,
        reward=opts.reward,
        format_weight=opts.format_weight,
        questions=questions_of(opts.corpus),
        options=opts,
    )


def options_from(options: dict[str, Any]) -> SearchR1Options:
    """:class:`SearchR1Options` from a dict, with a message naming an unknown key and the known
    ones."""
    return settings_from(SearchR1Options, options, NAME)


__all__ = [
    "NAME",
    "SearchR1Env",
    "SearchR1Options",
    "load_environment",
    "options_from",
    "questions_of",
    "search_tool",
]
