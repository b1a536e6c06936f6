"""inspo.processes: the port a server starts on, and a stop that leaves no child behind."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

from inspo.processes import free_local_port, stop_process

# installs its SIGTERM handling, says so, then waits to be stopped
_CHILD = """
import signal, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


def _child(mode: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, mode], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_stop_process_terminates_a_child_that_obeys_sigterm():
    proc = _child("obey")
    assert stop_process(proc, timeout_s=10) == -signal.SIGTERM
    assert proc.poll() == -signal.SIGTERM


def test_stop_process_kills_a_child_that_ignores_sigterm():
    proc = _child("ignore")
    assert stop_process(proc, timeout_s=0.5) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL


def test_stop_process_returns_the_exit_code_of_a_child_already_gone():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    assert stop_process(proc) == 3


def test_free_local_port_can_be_listened_on():
    port = free_local_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
