"""Local tasks: a BEIR-format folder given as a path (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``),
with options after a colon (``/data/scifact:split=dev``).

Its task name is the folder's absolute path (what ``gapbench run`` was given), but its identity is its content: run
directories of the same folder at two paths or on two machines are one task (:mod:`gapbench.identity`).
"""

from __future__ import annotations

import functools
from pathlib import Path

from gapbench.corpus_store import read_beir_folder
from gapbench.task import Task, check_plain_name, confined


def beir_folder_task(path: str | Path, split: str = "test") -> Task:
    path = Path(path).expanduser().resolve()
    # the split becomes qrels/<split>.tsv: a plain name, so no task string (typed, or read back from a run manifest
    # or --data) makes another file the judgements
    check_plain_name(split, "split", f"BEIR folder {path}")
    spec = str(path) if split == "test" else f"{path}:split={split}"
    return Task(
        name=spec,
        loader=functools.partial(read_folder, path, split),
        source=f"local BEIR folder {path}",
        revision="local",
        split=split,
        license="unknown (local data)",
        description="A local BEIR-format folder.",
        spec=spec,
        extra_qrels=functools.partial(_pooled, path) if split == "test" and (path / POOLED).is_file() else None,
    )


def read_folder(path: Path, split: str):
    """A BEIR-format folder's data (``gapbench run DIR``, ``beir/NAME:data_dir=DIR``), its qrels file
    (``qrels/<split>.tsv[.gz]`` or ``<split>.tsv``) inside the folder: a link out of it is refused, as a path in the
    split is (the corpus and queries may be links: large files are shared)."""
    for rel in (f"qrels/{split}.tsv", f"qrels/{split}.tsv.gz", f"{split}.tsv"):
        if (path / rel).exists():
            confined(path / rel, path, f"BEIR folder {path}: the qrels of split={split},")
            break
    return read_beir_folder(path, split)


POOLED = "qrels/pooled.tsv"  # pooled judgements beside the gold ones, as `gapbench obliq build` writes them


def _pooled(path: Path, data) -> dict:
    """The gold task's pooled (P) judgements, reported beside its own (as OBLIQ-Bench's G and P)."""
    from gapbench.formats import read_beir_qrels

    return {"P": read_beir_qrels(confined(path / POOLED, path, f"BEIR folder {path}: pooled judgements"))
            .restrict(data.queries)}


def folder_options(path: str | Path):
    """The options a folder path takes after a colon (``DIR:split=dev``), as a factory ``f(**options) -> Task``."""

    def task(split: str = "test") -> Task:
        return beir_folder_task(path, split)

    return task
