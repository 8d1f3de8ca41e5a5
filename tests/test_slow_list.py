"""tests/slow_tests.txt names tests that exist: a renamed or removed test must leave the list too, or the fast loop
would silently keep a slow test (the new name) while the list names nothing."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import slow_node_ids

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_slow_test_exists():
    missing = []
    for node in sorted(slow_node_ids()):
        path, _, name = node.partition("::")
        function = re.split(r"[\[:]", name.split("::")[-1])[0]
        file = ROOT / path
        # a test class may inherit its tests from gapbench.testing's contract classes
        sources = [file, ROOT / "harness" / "testing.py"] if "::Test" in node else [file]
        if not file.is_file() or not any(re.search(rf"def {re.escape(function)}\(", f.read_text(encoding="utf-8"))
                                         for f in sources):
            missing.append(node)
    assert not missing, "tests/slow_tests.txt lists tests that do not exist:\n" + "\n".join(missing)
    assert len(slow_node_ids()) > 100  # the list was read (a broken path would give none)
