"""``copy_home``: copies into a test's GAPBENCH_HOME what a session fixture of tests/fx_models.py or tests/fx_docs.py
computed once for the whole test session (its ``home/``: MiniLM's span vectors of the shipped ARGUS slice, spaCy's
mentions of ImpliRet multispeaker/wknow, ...), so that a test whose point is not that encoding finds it cached, as a
user's second run would, instead of computing it again in every xdist worker. The test (or its fixture) asks for the
session fixture itself, so that the one-off cost shows in its set-up.

Loaded as a pytest plugin by tests/conftest.py (every tests/fx_*.py is); tests import ``copy_home`` from it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def copy_home(folder: Path, home: Path | str | None = None) -> Path:
    """Copies ``folder/home`` (a session fixture's folder, such as ``argus_slice_dense_home``) into ``home`` (default:
    the current $GAPBENCH_HOME, read when called, so a test that set its own home first gets it there); returns that
    home."""
    target = Path(home if home is not None else os.environ["GAPBENCH_HOME"])
    shutil.copytree(folder / "home", target, dirs_exist_ok=True)
    return target
