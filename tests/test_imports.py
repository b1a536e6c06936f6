"""``import inspo`` and ``import inspo.core`` stay light: no torch, transformers or trl (DESIGN.md:
heavy imports are lazy, so ``inspo --help`` is instant and the core runs without them).

Each import runs in a fresh interpreter, so modules this test session already loaded do not hide
a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "trl")


def heavy_modules_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    return [m for m in loaded if m.split(".")[0] in HEAVY]


@pytest.mark.parametrize("statement", [
    "import inspo",
    "import inspo.core",
    "from inspo.cli import build_parser; build_parser()",  # what `inspo --help` runs
])
def test_import_loads_no_torch_transformers_or_trl(statement):
    assert heavy_modules_after(statement) == []
