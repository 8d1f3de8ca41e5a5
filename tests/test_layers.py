"""The package's layers point one way and its modules import no circle.

The folders ``harness/``, ``tasks/`` and ``adapters/`` become one package only through setuptools' package-dir, which
grimp (the graph builder behind import-linter) cannot follow, so both tests read a copy laid out as the wheel installs
it: ``gapbench/`` with ``tasks/`` and ``adapters/`` inside. Imports inside functions count: grimp reads them all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("layers")
    only_code = shutil.ignore_patterns("*.pyc", "__pycache__", "data", "prompts")
    shutil.copytree(ROOT / "harness", top / "gapbench", ignore=only_code)
    for plugin in ("tasks", "adapters"):
        shutil.copytree(ROOT / plugin, top / "gapbench" / plugin, ignore=only_code)
    return top


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def test_import_contracts_hold(wheel_tree):
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=wheel_tree,
                          env=_env(wheel_tree), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "5 kept, 0 broken" in done.stdout


CYCLES = """
import json, sys
import grimp
graph = grimp.build_graph("gapbench", cache_dir=None)
modules = sorted(graph.modules)
edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
# Tarjan's strongly connected components, iteratively: a component of more than one module is a circle
index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
for start in modules:
    if start in index:
        continue
    work = [(start, iter(edges[start]))]
    index[start] = low[start] = counter[0]; counter[0] += 1; stack.append(start); on.add(start)
    while work:
        node, it = work[-1]
        nxt = next(it, None)
        if nxt is not None:
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]; counter[0] += 1; stack.append(nxt); on.add(nxt)
                work.append((nxt, iter(edges[nxt])))
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
            comp = []
            while True:
                m = stack.pop(); on.discard(m); comp.append(m)
                if m == node:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
json.dump({"modules": len(modules), "cycles": found}, sys.stdout)
"""


def test_no_import_cycle(wheel_tree):
    import json

    done = subprocess.run([sys.executable, "-c", CYCLES], cwd=wheel_tree, env=_env(wheel_tree),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    graph = json.loads(done.stdout)
    assert graph["modules"] > 60  # the copy really is the whole package, plugins included
    assert graph["cycles"] == []
