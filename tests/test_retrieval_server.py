"""The Search-R1-compatible server, run for real with uvicorn, queried by HttpRetriever and httpx."""

import httpx
import pytest

from inspo.records import Passage
from inspo.retrieval.base import Retriever
from inspo.retrieval.bm25 import BM25Retriever
from inspo.retrieval.factory import load_retriever
from inspo.retrieval.http_client import HttpRetriever, RetrievalError
from inspo.retrieval.server import build_app, running_server

pytestmark = pytest.mark.integration

CORPUS = [
    Passage("d0", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris."),
    Passage("d1", "Amazon River", "The Amazon is the largest river in South America."),
    Passage("d2", "Mount Everest", "Everest is the highest mountain above sea level."),
    Passage("d3", "Saturn", "Saturn is the sixth planet from the Sun, known for its rings."),
    Passage("d4", "Python", "Python is a programming language created by Guido van Rossum."),
]
LIMITS = {"max_queries": 4, "max_query_chars": 100, "max_topk": 5}


@pytest.fixture(scope="module")
def bm25():
    return BM25Retriever(CORPUS)


@pytest.fixture(scope="module")
def url(bm25):
    with running_server(bm25, host="127.0.0.1", port=0, **LIMITS) as base_url:
        yield base_url


@pytest.fixture
def client(url):
    with HttpRetriever(url, retries=1, backoff=0.01) as c:
        yield c


def test_http_results_equal_in_process_bm25(client, bm25):
    queries = ["tower in Paris", "", "largest river", "planet with rings"]
    remote = client.search(queries, k=2)
    assert remote == bm25.search(queries, k=2)  # ids, titles, texts and scores
    assert remote[1] == []
    assert remote[0][0].id == "d0" and remote[0][0].score > 0
    assert isinstance(client, Retriever)


def test_client_chunks_batches_larger_than_the_server_limit(url, bm25):
    queries = ["tower", "river", "mountain", "planet", "language", "Paris", "Sun"]  # 7 > max 4
    with HttpRetriever(url, batch_size=3) as c:
        assert c.search(queries, k=1) == bm25.search(queries, k=1)


def test_search_r1_wire_format(url):
    body = httpx.post(f"{url}/retrieve", json={"queries": ["Saturn rings"], "topk": 1,
                                                "return_scores": True}).json()
    hit = body["result"][0][0]
    assert set(hit) == {"document", "score"}
    assert hit["document"] == {"id": "d3", "contents": '"Saturn"\n' + CORPUS[3].text}
    assert isinstance(hit["score"], float)
    plain = httpx.post(f"{url}/retrieve", json={"queries": ["Saturn rings"], "topk": 1}).json()
    assert plain["result"] == [[hit["document"]]]  # no scores: bare documents, as Search-R1 does


def test_missing_topk_uses_the_default_and_empty_batch_is_fine(url):
    body = httpx.post(f"{url}/retrieve", json={"queries": ["the Sun planet tower river mountain"]}).json()
    assert len(body["result"][0]) == 3
    assert httpx.post(f"{url}/retrieve", json={"queries": []}).json() == {"result": []}


def test_healthz(url, client):
    body = httpx.get(f"{url}/healthz").json()
    assert body["status"] == "ok"
    assert body["corpus_size"] == len(CORPUS)
    assert body["backend"] == "bm25"
    assert body["limits"]["max_topk"] == 5
    assert client.check()["corpus_size"] == len(CORPUS)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"queries": ["a"] * 5}, 400, "too many queries: 5"),
        ({"queries": ["ok", "x" * 101]}, 400, "query 1 is too long: 101 characters"),
        ({"queries": ["a"], "topk": 0}, 400, "topk must be between 1 and max_topk=5, got 0"),
        ({"queries": ["a"], "topk": 6}, 400, "topk must be between 1 and max_topk=5, got 6"),
        ({"queries": "tower"}, 422, "field 'queries': Input should be a valid list"),
        ({"topk": 2}, 422, "field 'queries': Field required"),
        ({"queries": [3]}, 422, "field 'queries.0'"),
    ],
)
def test_bad_requests_are_refused_with_a_message(url, body, status, message):
    response = httpx.post(f"{url}/retrieve", json=body)
    assert response.status_code == status
    assert message in response.json()["detail"]


