"""The helpers around vLLM's server that need no vLLM: the CPU time of a server's process tree,
and what :func:`~inspo.engines.vllm_server.serve` says when the server cannot start (here: no
``vllm`` module, so this file runs where ``vllm`` is not installed; ``tests/test_vllm_server.py``
starts the real server)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inspo.engines.vllm_server import RunningServer, ServerError, serve

# a child that burns 0.6 s of CPU, says so in a file, then idles (as vLLM's engine process computes
# in a child of the API server); /proc counts whole clock ticks for user and system time apart, so
# the reading can fall up to two ticks short of what the child burned: it burns past the 0.5 asserted
PARENT = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
import time; time.sleep(120)
"""
CHILD = """
import sys, time
while time.process_time() < 0.6:
    pass
open(sys.argv[1], "w").write("done")
time.sleep(120)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_cpu_seconds_counts_the_servers_child_processes(tmp_path):
    flag = tmp_path / "burned"
    proc = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(flag)], start_new_session=True)
    try:
        server = RunningServer("http://127.0.0.1:1/v1", proc, ["parent"])
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the child never finished burning"
            time.sleep(0.05)
        # the parent itself only started the child; the child's 0.5 s is counted with it
        assert server.cpu_seconds() >= 0.5
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and its child: their own process group
        proc.wait()


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="here vllm would start for real")
def test_serve_names_the_command_and_its_log_when_the_server_exits(tmp_path):
    log = tmp_path / "server.log"
    with pytest.raises(ServerError, match=r"exited with 1 before it was ready \(its output: .*server.log\)"), \
            serve("/no/model", served_name="m", log_path=log, ready_timeout_s=60):
        pass
    assert "No module named 'vllm'" in log.read_text()
