import json
import subprocess
import sys
import time

import httpx
import pytest

from inspo.cli import main
from inspo.processes import free_local_port, stop_process


def test_data_world_writes_search_r1_files(tmp_path, capsys):
    assert main(["data", "world", "--out", str(tmp_path), "--seed", "3"]) == 0
    row = json.loads((tmp_path / "train.jsonl").read_text().splitlines()[0])
    assert set(row) >= {"id", "question", "golden_answers"}
    doc = json.loads((tmp_path / "corpus.jsonl").read_text().splitlines()[0])
    assert doc["contents"].startswith('"') and "\n" in doc["contents"]
    assert (tmp_path / "bm25").is_dir()


@pytest.mark.integration
@pytest.mark.slow
def test_serve_retriever_command_serves_search_r1_protocol(tmp_path):
    assert main(["data", "world", "--out", str(tmp_path)]) == 0
    port = free_local_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspo.cli", "serve-retriever", "--index-dir", str(tmp_path / "bm25"),
         "--port", str(port), "--max-queries", "4"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("server did not come up: " + proc.stdout.read1().decode(errors="replace"))
        title = json.loads((tmp_path / "corpus.jsonl").read_text().splitlines()[0])["contents"].split("\n")[0].strip('"')
        r = httpx.post(f"{url}/retrieve", json={"queries": [title], "topk": 2, "return_scores": True})
        assert r.status_code == 200
        hits = r.json()["result"][0]
        assert hits[0]["document"]["contents"].startswith(f'"{title}"') and "score" in hits[0]
        bad = httpx.post(f"{url}/retrieve", json={"queries": ["a"] * 5, "topk": 2})
        assert bad.status_code == 400 and "queries" in bad.text
    finally:
        stop_process(proc)
    assert main(["serve-retriever"]) == 2