def test_bad_json_is_refused_readably(url):
    response = httpx.post(f"{url}/retrieve", content=b'{"queries": [', headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "not valid JSON" in response.json()["detail"]


def test_client_reports_the_servers_4xx_message(client):
    with pytest.raises(RetrievalError, match=r"HTTP 400\): topk must be between 1 and max_topk=5"):
        client.search(["tower"], k=9)


def test_client_accepts_a_full_retrieve_url(url, bm25):
    with HttpRetriever(f"{url}/retrieve") as c:
        assert c.search(["river"], k=1) == bm25.search(["river"], k=1)


def test_unreachable_server_is_reported_clearly():
    with running_server(BM25Retriever(CORPUS)) as gone:
        pass  # the server is stopped: nothing listens there any more
    with HttpRetriever(gone, retries=1, backoff=0.01) as c:
        with pytest.raises(RetrievalError, match=f"cannot reach retrieval server at {gone}"):
            c.check()
        with pytest.raises(RetrievalError, match=f"cannot reach retrieval server at {gone}.*2 tries"):
            c.search(["tower"])


def test_server_errors_are_retried_then_reported():
    class Flaky:
        backend = "flaky"

        def __init__(self):
            self.calls = 0

        def __len__(self):
            return 1

        def search(self, queries, k=3):
            self.calls += 1
            if self.calls < 3:
                raise RuntimeError("index shard unavailable")
            return [[Passage("x", "T", "text", score=1.0)] for _ in queries]

    flaky = Flaky()
    with running_server(flaky) as base, HttpRetriever(base, retries=3, backoff=0.01) as c:
        assert c.search(["q"], k=1)[0][0].id == "x"  # two 500s, then a success
        assert flaky.calls == 3
        flaky.calls = -10
        with HttpRetriever(base, retries=1, backoff=0.01) as impatient, \
                pytest.raises(RetrievalError, match="index shard unavailable"):
            impatient.search(["q"], k=1)


def test_empty_corpus_refused_at_startup():
    class Empty:
        def __len__(self):
            return 0

        def search(self, queries, k=3):
            return [[] for _ in queries]

    with pytest.raises(ValueError, match="empty corpus"):
        build_app(Empty())


def test_load_retriever_kinds(url, tmp_path, bm25):
    corpus_file = tmp_path / "corpus.jsonl"
    from inspo.data.loaders import write_corpus_jsonl

    write_corpus_jsonl(corpus_file, CORPUS)
    built = load_retriever("bm25", corpus=str(corpus_file), index_dir=tmp_path / "idx")
    reloaded = load_retriever("bm25", index_dir=tmp_path / "idx")  # no corpus needed now
    assert reloaded.search(["river"], k=2) == built.search(["river"], k=2) == bm25.search(["river"], k=2)
    remote = load_retriever("http", url=url)
    assert remote.search(["river"], k=2) == bm25.search(["river"], k=2)
    with pytest.raises(ValueError, match="needs corpus"):
        load_retriever("bm25", index_dir=tmp_path / "nothing-here")
    with pytest.raises(ValueError, match="unknown retriever kind 'sparse'"):
        load_retriever("sparse", corpus=str(corpus_file))
    with pytest.raises(ValueError, match="needs url"):
        load_retriever("http")


# ---------------------------------------------------------------- request-body limit (issue 21)
BODY_LIMIT = 2000


@pytest.fixture(scope="module")
def small_url(bm25):
    with running_server(bm25, max_body_bytes=BODY_LIMIT, **LIMITS) as base_url:
        yield base_url


def _body(size: int) -> bytes:
    """A valid request of exactly ``size`` bytes (JSON padded with spaces)."""
    core = b'{"queries": ["tower in Paris"], "topk": 1}'
    return core[:-1] + b" " * (size - len(core)) + b"}"


def _chunks(body: bytes, size: int = 256):
    yield from (body[i:i + size] for i in range(0, len(body), size))


def test_a_body_at_the_limit_is_served(small_url):
    for content in (_body(BODY_LIMIT), _chunks(_body(BODY_LIMIT))):  # Content-Length, then chunked
        response = httpx.post(f"{small_url}/retrieve", content=content, headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
        assert response.json()["result"][0][0]["id"] == "d0"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_body_is_refused_with_413_naming_the_limit(small_url, chunked):
    body = _body(BODY_LIMIT + 1) if not chunked else _body(2_000_000)
    content = _chunks(body) if chunked else body
    response = httpx.post(f"{small_url}/retrieve", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert f"the limit is max_body_bytes={BODY_LIMIT}" in detail and "--max-body-mb" in detail
    assert ("Content-Length" in detail) != chunked
    if chunked:  # refused once the count passed the limit (uvicorn hands bytes on in reads of up to
        # 64 KiB, so the count is the limit plus at most a few of those), not after the whole body
        received = int(detail.split("refused at ")[1].split(" ")[0])
        assert BODY_LIMIT < received <= BODY_LIMIT + 4 * 65536 < len(body)
    # the server is still healthy and serves the next request
    assert httpx.post(f"{small_url}/retrieve", json={"queries": ["river"], "topk": 1}).status_code == 200


def test_the_client_reports_413_as_a_refusal(small_url):
    with HttpRetriever(small_url, retries=3, backoff=0.01, batch_size=4) as c:
        assert len(c.search(["tower " * 16] * 8, k=1)) == 8  # two requests of about 500 bytes
    with HttpRetriever(small_url, retries=3, backoff=0.01, batch_size=30) as c, \
            pytest.raises(RetrievalError, match=r"HTTP 413\): request body too large.*max_body_bytes=2000"):
        c.search(["x" * 99] * 30, k=1)  # 30 queries (3.1 kB) are refused for their size, before their count


def test_a_bad_content_length_is_refused(small_url):
    import socket

    host, port = small_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\n\r\n")
        head = sock.recv(4096)
    assert head.split(b"\r\n", 1)[0].split(b" ")[1] == b"400"  # by uvicorn's HTTP parser, before the app


@pytest.mark.parametrize(("limits", "message"), [
    ({"max_body_bytes": 0}, "max_body_bytes must be a whole number >= 1, got 0"),
    ({"max_queries": 0}, "max_queries must be a whole number >= 1, got 0"),
    ({"max_query_chars": -5}, "max_query_chars must be a whole number >= 1, got -5"),
    ({"default_topk": 9, "max_topk": 5}, "default_topk must be in 1..max_topk=5, got 9"),
])
def test_limits_below_one_are_refused(bm25, limits, message):
    with pytest.raises(ValueError, match=message):
        build_app(bm25, **limits)


def test_a_port_outside_the_range_is_refused(bm25):
    from inspo.retrieval.server import check_port

    for port in (-1, 65536):
        with pytest.raises(ValueError, match=f"port must be in 0..65535.*got {port}"):
            check_port(port)
    with pytest.raises(ValueError, match="port must be in"), running_server(bm25, port=-1):
        pass
