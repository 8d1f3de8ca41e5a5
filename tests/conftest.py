"""Shared test setup: offline hub, and a private GAPBENCH_HOME per test session so user caches are never touched."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# progress lines (one every 30 s outside a terminal) would make what a slow test reads on stderr depend on the
# machine's speed; tests of progress set GAPBENCH_PROGRESS themselves
os.environ.setdefault("GAPBENCH_PROGRESS", "off")


@pytest.fixture(autouse=True, scope="session")
def _gapbench_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("gapbench-home")
    old = os.environ.get("GAPBENCH_HOME")
    os.environ["GAPBENCH_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("GAPBENCH_HOME", None)
    else:
        os.environ["GAPBENCH_HOME"] = old
