"""The report in a real headless chromium (Debian's /usr/bin/chromium; `.ci/install-browser`
installs it): no console errors, no network request but the page itself, charts laid out,
and a screenshot of the whole page.

The browser is driven by a minimal Chrome DevTools Protocol client (below): chromium starts
with a fresh profile and ``--remote-debugging-port=0``, the port is read from the profile's
``DevToolsActivePort`` file, and the page target is reached over a websocket (the
``websockets`` package, dev extra). The client records console errors, uncaught exceptions,
error log entries and every network request the page makes.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import random
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from inspo.core.reflector import RuleBasedReflector
from inspo.demo import run_demo
from inspo.processes import stop_process
from inspo.report import load_run, write_report

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--mute-audio",
)


@dataclass
class PageLog:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors


class Browser:
    """``with Browser(profile_dir) as b: b.open(url); b.evaluate(js); b.screenshot(path)``."""

    def __init__(self, profile_dir: Path, *, width: int = 1100, height: int = 900, timeout: float = 30.0):
        self.profile_dir = Path(profile_dir)
        self.width, self.height, self.timeout = width, height, timeout
        self.log = PageLog()
        self._ids = itertools.count(1)
        self._proc: subprocess.Popen | None = None
        self._ws = None
        self._stack = contextlib.ExitStack()

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Browser:
        from websockets.sync.client import connect

        self.profile_dir.mkdir(parents=True, exist_ok=True)
        stderr = (self.profile_dir.parent / f"{self.profile_dir.name}.stderr").open("wb")
        self._proc = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={self.profile_dir}", "--remote-debugging-port=0",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=stderr,
        )
        stderr.close()
        try:
            port = self._wait_port()
            targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
            page = next(t for t in targets if t.get("type") == "page")
            self._ws = self._stack.enter_context(
                connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=self.timeout)
            )
            for domain in ("Runtime", "Log", "Page", "Network"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride",
                      width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
        if self._proc is not None:
            stop_process(self._proc)

    def _wait_port(self) -> int:
        marker = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self._proc.returncode} before DevTools started")
            if marker.is_file():
                first = marker.read_text().splitlines()[:1]
                if first and first[0].isdigit():
                    return int(first[0])
            time.sleep(0.1)
        raise TimeoutError(f"chromium did not write {marker} within {self.timeout:.0f} s")

    # -- protocol -------------------------------------------------------------------------
    def call(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = self._receive()
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                return msg.get("result", {})

    def wait_for(self, event: str) -> dict[str, Any]:
        while True:
            msg = self._receive()
            if msg.get("method") == event:
                return msg.get("params", {})

    def _receive(self) -> dict[str, Any]:
        msg = json.loads(self._ws.recv(timeout=self.timeout))
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.log.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            self.log.exceptions.append(json.dumps(params.get("exceptionDetails", {}))[:500])
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.log.log_errors.append(params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.log.requests.append(params.get("request", {}).get("url", ""))
        return msg

    # -- conveniences ---------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, *, y: int = 0, height: int | None = None) -> Path:
        """PNG of the page from ``y`` down ``height`` pixels (default: to the bottom)."""
        total = int(self.evaluate("document.documentElement.scrollHeight"))
        height = height if height is not None else total - y
        result = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                           clip={"x": 0, "y": y, "width": self.width, "height": height, "scale": 1})
        path.write_bytes(base64.b64decode(result["data"]))
        return path


# ------------------------------------------------------------------------------------ the test
CHART_STATS = """(() => {
  const charts = [...document.querySelectorAll('svg.chart')];
  const boxed = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const drawn = el => { const b = el.getBBox(); return b.width > 0 || b.height > 0; };
  return {
    charts: charts.map(c => c.dataset.chart),
    laidOut: charts.filter(boxed).length,
    lines: [...document.querySelectorAll('svg.chart polyline')].filter(drawn).length,
    weightSeries: document.querySelectorAll('svg[data-chart="weights"] g.series').length,
    openDiffs: [...document.querySelectorAll('.diff')].filter(boxed).length,
    scripts: document.scripts.length,
    height: document.documentElement.scrollHeight,
  };
})()"""


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("browser") / "run"
    run_demo(run_dir, RuleBasedReflector(rng=random.Random(7)), steps=30, progress=False)
    return write_report(run_dir)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (.ci/install-browser)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    pytest.importorskip("websockets", reason="the DevTools client needs the websockets package (dev extra)")
    n_ids = len({i for s in load_run(report.parent).steps for i in s.weights})
    with Browser(tmp_path / "profile") as browser:
        browser.open(report.resolve().as_uri())
        stats = browser.evaluate(CHART_STATS)
        full = browser.screenshot(tmp_path / "report-full.png")
        top = browser.screenshot(tmp_path / "report-top.png", height=1400)
        log = browser.log

    assert log.errors == []
    assert log.requests == [report.resolve().as_uri()]  # nothing fetched but the page itself
    assert stats["scripts"] == 0
    assert {"reward", "weights", "population", "tool-calls", "instruction-length"} <= set(stats["charts"])
    assert stats["laidOut"] == len(stats["charts"])
    assert stats["lines"] >= n_ids + 4  # a line per instruction, plus reward (2), population, tool calls, length
    assert stats["weightSeries"] == n_ids
    assert stats["openDiffs"] >= 1  # the path to the best instruction is open
    for png in (full, top):
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert int.from_bytes(full.read_bytes()[20:24], "big") == stats["height"]  # PNG height = page height
    print(f"screenshots: {full} {top}")
