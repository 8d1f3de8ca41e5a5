"""Local tasks: a BEIR-format folder given as a path (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``)."""

from __future__ import annotations

import functools
from pathlib import Path

from gapbench.corpus_store import read_beir_folder
from gapbench.task import Task


def beir_folder_task(path: str | Path, split: str = "test") -> Task:
    path = Path(path).expanduser().resolve()
    return Task(
        name=str(path),
        loader=functools.partial(read_beir_folder, path, split),
        source=f"local BEIR folder {path}",
        revision="local",
        split=split,
        license="unknown (local data)",
        description="A local BEIR-format folder.",
    )
