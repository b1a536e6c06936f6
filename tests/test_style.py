"""Style checked, not hoped for (issue 66): no function in src/ over 80 lines and no file over 500.

Lines are counted as ``ast`` reports them (a function from its ``def`` line to its last line,
decorators left out). ``ruff check`` (E501 at 100 columns in src/) and ``ruff format --check src``
run in ``make test`` before pytest.

:data:`NOT_YET` names what is still over, each with the work that takes it under: the check fails
for anything new over a limit, and for a name in :data:`NOT_YET` that is no longer over (so the
list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "inspo"
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 500

#: Over a limit today, and why (each with the work that takes it under). Empty since issue 66's
#: run lifecycle and INSPO step landed; a name may only leave it.
NOT_YET: dict[str, str] = {}


def over_limits(root: Path = SRC) -> dict[str, int]:
    """Every file over :data:`MAX_FILE_LINES` (``path``) and function over
    :data:`MAX_FUNCTION_LINES` (``path::name``) under ``root``, with its line count."""
    found: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_FILE_LINES:
            found[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{name}::{node.name}"] = length
    return found


def test_no_function_over_80_lines_and_no_file_over_500():
    found = over_limits()
    new = {k: v for k, v in found.items() if k not in NOT_YET}
    assert not new, (
        f"over the limits ({MAX_FUNCTION_LINES} lines a function, {MAX_FILE_LINES} a file): "
        f"{new}; split by role (docs/development.md, Style)"
    )
    done = sorted(set(NOT_YET) - set(found))
    assert not done, f"{done} are within the limits now: take them out of NOT_YET"


def test_the_check_counts_what_it_should(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    pass\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    assert over_limits(tmp_path) == {"long.py::long": MAX_FUNCTION_LINES + 1, "pkg/big.py": 501}


def test_no_scripts_among_the_results():
    """Results are data: a script that makes or reads them lives beside the benchmarks."""
    results = SRC.parents[1] / "benchmarks" / "results"
    scripts = sorted(str(p.relative_to(results)) for p in results.rglob("*") if p.suffix in {".py", ".sh"})
    assert not scripts, f"scripts under benchmarks/results/: {scripts}; move them under benchmarks/"
