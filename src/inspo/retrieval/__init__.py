"""inspo.retrieval: BM25 (bm25s), dense (sentence-transformers + faiss), and a Search-R1-compatible
HTTP server and client. Backends import their heavy libraries only when built."""

from inspo.retrieval.base import Retriever
from inspo.retrieval.bm25 import BM25Retriever
from inspo.retrieval.dense import DenseRetriever
from inspo.retrieval.factory import load_retriever
from inspo.retrieval.http_client import HttpRetriever, RetrievalError
from inspo.retrieval.server import build_app, running_server, serve

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "HttpRetriever",
    "RetrievalError",
    "Retriever",
    "build_app",
    "load_retriever",
    "running_server",
    "serve",
]
