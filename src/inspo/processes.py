"""Child processes that serve on 127.0.0.1: a free port to start one on, and a stop that never
leaves one behind (the vLLM server, and the benchmarks' retrieval servers)."""

from __future__ import annotations

import socket
import subprocess


def free_local_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> int:
    """Stop ``proc``: SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; returns
    its exit code once it is gone (at once for a process that has already exited)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()
