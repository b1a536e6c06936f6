"""No import circles inside src/inspo (issue 11), read from the source with ast (nothing is imported).

Two graphs of modules (a package is its ``__init__``):

- import time: the imports a module runs when it is imported (module level, also under ``if`` /
  ``try``, not under ``TYPE_CHECKING``), plus the parent packages Python imports first. A circle
  here can fail with "partially initialized module" depending on what is imported first;
- use: every import, also those inside functions (the lazy ones), without the parent packages.
  A circle here is two modules that each need the other (``run`` -> ``evolve`` -> ``run`` was one).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "inspo").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(tree: ast.Module, import_time: bool) -> list[tuple[str, str | None]]:
    """(module, name) of each ``import module`` (name None) and ``from module import name``."""
    out: list[tuple[str, str | None]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                out.extend((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                out.extend((node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                continue
            elif not import_time or isinstance(node, (ast.If, ast.Try)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    block = getattr(node, field, None)
                    if isinstance(block, list):
                        visit(block)

    visit(tree.body)
    return out


def import_graph(import_time: bool) -> dict[str, set[str]]:
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    def parents(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))}

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for imported, name in _imported(ast.parse(path.read_text(encoding="utf-8")), import_time):
            target = f"{imported}.{name}" if name and f"{imported}.{name}" in modules else known(imported)
            if target is None:
                continue
            targets = {target} | ((parents(target) - parents(module)) if import_time else set())
            graph[module] |= {t for t in targets if t != module and t in modules}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("import_time", [True, False], ids=["import-time", "use"])
def test_no_import_circles_inside_inspo(import_time):
    graph = import_graph(import_time)
    assert len(graph) > 50  # the walk found the package
    found = circles(graph)
    assert not found, "import circles: " + "; ".join(
        " <-> ".join(f"{m} (imports {sorted(graph[m] & set(c))})" for m in c) for c in found)


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` between the packages (and top-level modules) right under ``inspo``."""
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(top(module), set()).update(top(t) for t in targets if top(t) != top(module))
    return out


def test_no_circles_between_packages():
    """Issue 66: a package uses another or is used by it, never both (core and llm, data and
    retrieval, training and trained were such pairs)."""
    graph = package_graph(import_graph(import_time=False))
    assert {"inspo.core", "inspo.llm", "inspo.data", "inspo.retrieval", "inspo.config"} <= set(graph)
    found = circles(graph)
    assert not found, "package circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    packages = package_graph({"inspo.x.a": {"inspo.y.b"}, "inspo.y.b": set(), "inspo.y.c": {"inspo.x"}})
    assert circles(packages) == [["inspo.x", "inspo.y"]]


#: The layers (issues 31 and 66): package -> packages it must never import, directly (lazy imports
#: too). The core knows nothing of any agent; the configuration (``inspo.config``) stands below
#: everything that runs a policy, so evaluation, the trained agent and the environments read
#: settings there; the layer that builds an agent (envs) stands below training, evaluation and the
#: trained agent, which never climb into training.
RUNNERS = ("inspo.training", "inspo.eval", "inspo.trained", "inspo.report", "inspo.api", "inspo.cli", "inspo.cli_parsers",
           "inspo.cli_common", "inspo.cli_eval", "inspo.cli_agent")
FORBIDDEN = {
    "inspo.core": ("inspo.envs", "inspo.engines", "inspo.retrieval", "inspo.config", *RUNNERS),
    "inspo.config": ("inspo.engines", *RUNNERS),
    "inspo.envs": ("inspo.training", "inspo.eval", "inspo.trained", "inspo.cli"),
    "inspo.eval": ("inspo.training", "inspo.trained"),
    "inspo.trained": ("inspo.training",),
}


def _direct_uses(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    return {m: targets for m, targets in graph.items() if m == package or m.startswith(package + ".")}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_the_seams_layers_import_only_downwards(package):
    graph = import_graph(import_time=False)
    bad = {(m, t) for m, targets in _direct_uses(graph, package).items() for t in targets
           if any(t == f or t.startswith(f + ".") for f in FORBIDDEN[package])
           }
    assert not bad, f"{package} imports what it must not: {sorted(bad)}"


def test_the_layering_check_finds_a_forbidden_import():
    graph = {"inspo.core.proposer": {"inspo.envs.search_r1"}, "inspo.envs.search_r1": set()}
    found = {(m, t) for m, targets in _direct_uses(graph, "inspo.core").items() for t in targets
             if any(t == f or t.startswith(f + ".") for f in FORBIDDEN["inspo.core"])}
    assert found == {("inspo.core.proposer", "inspo.envs.search_r1")}


def test_the_library_never_imports_the_lab():
    """Issue 66: ``inspo.lab`` is the benchmark scripts' toolbox; nothing else in the package uses it."""
    graph = import_graph(import_time=False)
    bad = sorted((m, t) for m, targets in graph.items() if not m.startswith("inspo.lab")
                 for t in targets if t == "inspo.lab" or t.startswith("inspo.lab."))
    assert not bad, f"library modules import the lab: {bad}"
