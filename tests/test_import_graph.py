"""The analyses are plugins (issue 25 part 5): every one registers through the entry-point group ``gapbench.analyses``
and the core imports none of them.

The graph is read statically with ``ast`` from the source folders, laid out as the wheel installs them (``harness/``
is ``gapbench``; ``tasks/`` and ``adapters/`` are ``gapbench.tasks`` and ``gapbench.adapters``). Every import counts,
those inside functions too, and so does a lazy ``"gapbench.analyses...:attr"`` string in the core's code (a registry
entry is a dependency all the same); docstrings do not.
"""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from gapbench.plugins import GROUP, analyses

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"gapbench": ROOT / "harness", "gapbench.tasks": ROOT / "tasks", "gapbench.adapters": ROOT / "adapters"}

# the core the issue names, and the plugin machinery itself
CORE = ["gapbench.runner", "gapbench.evaluation", "gapbench.store", "gapbench.task", "gapbench.retrieval",
        "gapbench.types", "gapbench.contract", "gapbench.plugins", "gapbench.registry"]
ANALYSES = ("gapbench.analyses", "gapbench.analysis_plugins")
# modules of gapbench.analyses that are no analysis of their own, and why
HELPERS = {
    "gapbench.analyses.gate_retrievers": "which runs a stored signals gate may read: part of the signals analysis",
    "gapbench.analyses.mcr": "RAR-b's multiple-choice accuracy, a measure of the rarb-mcr tasks: no options or report",
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "gapbench" and parts[0] in ("tasks", "adapters"):
                continue
            name = ".".join((package, *parts))
            found[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The gapbench modules ``name`` imports (anywhere in it), with the packages above each."""
    path = MODULES[name]
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[: len(here) - node.level + 1] + [node.module or ""]).strip(".") if node.level \
                else node.module or ""
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    out = set()
    for module in named:
        parts = module.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in MODULES)
    return out


GRAPH = {name: _imports(name) for name in MODULES}


def _chain(start: str, bad: tuple[str, ...]) -> list[str] | None:
    """An import path from ``start`` to a module under ``bad``, or None."""
    parent: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        module = todo.pop()
        if module != start and module.startswith(bad):
            path = [module]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            return path[::-1]
        for dep in sorted(GRAPH[module]):
            if dep not in parent:
                parent[dep] = module
                todo.append(dep)
    return None


def _strings(path: Path) -> list[tuple[int, str]]:
    """String constants of a module that are not docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_graph_reads_the_package():
    """The reader finds what a hand check finds, so an empty graph cannot pass the tests below."""
    assert {"gapbench.runner", "gapbench.cli", "gapbench.analyses.gap", "gapbench.adapters.bm25"} <= set(MODULES)
    assert "gapbench.evaluation.evaluation" in GRAPH["gapbench.runner"]
    assert "gapbench.analyses.argus.remedy.ner" in GRAPH["gapbench.analyses.argus.remedy.diagnosis"]
    # a relative import two levels up, inside a function: cli/argus.py's import of the audit inputs
    assert "gapbench.analyses.argus.audit.inputs" in GRAPH["gapbench.cli.argus"]
    chain = _chain("gapbench.cli.argus", ANALYSES)
    assert chain[0] == "gapbench.cli.argus" and chain[-1].startswith("gapbench.analyses")


@pytest.mark.parametrize("core", CORE)
def test_the_core_imports_no_analysis(core):
    modules = [m for m in MODULES if m == core or m.startswith(core + ".")]
    for module in modules:
        chain = _chain(module, ANALYSES)
        assert chain is None, f"{module} imports an analysis: {' -> '.join(chain)}"
        # a module path, lazy or not; the entry-point group's own name, "gapbench.analyses", is no module reference
        named = [(line, s) for line, s in _strings(MODULES[module])
                 if s.startswith(("gapbench.analyses.", "gapbench.analyses:", "gapbench.analysis_plugins"))]
        assert not named, f"{module} names an analysis module in its code: {named}"


def test_the_command_lines_top_level_imports_no_analysis_and_no_analysis_command():
    """``gapbench.cli`` (cli/__init__.py) adds the analyses' commands from the entry points: it imports no module of
    theirs, neither the analysis nor its command-line module."""
    commands = {target.partition(":")[0] for analysis in analyses().values() for target in analysis.cli}
    assert {"gapbench.cli.gap", "gapbench.cli.argus", "gapbench.cli.obliq"} <= commands
    direct = GRAPH["gapbench.cli"]
    assert not {m for m in direct if m.startswith(ANALYSES)}
    assert not direct & commands, f"imported directly instead of through {GROUP}: {sorted(direct & commands)}"


def test_every_analysis_is_listed_by_the_entry_point_group():
    """``entry_points(group="gapbench.analyses")`` lists every analysis; each package or module of
    gapbench.analyses is the home of a registered verb or a helper named above."""
    names = sorted(ep.name for ep in entry_points(group=GROUP))
    assert names == ["argus", "coverage", "gap", "obliq", "signals"]
    homes = {target.partition(":")[0] for analysis in analyses().values() for verb in analysis.verbs
             for target in (verb.function, verb.options)}
    tops = {".".join(m.split(".")[:3]) for m in MODULES if m.startswith("gapbench.analyses.")}
    for top in sorted(tops):
        assert top in HELPERS or any(h == top or h.startswith(top + ".") for h in homes), \
            f"{top} is neither a registered analysis nor a named helper"
